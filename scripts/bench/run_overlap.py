"""How far two evaluations of the same model agree (two precisions, or two product routes):
the mean share of each query's top 10 they have in common, and each one's nDCG@10.

    python scripts/bench/run_overlap.py A/beir_synth-a B/beir_synth-a [more pairs ...]

Each argument is an `lsr eval` data set directory (run.trec, metrics.json). Prints one JSON line
per pair and one for all the pairs.
"""
import collections
import json
import sys


def top10(path):
    runs = collections.defaultdict(list)
    for line in open(path):
        query, _, doc, rank, _, _ = line.split()
        runs[query].append((int(rank), doc))
    return {q: {d for _, d in sorted(docs)[:10]} for q, docs in runs.items()}


def agreement(a, b):
    return len(a & b) / max(len(a), len(b)) if a or b else 1.0


def ndcg10(directory):
    return json.load(open(f"{directory}/metrics.json"))["metrics"]["ndcg@10"]


def main(paths):
    pairs, overlaps, gaps = list(zip(paths[::2], paths[1::2])), [], []
    for a, b in pairs:
        ra, rb = top10(f"{a}/run.trec"), top10(f"{b}/run.trec")
        # Over every query either returns; two empty lists (a model with no terms) agree.
        shared = [agreement(ra.get(q, set()), rb.get(q, set())) for q in ra.keys() | rb.keys()]
        overlap = sum(shared) / len(shared) if shared else 1.0
        na, nb = ndcg10(a), ndcg10(b)
        overlaps.append(overlap)
        gaps.append(abs(na - nb))
        print(json.dumps({"a": a, "b": b, "top10_overlap": overlap, "ndcg10_a": na, "ndcg10_b": nb}))
    print(json.dumps({"pairs": len(pairs), "mean_top10_overlap": sum(overlaps) / len(overlaps),
                      "min_top10_overlap": min(overlaps), "max_ndcg10_gap": max(gaps)}))


if __name__ == "__main__":
    main(sys.argv[1:])
