"""Where a GPU run of lsr spends its device time, from cubecl's profiling log (`cubecl.toml`:
`[profiling.logger] level = "basic"`, one `| <duration> | <kernel>` line per kernel launch):
kernels grouped by name, with their total time, launch count and share, beside the benchmark
that ran them. With `--minus`, the kernels of a shorter run of the same benchmark are taken
away and the rest divided by `--per`: what `--per` steady-state steps cost, without start-up,
kernel compilation or autotuning.

    python scripts/gpu/kernel_profile.py kernels.log [--bench bench.json]
        [--minus shorter.log --per STEPS] [--top 25]
"""
import argparse
import json
import os
import re

LINE = re.compile(r"^\|\s*([0-9.]+)(ns|µs|us|ms|s)\s*\|\s*(.+)$")
UNIT = {"ns": 1e-9, "µs": 1e-6, "us": 1e-6, "ms": 1e-3, "s": 1.0}


def read(path):
    """{kernel: (seconds, launches)} of one log (empty when there is none: not a GPU run)."""
    kernels = {}
    if os.path.exists(path):
        for line in open(path, errors="replace"):
            m = LINE.match(line.strip())
            if m:
                name = m.group(3).strip()[:160]
                seconds = float(m.group(1)) * UNIT[m.group(2)]
                total, count = kernels.get(name, (0.0, 0))
                kernels[name] = (total + seconds, count + 1)
    return kernels


def main():
    p = argparse.ArgumentParser()
    p.add_argument("log")
    p.add_argument("--bench")
    p.add_argument("--minus")
    p.add_argument("--per", type=float, default=1.0)
    p.add_argument("--top", type=int, default=25)
    args = p.parse_args()
    kernels = read(args.log)
    if args.minus:
        shorter = read(args.minus)
        kernels = {k: ((t - shorter.get(k, (0.0, 0))[0]) / args.per, (c - shorter.get(k, (0.0, 0))[1]) / args.per)
                   for k, (t, c) in kernels.items()}
    total = sum(t for t, _ in kernels.values())
    top = sorted(kernels.items(), key=lambda kv: -kv[1][0])[: args.top]
    report = {
        "per_step": bool(args.minus),
        "launches": sum(c for _, c in kernels.values()),
        "distinct_kernels": len(kernels),
        "kernel_seconds": total,
        "top": [{"kernel": k, "seconds": t, "launches": c, "share": t / total if total else None}
                for k, (t, c) in top],
    }
    if args.bench and os.path.exists(args.bench):
        lines = [l for l in open(args.bench) if l.strip()]
        if lines:
            report["bench"] = json.loads(lines[-1])
    print(json.dumps(report))


if __name__ == "__main__":
    main()
