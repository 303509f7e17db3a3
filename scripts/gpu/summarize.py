"""Turns the GPU check's results.jsonl into summary.json and summary.md: parity verdicts per way
of computing products (`LSR_MATMUL`) beside PyTorch's own deviations, the modes dropped after a
failed parity, lsr against PyTorch on the same device per way of computing products (speed
ratios against the targets, the products alone per shape, peak memory two ways), cuBLASLt's
products, fallbacks, host syncs and device time, what the kernel cache saves, a table1 cell's
time estimated from the measured steps, where lsr's device time goes, kernel launches per step
beside the WGPU proxy's (`docs/gpu/launches-wgpu.json`, `scripts/bench/launches.py`) and
PyTorch's, the miniature cells, and every step that failed, timed out, was dropped or skipped.

    python scripts/gpu/summarize.py results.jsonl --out DIR [--elapsed SECONDS] [--proxy FILE]
"""
import argparse
import json
import os

# lsr's f32 matmuls run in TF32 on tensor cores (cubecl offers no switch; cuBLASLt is asked for
# it), so its f32 is compared with PyTorch's f32 with TF32 on; bf16-mixed with PyTorch's bf16
# autocast.
SAME = {"f32": ("f32", "on"), "bf16-mixed": ("bf16", "off")}
TARGET = {("train", "f32"): 1.0, ("train", "bf16-mixed"): 1.0, ("encode", "f32"): 1.5,
          ("encode", "bf16-mixed"): 1.5, ("matmul", "f32"): 0.9, ("matmul", "bf16-mixed"): 0.9}
# A table1 cell: the recipe's 150k steps at 4× the benchmark's batch (the recipe's 128 queries,
# measured as 4 steps of 32), as docs/matrix.md extrapolates; evaluation not included.
CELL_STEPS, CELL_BATCHES = 150_000, 4


def speed(record):
    r = record.get("result") or {}
    kind = record["meta"]["kind"]
    if kind == "train" and "seconds_per_step" in r:
        return 1.0 / r["seconds_per_step"]
    if kind == "matmul":
        return r.get("tflops")
    return r.get("sequences_per_second")


def held(record):
    """What the framework's allocator held: lsr's pool after the timed steps, PyTorch's peak."""
    r = record.get("result") or {}
    return r.get("device_reserved_mib", r.get("peak_reserved_mib"))


def fmt(x, digits=3):
    return "–" if x is None else f"{x:.{digits}g}"


def ratio(a, b):
    return a / b if a and b else None


def parse(number, line):
    """One line of results.jsonl; a line that does not parse is kept as a record saying so."""
    try:
        return json.loads(line)
    except ValueError:
        return {"step": f"line {number}", "status": "unparsable record", "meta": {}, "result": None,
                "raw": line[:200]}


def lt(record):
    """The cuBLASLt totals of a bench (products, fallbacks, host sync and device seconds), per
    timed iteration."""
    c = (record.get("result") or {}).get("cublas")
    if not c:
        return None
    per = max(c.get("iterations") or 1, 1)
    device = c.get("device_seconds")
    return {"library": c.get("library"), "products": c["products"] / per, "fallbacks": c["fallbacks"] / per,
            "host_sync_s": c["host_sync_seconds"] / per, "device_s": None if device is None else device / per}


def launch_rows(records, proxy):
    """Markdown rows of the launch counts: lsr's per region on this device against the proxy's
    (the ratio calibrates it), and PyTorch's operators against the CUDA kernels they launched."""
    rows = []
    for r in records:
        m, res = r["meta"], r.get("result") or {}
        if m.get("kind") != "launches" or r["status"] != "ok":
            continue
        key = f'{m["shape"]}-{m["precision"]}'
        if m["tool"] == "lsr":
            here = res.get("launches") or {}
            there = ((proxy.get(key) or {}).get("lsr") or {}).get("launches") or {}
            regions = here.get("with_regions", {}).get("by_region", {})
            theirs = there.get("with_regions", {}).get("by_region", {})
            for region in sorted(set(regions) | set(theirs)) + ["total"]:
                a = here.get("total") if region == "total" else regions.get(region)
                b = there.get("total") if region == "total" else theirs.get(region)
                rows.append(f'| lsr {key} | {region} | {fmt(a, 6)} | {fmt(b, 6)} | {fmt(ratio(a, b))} |')
        else:
            label = f'PyTorch {key}' + (f' {m["adamw"]} AdamW' if m.get("adamw") else "")
            rows.append(f'| {label} | operators → CUDA kernels | {fmt(res.get("cuda_kernels"), 6)} | '
                        f'{fmt(res.get("ops"), 6)} | {fmt(ratio(res.get("cuda_kernels"), res.get("ops")))} |')
    return rows


def main():
    p = argparse.ArgumentParser()
    p.add_argument("results")
    p.add_argument("--out", required=True)
    p.add_argument("--elapsed", type=float)
    p.add_argument("--proxy", default=os.path.join(os.path.dirname(__file__), "../../docs/gpu/launches-wgpu.json"))
    args = p.parse_args()
    proxy = json.load(open(args.proxy)) if os.path.exists(args.proxy) else {}
    records = [parse(number, line) for number, line in enumerate(open(args.results), 1) if line.strip()]
    machine_path = os.path.join(args.out, "machine.txt")
    machine = open(machine_path).read() if os.path.exists(machine_path) else ""

    def ok(**meta):
        return [r for r in records if r["status"] == "ok" and all(r["meta"].get(k) == v for k, v in meta.items())]

    def lsr_label(m):
        # Runs made before LSR_ATTENTION existed have no `attention` (they were composed).
        return f'{m["device"]} {m.get("matmul", "cube")} {m.get("attention", "composed")} attention {m["precision"]}'

    comparisons = []
    for r in ok(tool="lsr"):
        m = r["meta"]
        if m["kind"] not in ("train", "encode", "matmul") or m.get("precision") not in SAME:
            continue
        torch_precision, tf32 = SAME[m["precision"]]
        for t in ok(tool="torch", kind=m["kind"], shape=m.get("shape"), precision=torch_precision, tf32=tf32):
            goal = TARGET.get((m["kind"], m["precision"]))
            speed_ratio = ratio(speed(r), speed(t))
            comparisons.append({
                "kind": m["kind"], "shape": m.get("shape"),
                "lsr": lsr_label(m),
                "torch": f'{torch_precision}, TF32 {tf32}', "speed_ratio": speed_ratio,
                "held_memory_ratio": ratio(held(r), held(t)),
                "process_peak_ratio": ratio(r.get("gpu_peak_mib"), t.get("gpu_peak_mib")),
                "target": goal, "meets_target": None if goal is None or speed_ratio is None else speed_ratio >= goal,
            })

    cells = []
    for r in ok(tool="lsr", kind="train", shape="recipe"):
        step = (r.get("result") or {}).get("seconds_per_step")
        if step:
            m = r["meta"]
            cells.append({"lsr": lsr_label(m),
                          "hours": step * CELL_BATCHES * CELL_STEPS / 3600})
    for t in ok(tool="torch", kind="train", shape="recipe"):
        step = (t.get("result") or {}).get("seconds_per_step")
        if step:
            m = t["meta"]
            cells.append({"lsr": f'PyTorch {m["precision"]}, TF32 {m["tf32"]}',
                          "hours": step * CELL_BATCHES * CELL_STEPS / 3600})

    dropped = [r["meta"].get("matmul_dropped") for r in records if r["meta"].get("kind") == "drop"]
    cublas = [{"step": r["step"], **lt(r)} for r in records if lt(r)]
    libraries = sorted({c["library"] for c in cublas if c.get("library")})
    cache = {r["meta"]["cache"]: r.get("wall_s") for r in ok(kind="cache")}
    summary = {"elapsed_s": args.elapsed, "machine": machine, "records": records,
               "comparisons": comparisons, "table1_cell_hours": cells, "dropped_modes": dropped,
               "cublaslt": {"libraries": libraries, "per_iteration": cublas},
               "kernel_cache_wall_s": cache}
    with open(os.path.join(args.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)

    md = ["# GPU check", "", "```", machine.strip(), "```", ""]
    if args.elapsed:
        md += [f"Wall time of the check: {args.elapsed:.0f} s.", ""]

    md += ["## Parity", "", "| device | products | precision | verdict | closest to its bound |", "|---|---|---|---|---|"]
    for r in records:
        if r["meta"].get("kind") not in ("parity", "fallback") or r["meta"].get("tool") != "lsr":
            continue
        res = r.get("result") or {}
        items = res.get("items", [])
        worst = max(items, key=lambda i: (i["max_abs"] if i["max_abs"] is not None else float("inf")) / i["bound"], default=None)
        verdict = r["status"] if not res else ("pass" if res.get("pass") else "FAIL") + f' ({res.get("tolerance")})'
        detail = f'{worst["name"]} {worst["what"]}: {worst["max_abs"]:.2e} ≤ {worst["bound"]:.1e}' if worst else ""
        products = r["meta"].get("matmul", "cube") + (" (every product refused: fallback)" if r["meta"]["kind"] == "fallback" else "")
        md.append(f'| {r["meta"]["device"]} | {products} | {r["meta"].get("precision", "f32")} | {verdict} | {detail} |')
    if dropped:
        md += ["", "Dropped after a parity that was not ok (their later steps did not run): " + ", ".join(dropped) + "."]
    for r in ok(tool="torch", kind="parity"):
        rows = (r.get("result") or {}).get("fixtures", {})
        if rows:
            md += ["", "PyTorch on the same device, max |Δ logits| against the fixtures (f32 / TF32 / bf16 autocast):", ""]
            md += [f"- {n}: {v['f32']:.1e} / {v['tf32']:.1e} / {v['bf16']:.1e}" for n, v in rows.items()]

    md += ["", "## Speed and memory", "",
           "| step | status | per second | process peak MiB | allocator MiB | wall s |", "|---|---|---|---|---|---|"]
    unit = {"train": "steps", "encode": "sequences", "matmul": "TFLOP"}
    for r in records:
        kind = r["meta"].get("kind")
        if kind in unit:
            md.append(f'| {r["step"]} | {r["status"]} | {fmt(speed(r))} {unit[kind]} | {fmt(r.get("gpu_peak_mib"), 5)} | '
                      f'{fmt(held(r), 5)} | {fmt(r.get("wall_s"))} |')
    md += ["", "Process peak: device memory in use while the process ran, sampled from the driver every 50 ms "
               "(lsr's includes autotuning's trial buffers); allocator: what lsr's memory pool holds after the "
               "timed steps, PyTorch's `max_memory_reserved`.", "",
           "| lsr | PyTorch | what | lsr/PyTorch speed | target | allocator ratio | process peak ratio |",
           "|---|---|---|---|---|---|---|"]
    for c in comparisons:
        target = "" if c["target"] is None else f'≥ {c["target"]}: {"met" if c["meets_target"] else "MISSED"}'
        md.append(f'| {c["lsr"]} | {c["torch"]} | {c["kind"]} {c["shape"]} | {fmt(c["speed_ratio"])} | {target} | '
                  f'{fmt(c["held_memory_ratio"])} | {fmt(c["process_peak_ratio"])} |')

    md += ["", f"A table1 cell's training ({CELL_STEPS:,} steps of {CELL_BATCHES} × the benchmark's batch), "
               "extrapolated from the measured step (target: ≤ 14 h):", "", "| run | hours |", "|---|---|"]
    md += [f'| {c["lsr"]} | {c["hours"]:.1f} |' for c in cells]

    if cublas:
        md += ["", "## cuBLASLt, per timed iteration", "",
               "Route A waits on the host before and after each product; the device time is CUDA events around "
               "the products on lsr's stream (`LSR_CUBLAS_TIMING=1`). Library: " + (", ".join(libraries) or "–") + ".", "",
               "| step | products | fallbacks | host sync s | device s |", "|---|---|---|---|---|"]
        md += [f'| {c["step"]} | {fmt(c["products"])} | {fmt(c["fallbacks"])} | {fmt(c["host_sync_s"])} | {fmt(c["device_s"])} |'
               for c in cublas]
    if cache:
        md += ["", "## Kernel cache", "",
               f'The small train step in a fresh kernel cache took {fmt(cache.get("cold"))} s (tuning and compiling '
               f'every kernel), again with the cache it left {fmt(cache.get("warm"))} s (whole processes).']

    for r in ok(kind="profile"):
        res = r.get("result") or {}
        bench = res.get("bench") or {}
        per = bench.get("seconds_per_step", bench.get("seconds_per_batch"))
        md += ["", f'## Device time: {r["meta"]["name"]} ({r["meta"].get("matmul", "cube")})', "",
               f'Per steady-state iteration: {fmt(res.get("kernel_seconds"))} s in {fmt(res.get("launches"))} kernel launches '
               f'({res.get("distinct_kernels")} distinct), against {fmt(per)} s per iteration measured under profiling.', "",
               "| kernel | s per iteration | launches | share |", "|---|---|---|---|"]
        for k in res.get("top", [])[:15]:
            name = k["kernel"].replace("|", "/")[:100]
            md.append(f'| `{name}` | {fmt(k["seconds"])} | {fmt(k["launches"])} | {fmt(k["share"], 2)} |')

    launches = launch_rows(records, proxy)
    if launches:
        md += ["", "## Kernel launches per step", "",
               "lsr: counted by cubecl as issued, here and on the WGPU proxy (lavapipe; "
               "`docs/gpu/launches-wgpu.json`); the ratio calibrates the proxy per region. PyTorch: the "
               "CUDA kernels torch.profiler saw against the operators counted as the proxy counts them.", "",
               "| run | region | here | proxy | here / proxy |", "|---|---|---|---|---|"] + launches

    md += ["", "## Miniature cells (train, evaluate)", "", "| cell | precision | status | wall s | nDCG@10 |", "|---|---|---|---|---|"]
    for r in records:
        if r["meta"].get("kind") == "mini":
            datasets = ((r.get("result") or {}).get("datasets") or {}).items()
            ndcg = ", ".join(f'{name} {d["metrics"].get("ndcg@10", float("nan")):.3f}' for name, d in datasets)
            md.append(f'| {r["meta"]["cell"]} | {r["meta"].get("precision")} | {r["status"]} | {fmt(r.get("wall_s"))} | {ndcg} |')
    problems = [r for r in records if r["status"] != "ok"]
    if problems:
        md += ["", "## Not ok", ""] + [f'- {r["step"]}: {r["status"]}' for r in problems]
    with open(os.path.join(args.out, "summary.md"), "w") as f:
        f.write("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
