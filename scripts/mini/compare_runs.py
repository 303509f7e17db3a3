"""Mean nDCG@10 (over the test sets) of every cell of several runs of the miniature, side by
side, as a Markdown table: one row per cell, one column per run.

    python scripts/mini/compare_runs.py results/mini results/mini-former ...
"""
import os
import sys

from compare_precision import table


def main(runs):
    tables = [table(run) for run in runs]
    print("| cell | " + " | ".join(os.path.basename(r) for r in runs) + " |")
    print("|---|" + "---:|" * len(runs))
    for backbone, k in tables[0]:
        scores = [t.get((backbone, k)) for t in tables]
        text = ["–" if s is None else f"{s:.3f}" for s in scores]
        print(f"| {backbone} k={k:g} | " + " | ".join(text) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
