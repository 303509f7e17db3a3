"""The `lsr bench encode` workload in PyTorch: SPLADE encoding (MLM logits + masked
max log(1 + relu)) of 32 x 128 random token ids with a random BERT-base-shaped BertForMaskedLM.

    python scripts/bench/encode.py [--device cpu|cuda] [--batch 32] [--seq-len 128] [--iterations 5]
"""
import argparse
import json
import resource
import time

import torch
from transformers import BertConfig, BertForMaskedLM


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cpu")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--seq-len", type=int, default=128)
    p.add_argument("--iterations", type=int, default=5)
    args = p.parse_args()
    torch.manual_seed(0)
    model = BertForMaskedLM(BertConfig()).eval().to(args.device)
    ids = (1000 + (torch.arange(args.batch * args.seq_len) * 7919) % 29000).reshape(args.batch, args.seq_len).to(args.device)
    mask = torch.ones_like(ids)

    def step():
        with torch.inference_mode():
            logits = model(input_ids=ids, attention_mask=mask).logits
            vectors = (torch.log1p(torch.relu(logits)) * mask.unsqueeze(-1)).amax(dim=1)
            return vectors.cpu()

    step()
    start = time.perf_counter()
    for _ in range(args.iterations):
        step()
    seconds = (time.perf_counter() - start) / args.iterations
    report = {
        "device": args.device, "threads": torch.get_num_threads(), "batch": args.batch,
        "seq_len": args.seq_len, "seconds_per_batch": seconds,
        "sequences_per_second": args.batch / seconds,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main()
