"""Turns the GPU check's results.jsonl into summary.json and summary.md: parity verdicts,
lsr against PyTorch on the same device (steps/s and sequences/s ratios against the targets of
the README's performance section, peak device memory), the miniature cells, and every step
that failed, timed out or was skipped.

    python scripts/gpu/summarize.py results.jsonl --out DIR [--elapsed SECONDS]
"""
import argparse
import json
import os

# lsr's f32 matmuls run in TF32 on tensor cores (cubecl offers no switch), so its f32 is
# compared with PyTorch's f32 with TF32 on; bf16-mixed with PyTorch's bf16 autocast.
TARGETS = {("train", "f32"): ("f32", "on", 1.0), ("train", "bf16-mixed"): ("bf16", "off", 0.8),
           ("encode", "f32"): ("f32", "on", 1.0), ("encode", "bf16-mixed"): ("bf16", "off", 1.0)}


def speed(record):
    r = record.get("result") or {}
    if record["meta"]["kind"] == "train" and "seconds_per_step" in r:
        return 1.0 / r["seconds_per_step"]
    return r.get("sequences_per_second")


def memory(record):
    """Peak device memory: sampled from the driver (whole process), else the framework's."""
    if record.get("gpu_peak_mib") is not None:
        return record["gpu_peak_mib"]
    r = record.get("result") or {}
    return r.get("peak_reserved_mib", r.get("peak_rss_mib"))


def fmt(x, digits=3):
    return "–" if x is None else f"{x:.{digits}g}"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("results")
    p.add_argument("--out", required=True)
    p.add_argument("--elapsed", type=float)
    args = p.parse_args()
    records = [json.loads(line) for line in open(args.results) if line.strip()]
    machine = open(os.path.join(args.out, "machine.txt")).read() if os.path.exists(os.path.join(args.out, "machine.txt")) else ""

    def find(**meta):
        return [r for r in records if all(r["meta"].get(k) == v for k, v in meta.items()) and r["status"] == "ok"]

    comparisons = []
    for r in records:
        m = r["meta"]
        if m.get("tool") != "lsr" or m.get("kind") not in ("train", "encode") or r["status"] != "ok":
            continue
        target = TARGETS.get((m["kind"], m["precision"]))
        if not target:
            continue
        torch_precision, tf32, goal = target
        for t in find(tool="torch", kind=m["kind"], shape=m["shape"], precision=torch_precision):
            ratio = speed(r) / speed(t) if speed(r) and speed(t) else None
            mem_ratio = memory(r) / memory(t) if memory(r) and memory(t) else None
            comparisons.append({
                "kind": m["kind"], "shape": m["shape"], "lsr": f'{m.get("binary")}/{m["device"]}/{m["precision"]}',
                "torch": f'{torch_precision}, TF32 {t["meta"]["tf32"]}', "speed_ratio": ratio,
                "memory_ratio": mem_ratio, "target": goal if t["meta"]["tf32"] == tf32 else None,
                "meets_target": None if t["meta"]["tf32"] != tf32 or ratio is None else ratio >= goal,
            })

    summary = {"elapsed_s": args.elapsed, "machine": machine, "records": records, "comparisons": comparisons}
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)

    md = ["# GPU check", "", "```", machine.strip(), "```", ""]
    if args.elapsed:
        md += [f"Wall time of the check: {args.elapsed:.0f} s.", ""]
    md += ["## Parity", "", "| run | device | precision | verdict | worst comparison |", "|---|---|---|---|---|"]
    for r in records:
        if r["meta"].get("kind") != "parity" or r["meta"].get("tool") != "lsr":
            continue
        res = r.get("result") or {}
        items = res.get("items", [])
        worst = max(items, key=lambda i: (i["max_abs"] or 0) / i["bound"], default=None)
        verdict = r["status"] if not res else ("pass" if res.get("pass") else "FAIL") + f' ({res.get("tolerance")})'
        detail = f'{worst["name"]} {worst["what"]}: {worst["max_abs"]:.2e} ≤ {worst["bound"]:.0e}' if worst else ""
        md.append(f'| {r["meta"].get("binary")} | {r["meta"]["device"]} | {r["meta"].get("precision", "f32")} | {verdict} | {detail} |')
    for r in find(tool="torch", kind="parity"):
        rows = (r.get("result") or {}).get("fixtures", {})
        if rows:
            md += ["", "PyTorch on the same device, max |Δ logits| against the fixtures (TF32 off / on): " +
                   ", ".join(f"{n} {v['f32']:.1e} / {v['tf32']:.1e}" for n, v in rows.items())]
    md += ["", "## Speed and memory", "", "| step | status | per second | peak device MiB | wall s |", "|---|---|---|---|---|"]
    for r in records:
        if r["meta"].get("kind") in ("train", "encode"):
            unit = "steps" if r["meta"]["kind"] == "train" else "sequences"
            md.append(f'| {r["step"]} | {r["status"]} | {fmt(speed(r))} {unit} | {fmt(memory(r), 5)} | {fmt(r.get("wall_s"))} |')
    md += ["", "| lsr | PyTorch | shape | lsr/PyTorch speed | target | memory ratio |", "|---|---|---|---|---|---|"]
    for c in comparisons:
        target = "" if c["target"] is None else f'≥ {c["target"]}: {"met" if c["meets_target"] else "MISSED"}'
        md.append(f'| {c["lsr"]} | {c["torch"]} | {c["kind"]} {c["shape"]} | {fmt(c["speed_ratio"])} | {target} | {fmt(c["memory_ratio"])} |')
    md += ["", "## Miniature cells (train, evaluate)", "", "| cell | status | wall s | nDCG@10 |", "|---|---|---|---|"]
    for r in records:
        if r["meta"].get("kind") == "mini":
            datasets = ((r.get("result") or {}).get("datasets") or {}).items()
            ndcg = ", ".join(f'{name} {d["metrics"].get("ndcg@10", float("nan")):.3f}' for name, d in datasets)
            md.append(f'| {r["meta"]["cell"]} | {r["status"]} | {fmt(r.get("wall_s"))} | {ndcg} |')
    problems = [r for r in records if r["status"] != "ok"]
    if problems:
        md += ["", "## Not ok", ""] + [f'- {r["step"]}: {r["status"]}' for r in problems]
    with open(os.path.join(args.out, "summary.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
