"""The `lsr bench train-step` workload in PyTorch: one SPLADE training step with a random
BERT-base-shaped BertForMaskedLM: N queries x 32 tokens and 2N documents x 128 tokens (a
positive and a hard negative per query), SPLADE max pooling, InfoNCE over in-batch positives
plus the hard negatives, FLOPS on queries and documents, backward, AdamW (lr 2e-5, eps 1e-8,
weight decay 0.01), dropout off (lsr has none). Token ids as in lsr's benchmark.

Precision: f32 (with TF32 matmuls on or off, `--tf32`), or bf16 autocast around the forward
pass and the loss (AMP as PyTorch users train SPLADE; f32 weights and AdamW state).

    python scripts/bench/train_step.py [--device cpu|cuda] [--queries 8] [--query-len 32]
        [--document-len 128] [--precision f32|bf16] [--tf32 on|off] [--iterations 3] [--profile]
        [--count] [--hidden 768] [--adamw foreach|fused]

`--profile` prints where one step's time goes (torch.profiler, by operator) to stderr.
`--count` counts one steady-state step instead of timing it (`counting.py`): operators that
launch kernels, by region, and bytes saved for backward, for AdamW run both ways (a JSON line
each, foreach then fused, or the one `--adamw` names), at the shape `lsr bench train-step --launches` counts at (hidden 128,
BERT-base's structure otherwise; 4 queries x 16, 8 documents x 32) unless the options say.
"""
import argparse
import contextlib
import json
import resource
import time

import torch
from transformers import BertForMaskedLM

import counting
from profiling import print_profile


def tokens(batch, length, device):
    ids = (1000 + (torch.arange(batch * length) * 7919) % 29000).reshape(batch, length).to(device)
    return ids, torch.ones_like(ids)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cpu")
    # Defaults: 8 x 32 and 16 x 128, or lsr's count shape (4 x 16, 8 x 32) with --count.
    p.add_argument("--queries", type=int)
    p.add_argument("--query-len", type=int)
    p.add_argument("--document-len", type=int)
    p.add_argument("--precision", choices=["f32", "bf16"], default="f32")
    p.add_argument("--tf32", choices=["on", "off"], default="off")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--iterations", type=int, default=3)
    p.add_argument("--profile", action="store_true")
    p.add_argument("--count", action="store_true")
    p.add_argument("--hidden", type=int)
    # foreach when timing; both, one after the other, when counting.
    p.add_argument("--adamw", choices=["foreach", "fused"])
    args = p.parse_args()
    for name, timed, counted in [("queries", 8, 4), ("query_len", 32, 16), ("document_len", 128, 32)]:
        if getattr(args, name) is None:
            setattr(args, name, counted if args.count else timed)
    torch.backends.cuda.matmul.allow_tf32 = args.tf32 == "on"
    torch.backends.cudnn.allow_tf32 = args.tf32 == "on"
    torch.manual_seed(0)
    hidden = args.hidden or (128 if args.count else 768)
    model = BertForMaskedLM(counting.bert_config(hidden)).train().to(args.device)
    regions = counting.watch(model) if args.count else None
    q_ids, q_mask = tokens(args.queries, args.query_len, args.device)
    d_ids, d_mask = tokens(2 * args.queries, args.document_len, args.device)
    device_type = args.device.split(":")[0]
    autocast = (lambda: torch.autocast(device_type, dtype=torch.bfloat16)) if args.precision == "bf16" else contextlib.nullcontext

    enter = regions.enter if regions else (lambda region: None)

    def splade(ids, mask):
        logits = model(input_ids=ids, attention_mask=mask).logits
        pooled = (torch.log1p(torch.relu(logits)) * mask.unsqueeze(-1)).amax(dim=1)
        return regions.exit_head(pooled) if regions else pooled

    def flops(reps):
        return (reps.abs().mean(dim=0) ** 2).sum()

    def step(optim):
        with autocast():
            q, d = splade(q_ids, q_mask), splade(d_ids, d_mask)
            enter("loss")
            q, d = q.float(), d.float()
            b = q.shape[0]
            logits = torch.cat([q @ d[:b].T, (q * d[b:]).sum(dim=1, keepdim=True)], dim=1)
            ranking = -torch.log_softmax(logits, dim=1)[torch.arange(b), torch.arange(b)].mean()
            loss = ranking + 3e-4 * flops(q) + 1e-4 * flops(d)
        optim.zero_grad(set_to_none=True)
        enter("loss-backward")
        loss.backward()
        enter("optimizer")
        optim.step()
        return loss.item()  # waits for the device

    def adamw(kind):
        return torch.optim.AdamW(model.parameters(), lr=2e-5, betas=(0.9, 0.999), eps=1e-8,
                                 weight_decay=0.01, **{kind: True})

    shape = {"queries": args.queries, "documents": 2 * args.queries, "query_len": args.query_len,
             "document_len": args.document_len, "hidden": hidden, "precision": args.precision,
             "device": args.device, "torch": torch.__version__}
    if args.count:
        for kind in [args.adamw] if args.adamw else ["foreach", "fused"]:
            optim = adamw(kind)
            for _ in range(max(args.warmup, 2)):
                step(optim)
            counted = counting.count(lambda: step(optim), model, device_type)
            print(json.dumps({**shape, "adamw": kind, **counted}))
        return
    args.adamw = args.adamw or "foreach"
    optim = adamw(args.adamw)
    for _ in range(args.warmup):
        step(optim)
    if args.profile:
        print_profile(lambda: step(optim))
    cuda = device_type == "cuda"
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    for _ in range(args.iterations):
        step(optim)
    seconds = (time.perf_counter() - start) / args.iterations
    report = {
        "device": args.device, "threads": torch.get_num_threads(), "queries": args.queries,
        "documents": 2 * args.queries, "query_len": args.query_len,
        "document_len": args.document_len, "precision": args.precision, "tf32": args.tf32,
        "iterations": args.iterations, "seconds_per_step": seconds,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "torch": torch.__version__, "adamw": args.adamw, "hidden": hidden,
    }
    if cuda:
        report["peak_allocated_mib"] = torch.cuda.max_memory_allocated() / 2**20
        report["peak_reserved_mib"] = torch.cuda.max_memory_reserved() / 2**20
    print(json.dumps(report))


if __name__ == "__main__":
    main()
