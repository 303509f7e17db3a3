"""The `lsr bench matmul` workload in PyTorch: matrix products [m, k]·[k, n] (the right operand
the transpose of an [n, k] matrix where the shape ends in `t`, as a linear layer's weight is), f32
with TF32 on or off, or bf16, in TFLOP/s; one JSON line per shape, in one process.

    python scripts/bench/matmul.py [--device cuda] [--shape NAME=MxKxN[t]]...
        [--precision f32|bf16] [--tf32 on|off] [--warmup 2] [--iterations 10]

Without `--shape`: the MLM head at the encoding shape, `head=32768x768x30522t`.
"""
import argparse
import json
import re
import time

import torch

SHAPE = re.compile(r"^([\w.-]+)=(\d+)x(\d+)x(\d+)(t?)$")


def shape(text):
    m = SHAPE.match(text)
    if not m:
        raise argparse.ArgumentTypeError(f"`{text}` is not NAME=MxKxN or NAME=MxKxNt")
    return m.group(1), int(m.group(2)), int(m.group(3)), int(m.group(4)), m.group(5) == "t"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--device", default="cuda")
    p.add_argument("--shape", type=shape, action="append")
    p.add_argument("--precision", choices=["f32", "bf16"], default="f32")
    p.add_argument("--tf32", choices=["on", "off"], default="off")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--iterations", type=int, default=10)
    args = p.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = args.tf32 == "on"
    dtype = torch.bfloat16 if args.precision == "bf16" else torch.float32
    sync = torch.cuda.synchronize if args.device.startswith("cuda") else (lambda: None)
    for name, m, k, n, transposed in args.shape or [shape("head=32768x768x30522t")]:
        lhs = torch.randn(m, k, device=args.device, dtype=dtype)
        rhs = torch.randn(n, k, device=args.device, dtype=dtype).T if transposed \
            else torch.randn(k, n, device=args.device, dtype=dtype)

        def run(times):
            sync()
            start = time.perf_counter()
            for _ in range(times):
                lhs @ rhs
            sync()
            return (time.perf_counter() - start) / max(times, 1)

        run(args.warmup)
        seconds = run(args.iterations)
        print(json.dumps({"shape": name, "device": args.device, "precision": args.precision,
                          "tf32": args.tf32, "m": m, "k": k, "n": n, "transposed_rhs": transposed,
                          "seconds": seconds, "tflops": 2 * m * k * n / seconds / 1e12}), flush=True)
        del lhs, rhs


if __name__ == "__main__":
    main()
