"""The `lsr bench matmul` workload in PyTorch: one [m, k]·[k, n] product (the right operand
optionally the transpose of an [n, k] matrix), f32 with TF32 on or off, or bf16, in TFLOP/s.

    python scripts/bench/matmul.py [--device cuda] [--m 32768] [--k 768] [--n 30522]
        [--transposed-rhs] [--precision f32|bf16] [--tf32 on|off] [--iterations 10]
"""
import argparse
import json
import time

import torch


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cuda")
    p.add_argument("--m", type=int, default=32768)
    p.add_argument("--k", type=int, default=768)
    p.add_argument("--n", type=int, default=30522)
    p.add_argument("--transposed-rhs", action="store_true")
    p.add_argument("--precision", choices=["f32", "bf16"], default="f32")
    p.add_argument("--tf32", choices=["on", "off"], default="off")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--iterations", type=int, default=10)
    args = p.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = args.tf32 == "on"
    dtype = torch.bfloat16 if args.precision == "bf16" else torch.float32
    lhs = torch.randn(args.m, args.k, device=args.device, dtype=dtype)
    rhs = torch.randn(args.n, args.k, device=args.device, dtype=dtype).T if args.transposed_rhs \
        else torch.randn(args.k, args.n, device=args.device, dtype=dtype)

    def run(times):
        sync = torch.cuda.synchronize if args.device.startswith("cuda") else (lambda: None)
        sync()
        start = time.perf_counter()
        for _ in range(times):
            lhs @ rhs
        sync()
        return (time.perf_counter() - start) / max(times, 1)

    run(args.warmup)
    seconds = run(args.iterations)
    print(json.dumps({"device": args.device, "precision": args.precision, "tf32": args.tf32,
                      "m": args.m, "k": args.k, "n": args.n, "transposed_rhs": args.transposed_rhs,
                      "seconds": seconds, "tflops": 2 * args.m * args.k * args.n / seconds / 1e12}))


if __name__ == "__main__":
    main()
