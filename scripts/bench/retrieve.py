"""The `lsr bench retrieve` workload with scipy.sparse, as a researcher would do exact SPLADE
retrieval in Python: queries (CSR) times the transposed document matrix (CSR, i.e. an inverted
index), then the top k of each row, ties broken as trec_eval does (doc id descending). The
collection is generated exactly as lsr generates it (splitmix64 + Zipf inverse CDF, weights
k/64, so every score is exact in float32 and the two top-k lists must be identical).

    python scripts/bench/retrieve.py [--docs 1000000] [--shape uniform|splade] [--compare lsr-run.trec]
"""
import argparse
import json
import resource
import time

import numpy as np
import scipy.sparse as sp

M64 = (1 << 64) - 1


def splitmix64(x):
    x = x + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def zipf_cdf(vocab, exponent):
    total, cdf = 0.0, []
    for t in range(vocab):
        total += 1.0 / float(t + 1) ** exponent
        cdf.append(total)
    return np.array(cdf) / total


def weight_cap(terms, shape):
    """As lsr's WeightShape: 255, or 16 + 24 floor(log2(rank + 1)) capped at 255."""
    if shape == "uniform":
        return np.full(terms.shape, 255, dtype=np.uint64)
    log2 = np.floor(np.log2(terms.astype(np.float64) + 1.0)).astype(np.uint64)
    return np.minimum(np.uint64(16) + np.uint64(24) * log2, np.uint64(255))


def collection(cdf, seed, rows, draws, shape, chunk=50_000):
    indptr, indices, data = [0], [], []
    for start in range(0, rows, chunk):
        r = np.arange(start, min(rows, start + chunk), dtype=np.uint64)
        base = (np.uint64((seed * 0x100000000000) & M64) + r * np.uint64(2 * draws))[:, None]
        i = np.arange(draws, dtype=np.uint64)[None, :]
        with np.errstate(over="ignore"):
            u = (splitmix64(base + np.uint64(2) * i) >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))
            terms = np.minimum(np.searchsorted(cdf, u, side="right"), len(cdf) - 1)
            cap = weight_cap(terms, shape)
            w = (np.uint64(1) + splitmix64(base + np.uint64(2) * i + np.uint64(1)) % cap).astype(np.float32) / np.float32(64)
        for t_row, w_row in zip(terms, w):
            uniq, first = np.unique(t_row, return_index=True)  # first occurrence, as a stable sort + dedup
            indices.append(uniq)
            data.append(w_row[first])
            indptr.append(indptr[-1] + len(uniq))
    return sp.csr_matrix((np.concatenate(data), np.concatenate(indices), np.array(indptr)), shape=(rows, len(cdf)))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--docs", type=int, default=1_000_000)
    p.add_argument("--vocab", type=int, default=30_000)
    p.add_argument("--doc-draws", type=int, default=165)
    p.add_argument("--query-draws", type=int, default=35)
    p.add_argument("--zipf-exponent", type=float, default=1.0)
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--k", type=int, default=10)
    p.add_argument("--batch", type=int, default=50)
    p.add_argument("--shape", choices=["uniform", "splade"], default="uniform")
    p.add_argument("--compare", help="an lsr run file of the same queries")
    args = p.parse_args()
    cdf = zipf_cdf(args.vocab, args.zipf_exponent)
    start = time.perf_counter()
    docs = collection(cdf, 1, args.docs, args.doc_draws, args.shape)
    inverted = docs.T.tocsr()  # term -> postings
    build = time.perf_counter() - start
    queries = collection(cdf, 2, args.queries, args.query_draws, args.shape)
    doc_ids = np.array([str(d) for d in range(args.docs)])
    order = np.argsort(doc_ids).argsort()  # rank of each id in string order
    start = time.perf_counter()
    top = {}
    for b in range(0, args.queries, args.batch):
        scores = (queries[b:b + args.batch] @ inverted).tocsr()
        for r in range(scores.shape[0]):
            row = scores.getrow(r)
            cols, vals = row.indices, row.data
            if len(vals) > args.k:
                kth = np.partition(vals, len(vals) - args.k)[len(vals) - args.k]
                keep = vals >= kth  # all ties with the k-th stay candidates
                cols, vals = cols[keep], vals[keep]
            best = np.lexsort((-order[cols], -vals))[: args.k]
            top[str(b + r)] = [(doc_ids[cols[i]], float(vals[i])) for i in best]
    seconds = time.perf_counter() - start
    report = {"docs": args.docs, "queries": args.queries, "build_seconds": build,
              "index_mib": (inverted.data.nbytes + inverted.indices.nbytes + inverted.indptr.nbytes) / 2**20,
              "queries_per_second": args.queries / seconds,
              "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    if args.compare:
        lsr = {}
        for line in open(args.compare):
            q, _, d, _, s, _ = line.split()
            lsr.setdefault(q, []).append((d, float(s)))
        same = all(lsr.get(q, [])[: args.k] == top[q] for q in top)
        report["identical_top_k"] = same
    print(json.dumps(report))


if __name__ == "__main__":
    main()
