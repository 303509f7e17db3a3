"""Does bf16-mixed give the same Table 1 pattern as f32 on the miniature? Compares the report
tables (`results/<matrix>/report/table1.csv`) of an f32 run, a bf16-mixed run and an f32 run
that differs only in its data-order seed, which measures how far two equally valid runs of a
cell land apart.

The verdict: the pattern is the same when every cell's |Δ mean nDCG@10| against f32 is within
the tolerance (the largest |Δ| between the two f32 seeds, or 0.05 if that is smaller), the same
cells fail (mean nDCG@10 < 0.1), and for every backbone the k bf16-mixed scores best is one
that f32 scores within the tolerance of its own best (a tie within noise is not a different
pattern).

    python scripts/mini/compare_precision.py results/mini results/mini-bf16 results/mini-seed
"""
import csv
import sys


def table(results):
    rows = {}
    with open(f"{results}/report/table1.csv") as f:
        for row in csv.DictReader(f):
            scores = [float(v) for k, v in row.items() if k.endswith("nDCG@10") and v not in ("", None)]
            rows[(row["backbone"], float(row["k"]))] = sum(scores) / len(scores) if scores else None
    return rows


def best_k(rows, backbone):
    cells = [(score, k) for (b, k), score in rows.items() if b == backbone and score is not None]
    return max(cells)[1] if cells else None


def main():
    f32, bf16, seed = (table(r) for r in sys.argv[1:4])
    noise = max(abs(f32[c] - seed[c]) for c in f32 if f32[c] is not None and seed.get(c) is not None)
    tolerance = max(noise, 0.05)
    print("| backbone | k | f32 | f32, other seed | bf16-mixed | |Δ| bf16 vs f32 |")
    print("|---|---|---|---|---|---|")
    same = True
    for (backbone, k), score in f32.items():
        other, mixed = seed.get((backbone, k)), bf16.get((backbone, k))
        delta = abs(mixed - score) if mixed is not None and score is not None else float("inf")
        if delta > tolerance or (score < 0.1) != (mixed is not None and mixed < 0.1):
            same = False
        print(f"| {backbone} | {k:g} | {score:.3f} | {other:.3f} | {mixed:.3f} | {delta:.3f} |")
    backbones = sorted({b for b, _ in f32})
    for backbone in backbones:
        best = f32[(backbone, best_k(f32, backbone))]
        if f32[(backbone, best_k(bf16, backbone))] < best - tolerance:
            same = False
    print()
    print(f"Mean nDCG@10 over the test sets. Data-order noise (largest |Δ| between the f32 seeds): {noise:.3f}; "
          f"tolerance {tolerance:.3f}. Best k per backbone, f32 / bf16-mixed: "
          + ", ".join(f"{b} {best_k(f32, b):g}/{best_k(bf16, b):g}" for b in backbones) + ".")
    print(f"Same pattern: {'yes' if same else 'no'}.")


if __name__ == "__main__":
    main()
