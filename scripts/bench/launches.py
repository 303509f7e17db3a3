"""What a training step and an encoded batch cost a GPU, lsr beside PyTorch at the same shape:
kernel launches (lsr: counted by cubecl as they are issued, `lsr bench ... --launches`;
PyTorch: the operators a CUDA run would launch, `train_step.py --count`, `encode.py --count`)
per region of the model, and the bytes kept for the backward pass. Writes the JSON of every
run and prints the tables docs/perf-gpu.md shows.

    python scripts/bench/launches.py --lsr target/release/lsr [--device wgpu] [--out FILE]

On a machine without a GPU, `--device wgpu` runs on Mesa's software Vulkan (lavapipe): the
first run tunes every kernel (minutes); the kernel cache keeps the choices for the next.
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
RUNS = [("train", "f32"), ("train", "bf16-mixed"), ("encode", "f32")]
TORCH_PRECISION = {"f32": "f32", "bf16-mixed": "bf16"}
# Regions in the order a step runs them.
REGIONS = ["embedding", "attention", "ffn", "head", "loss", "metrics", "loss-backward",
           "head-backward", "ffn-backward", "attention-backward", "embedding-backward",
           "gradient-norm", "optimizer", "unlabelled"]


def json_lines(command):
    out = subprocess.run(command, check=True, capture_output=True, text=True, cwd=os.getcwd()).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def lsr(binary, device, kind, precision):
    bench = "train-step" if kind == "train" else "encode"
    [report] = json_lines([binary, "bench", bench, "--device", device, "--launches",
                           "--precision", precision, "--json"])
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
    args = p.parse_args()
    results = {}
    lines = []
    for kind, precision in RUNS:
        ours = lsr(args.lsr, args.device, kind, precision)
        theirs = torch(args.torch_device, kind, precision)
        results[f"{kind}-{precision}"] = {"lsr": ours, "torch": theirs}
        lines += table(kind, precision, ours, theirs) + [""]
    limits = results["train-f32"]["lsr"]["launches"].get("limits")
    lines.append(f"Device limits that decide fusion ({args.device}): {json.dumps(limits)}")
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
