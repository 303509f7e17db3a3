"""PISA (through pyterrier-pisa) and Seismic over lsr's exports, and the comparison of every
engine's run with lsr's; scripts/engines/run.sh calls it (docs/interop.md, "Checked against
the engines"). Not in CI.

  engines.py pisa INDEX.ciff QUERIES.txt RUN --index DIR --hits N
  engines.py seismic DOCS.jsonl QUERIES.jsonl RUN --hits N
  engines.py compare LSR_RUN NAME=RUN... [--depth 10] [--recall NAME...]
"""

import argparse
import collections
import json
import sys
from pathlib import Path


def varint(buf, pos):
    """A protobuf varint at `pos`: (value, position after it)."""
    value = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7


def fields(message):
    """(tag, value) of a protobuf message: ints for varints, bytes for the rest."""
    pos = 0
    while pos < len(message):
        key, pos = varint(message, pos)
        tag, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = varint(message, pos)
        elif wire == 2:
            size, pos = varint(message, pos)
            value, pos = message[pos : pos + size], pos + size
        else:
            width = {1: 8, 5: 4}[wire]
            value, pos = message[pos : pos + width], pos + width
        yield tag, value


def read_ciff(path):
    """CIFF (osirrc/ciff's CommonIndexFileFormat.proto) as [{docno, toks: {term: impact}}]."""
    buf = Path(path).read_bytes()
    messages = []
    pos = 0
    while pos < len(buf):
        size, pos = varint(buf, pos)
        messages.append(buf[pos : pos + size])
        pos += size
    header = dict(fields(messages[0]))
    lists, docs = header[2], header[3]
    toks = [{} for _ in range(docs)]
    for message in messages[1 : 1 + lists]:
        term, docid = None, 0
        for tag, value in fields(message):
            if tag == 1:
                term = value.decode("utf-8")
            elif tag == 4:
                posting = dict(fields(value))
                docid += posting.get(1, 0)
                toks[docid][term] = posting.get(2, 0)
    records = [dict(fields(m)) for m in messages[1 + lists :]]
    assert len(records) == docs, f"{path}: {len(records)} document records, header says {docs}"
    return [
        {"docno": record[2].decode("utf-8"), "toks": toks[record.get(1, 0)]}
        for record in records
    ]


def write_run(path, rows, name):
    """rows: (qid, docno, score) in rank order per query."""
    rank = collections.Counter()
    with open(path, "w") as out:
        for qid, docno, score in rows:
            rank[qid] += 1
            out.write(f"{qid} Q0 {docno} {rank[qid]} {score} {name}\n")


def pisa(args):
    import pandas as pd
    import pyterrier_pisa as pp

    index = pp.PisaIndex(args.index, stemmer="none", stops="none", threads=1)
    if not index.built():
        index.toks_indexer(scale=1.0).index(read_ciff(args.ciff))
    queries = []
    for line in Path(args.queries).read_text().splitlines():
        qid, names = line.split(":", 1)
        queries.append({"qid": qid, "query_toks": dict(collections.Counter(names.split()))})
    retrieve = pp.PisaRetrieve(
        index, scorer="quantized", num_results=args.hits, toks_scale=1.0, stops="none"
    )
    found = retrieve.transform(pd.DataFrame(queries)).sort_values(
        ["qid", "rank"], kind="stable"
    )
    rows = zip(found["qid"], found["docno"], found["score"])
    write_run(args.run, ((q, d, float(s)) for q, d, s in rows), "pisa")


def seismic(args):
    import numpy as np
    from seismic import SeismicIndex, get_seismic_string

    index = SeismicIndex.build(args.docs)
    ids, components, values = [], [], []
    for line in Path(args.queries).read_text().splitlines():
        query = json.loads(line)
        ids.append(query["id"])
        components.append(np.array(list(query["vector"]), dtype=get_seismic_string()))
        values.append(np.array(list(query["vector"].values()), dtype=np.float32))
    rows = []
    for qid, names, weights in zip(ids, components, values):
        # Every query term, no heap pruning: Seismic at its most exact.
        found = index.search(
            qid, names, weights, k=args.hits, query_cut=max(len(names), 1), heap_factor=1.0
        )
        rows.extend((qid, docno, score) for _, score, docno in found)
    write_run(args.run, rows, "seismic")


def read_run(path):
    """{qid: [(score, docno)]} in rank order (score descending, as TREC runs are read)."""
    run = collections.defaultdict(list)
    for line in Path(path).read_text().splitlines():
        qid, _, docno, _, score, *_ = line.split()
        run[qid].append((float(score), docno))
    for hits in run.values():
        hits.sort(key=lambda hit: -hit[0])
    return run


def compare(args):
    """Per engine: the queries whose top `depth` scores equal lsr's at every rank, or (--recall)
    the share of lsr's top `depth` it found, a document tied with lsr's last counting as found."""
    lsr = read_run(args.lsr_run)
    failed = False
    for named in args.runs:
        name, path = named.split("=", 1)
        engine = read_run(path)
        if name in args.recall:
            shares = []
            for qid, hits in lsr.items():
                top = hits[: args.depth]
                cutoff = top[-1][0]
                scores = {docno: score for score, docno in hits}
                found = [d for _, d in engine.get(qid, [])[: args.depth]]
                hit = sum(1 for d in found if scores.get(d, float("-inf")) >= cutoff)
                shares.append(min(hit, len(top)) / len(top))
            exact = sum(1 for share in shares if share == 1.0)
            mean = sum(shares) / len(shares)
            print(
                f"{name}: recall of lsr's top {args.depth} {mean:.4f} over {len(shares)} queries; "
                f"{exact} with all {args.depth} found"
            )
            failed |= exact != len(shares)
            continue
        differ = []
        for qid, hits in lsr.items():
            ours = [round(score, 3) for score, _ in hits[: args.depth]]
            theirs = [round(score, 3) for score, _ in engine.get(qid, [])[: args.depth]]
            if ours != theirs:
                differ.append((qid, ours, theirs))
        differ += [(qid, [], [s for s, _ in hits]) for qid, hits in engine.items() if qid not in lsr]
        same = len(lsr) - len(differ)
        print(
            f"{name}: {same}/{len(lsr)} queries with lsr's scores at every rank of the top "
            f"{args.depth}"
        )
        for qid, ours, theirs in differ[:3]:
            print(f"  {qid}: lsr {ours}\n  {' ' * len(qid)}  {name} {theirs}")
        failed |= bool(differ)
    return 1 if failed else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("pisa")
    p.add_argument("ciff")
    p.add_argument("queries")
    p.add_argument("run")
    p.add_argument("--index", required=True)
    p.add_argument("--hits", type=int, default=1000)
    s = sub.add_parser("seismic")
    s.add_argument("docs")
    s.add_argument("queries")
    s.add_argument("run")
    s.add_argument("--hits", type=int, default=1000)
    c = sub.add_parser("compare")
    c.add_argument("lsr_run")
    c.add_argument("runs", nargs="+", metavar="NAME=RUN")
    c.add_argument("--depth", type=int, default=10)
    c.add_argument("--recall", nargs="*", default=[], metavar="NAME")
    args = parser.parse_args()
    if args.command == "pisa":
        pisa(args)
    elif args.command == "seismic":
        seismic(args)
    else:
        sys.exit(compare(args))


if __name__ == "__main__":
    main()
