"""The `lsr bench encode` workload in PyTorch: SPLADE encoding (MLM logits + masked
max log(1 + relu)) of B x L token ids with a random BERT-base-shaped BertForMaskedLM, in f32
(TF32 matmuls on or off, `--tf32`) or under bf16 autocast.

    python scripts/bench/encode.py [--device cpu|cuda] [--batch 32] [--seq-len 128]
        [--precision f32|bf16] [--tf32 on|off] [--iterations 5] [--profile]

`--profile` prints where one batch's time goes (torch.profiler, by operator) to stderr.
`--count` counts one batch instead of timing it (`counting.py`: operators that launch kernels,
by region), at the shape `lsr bench encode --launches` counts at (hidden 128, BERT-base's
structure otherwise; 8 texts x 32 tokens) unless the options say.
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


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cpu")
    # Defaults: 32 x 128, or lsr's count shape (8 x 32) with --count.
    p.add_argument("--batch", type=int)
    p.add_argument("--seq-len", type=int)
    p.add_argument("--precision", choices=["f32", "bf16"], default="f32")
    p.add_argument("--tf32", choices=["on", "off"], default="off")
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--iterations", type=int, default=5)
    p.add_argument("--profile", action="store_true")
    p.add_argument("--count", action="store_true")
    p.add_argument("--hidden", type=int)
    args = p.parse_args()
    args.batch = args.batch or (8 if args.count else 32)
    args.seq_len = args.seq_len or (32 if args.count else 128)
    torch.backends.cuda.matmul.allow_tf32 = args.tf32 == "on"
    torch.backends.cudnn.allow_tf32 = args.tf32 == "on"
    torch.manual_seed(0)
    hidden = args.hidden or (128 if args.count else 768)
    model = BertForMaskedLM(counting.bert_config(hidden)).eval().to(args.device)
    regions = counting.watch(model) if args.count else None
    ids = (1000 + (torch.arange(args.batch * args.seq_len) * 7919) % 29000).reshape(args.batch, args.seq_len).to(args.device)
    mask = torch.ones_like(ids)
    device_type = args.device.split(":")[0]
    autocast = (lambda: torch.autocast(device_type, dtype=torch.bfloat16)) if args.precision == "bf16" else contextlib.nullcontext

    def step():
        with torch.inference_mode(), autocast():
            logits = model(input_ids=ids, attention_mask=mask).logits
            vectors = (torch.log1p(torch.relu(logits)) * mask.unsqueeze(-1)).amax(dim=1)
            return vectors.float().cpu()

    for _ in range(args.warmup):
        step()
    if args.count:
        counted = counting.count(step, model, device_type)
        print(json.dumps({"batch": args.batch, "seq_len": args.seq_len, "hidden": hidden,
                          "precision": args.precision, "device": args.device,
                          "torch": torch.__version__, **counted}))
        return
    if args.profile:
        print_profile(step)
    cuda = device_type == "cuda"
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    for _ in range(args.iterations):
        step()
    seconds = (time.perf_counter() - start) / args.iterations
    report = {
        "device": args.device, "threads": torch.get_num_threads(), "batch": args.batch,
        "seq_len": args.seq_len, "precision": args.precision, "tf32": args.tf32,
        "iterations": args.iterations, "seconds_per_batch": seconds,
        "sequences_per_second": args.batch / seconds,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "torch": torch.__version__, "hidden": hidden,
    }
    if cuda:
        report["peak_allocated_mib"] = torch.cuda.max_memory_allocated() / 2**20
        report["peak_reserved_mib"] = torch.cuda.max_memory_reserved() / 2**20
    print(json.dumps(report))


if __name__ == "__main__":
    main()
