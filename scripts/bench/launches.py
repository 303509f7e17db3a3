"""What a training step and an encoded batch cost a GPU, lsr beside PyTorch at the same shape:
kernel launches (lsr: counted by cubecl as they are issued, `lsr bench ... --launches`;
PyTorch: the operators a CUDA run would launch, `train_step.py --count`, `encode.py --count`)
per region of the model, and the bytes kept for the backward pass. Writes the JSON of every
run and prints the tables docs/perf-gpu.md shows.

    python scripts/bench/launches.py --lsr target/release/lsr [--device wgpu] [--out FILE]
        [--attention fused|composed] [--autotune minimal|...] [--lsr-only]

lsr runs with `LSR_ATTENTION` and `CUBECL_AUTOTUNE_LEVEL` set from `--attention` (fused: the
kernels the counts judge) and `--autotune` (minimal: the fewest candidates, so that a cold kernel
cache costs minutes, not the half hour full tuning takes on a 2-core machine; the choice moves
the counts a little, so the JSON records it). On a machine without a GPU, `--device wgpu` runs
on Mesa's software Vulkan (lavapipe): the first run compiles and tunes every kernel; the kernel
cache keeps them for the next. Each lsr run's wall time is printed and kept. `--lsr-only`
leaves PyTorch out (a machine without torch) and prints lsr's totals.
"""
import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
RUNS = [("train", "f32"), ("train", "bf16-mixed"), ("encode", "f32")]
TORCH_PRECISION = {"f32": "f32", "bf16-mixed": "bf16"}
# Regions in the order a step runs them.
REGIONS = ["embedding", "attention", "ffn", "head", "loss", "metrics", "loss-backward",
           "head-backward", "ffn-backward", "attention-backward", "embedding-backward",
           "gradient-norm", "optimizer", "unlabelled"]


def json_lines(command, env=None):
    out = subprocess.run(command, check=True, capture_output=True, text=True, cwd=os.getcwd(),
                         env=env).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def lsr(binary, device, kind, precision, settings):
    bench = "train-step" if kind == "train" else "encode"
    env = dict(os.environ, LSR_ATTENTION=settings["attention"],
               CUBECL_AUTOTUNE_LEVEL=settings["autotune"])
    start = time.monotonic()
    [report] = json_lines([binary, "bench", bench, "--device", device, "--launches",
                           "--precision", precision, "--json"], env)
    report["wall_seconds"] = round(time.monotonic() - start, 1)
    report["settings"] = settings
    return report


def torch(device, kind, precision):
    script = "train_step.py" if kind == "train" else "encode.py"
    return json_lines([sys.executable, os.path.join(HERE, script), "--count", "--device",
                       device, "--precision", TORCH_PRECISION[precision]])


def table(kind, precision, ours, theirs):
    """Markdown rows: each region's launches, lsr's and PyTorch's (foreach, fused AdamW)."""
    counts = ours["launches"]
    regions = counts["with_regions"]["by_region"]
    by_adamw = {t.get("adamw", "-"): t for t in theirs}
    columns = list(by_adamw)
    rows = [f"### {kind}, {precision}", "",
            "| region | lsr | " + " | ".join(f"PyTorch ({c} AdamW)" if c != "-" else "PyTorch" for c in columns) + " |",
            "|---|---|" + "---|" * len(columns)]
    for region in REGIONS:
        values = [by_adamw[c]["by_region"].get(region) for c in columns]
        if region in regions or any(values):
            rows.append(f"| {region} | {regions.get(region, 0)} | " +
                        " | ".join(str(v or 0) for v in values) + " |")
    totals = " | ".join(str(by_adamw[c]["ops"]) for c in columns)
    ratios = " | ".join(f'{counts["total"] / by_adamw[c]["ops"]:.2f}×' for c in columns)
    rows += [f'| **total** (with region markers: {counts["with_regions"]["total"]}) | **{counts["total"]}** | {totals} |',
             f"| lsr / PyTorch | | {ratios} |"]
    kept = counts.get("activation_bytes")
    if kept is not None:
        saved = " | ".join(f'{by_adamw[c]["saved_bytes"] / 2**20:.1f}' for c in columns)
        rows.append(f"| MiB kept for the backward pass | {kept / 2**20:.1f} | {saved} |")
    return rows


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--lsr", required=True)
    p.add_argument("--device", default="wgpu")
    p.add_argument("--torch-device", default="cpu")
    p.add_argument("--out")
    p.add_argument("--attention", default="fused", choices=["fused", "composed"])
    p.add_argument("--autotune", default="minimal")
    p.add_argument("--lsr-only", action="store_true")
    args = p.parse_args()
    settings = {"attention": args.attention, "autotune": args.autotune}
    results = {}
    lines = [f"lsr: LSR_ATTENTION={args.attention} CUBECL_AUTOTUNE_LEVEL={args.autotune}", ""]
    for kind, precision in RUNS:
        ours = lsr(args.lsr, args.device, kind, precision, settings)
        counts = ours["launches"]
        lines.append(f"{kind}, {precision}: lsr {counts['total']} launches "
                     f"({counts['with_regions']['total']} with markers) in {ours['wall_seconds']} s")
        if args.lsr_only:
            results[f"{kind}-{precision}"] = {"lsr": ours}
            continue
        theirs = torch(args.torch_device, kind, precision)
        results[f"{kind}-{precision}"] = {"lsr": ours, "torch": theirs}
        lines += [""] + table(kind, precision, ours, theirs) + [""]
    limits = results["train-f32"]["lsr"]["launches"].get("limits")
    lines.append(f"Device limits that decide fusion ({args.device}): {json.dumps(limits)}")
    if args.out:
        # Written whole or not at all: an earlier run's file is never left half replaced.
        with open(args.out + ".tmp", "w") as f:
            json.dump(results, f, indent=1)
        os.replace(args.out + ".tmp", args.out)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
