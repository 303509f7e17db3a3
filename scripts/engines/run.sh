#!/usr/bin/env bash
# An `lsr eval --quantize F` output checked against real engines: each data set's vectors
# exported (`lsr vectors export`), indexed and searched by Anserini (the fatjar inside pyserini's
# wheel), PISA (pyterrier-pisa) and Seismic (pyseismic-lsr), installed from PyPI into a venv
# made under target/engines, as docs/interop.md's commands do; then each run against lsr's:
# Anserini and PISA must return lsr's scores at every rank of every query's top 10, Seismic (an
# approximate index) is given its recall of lsr's top 10. Not in CI: it downloads about
# 0.3 GB and needs Java 21 or newer for Anserini 1.7 (JAVA_HOME, else java on the PATH, else
# /usr/lib/jvm/*).
# Usage: scripts/engines/run.sh EVAL_DIR MODEL   (MODEL: the checkpoint EVAL_DIR evaluated)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
[[ $# -eq 2 ]] || { sed -n '/^# Usage/s/^# //p' "$0" >&2; exit 2; }
eval_dir=$1 model=$2
lsr=${LSR:-$root/target/release/lsr}
work=$root/target/engines
venv=$work/venv

java_21() {
    local candidate major
    for candidate in ${JAVA_HOME:+"$JAVA_HOME/bin/java"} "$(command -v java || true)" /usr/lib/jvm/*/bin/java; do
        [[ -x $candidate ]] || continue
        major=$("$candidate" -XshowSettings:properties -version 2>&1 |
            awk -F'= ' '/java.specification.version/ { print $2 }')
        if [[ ${major%%.*} -ge 21 ]]; then
            echo "$candidate"
            return
        fi
    done
    echo "engines: Anserini 1.7 needs Java 21 or newer; set JAVA_HOME to one" >&2
    return 1
}
java=$(java_21)

if [[ ! -x $venv/bin/python ]]; then
    python3 -m venv "$venv"
fi
"$venv/bin/pip" install -q -r "$here/requirements.txt"
# Its wheel carries Anserini 1.7.1's fatjar (pyserini 2 needs Python 3.12); its own Python
# dependencies are not needed for that.
"$venv/bin/pip" install -q --no-deps pyserini==1.6.0
jar=$("$venv/bin/python" -c 'import glob, os, pyserini; print(*glob.glob(os.path.join(os.path.dirname(pyserini.__file__), "resources/jars/anserini-*-fatjar.jar")))')
anserini() { "$java" -cp "$jar" --add-modules jdk.incubator.vector "$@" 2>&1 | grep -v -i 'WARNING' || true; }

status=0
for dataset in "$eval_dir"/*/; do
    dataset=${dataset%/}
    [[ -f $dataset/run.trec && -f $dataset/corpus.vectors && -f $dataset/queries.vectors ]] || continue
    name=$(basename "$dataset")
    factor=$("$venv/bin/python" -c 'import json, sys; print(json.load(open(sys.argv[1]))["settings"].get("quantize") or "")' "$dataset/metrics.json")
    if [[ -z $factor ]]; then
        echo "engines: $dataset was evaluated without --quantize: Anserini and PISA score integer impacts" >&2
        exit 1
    fi
    out=$work/$name
    rm -rf "$out"
    mkdir -p "$out/anserini/docs" "$out/pisa" "$out/seismic"
    export_as() { "$lsr" vectors export "$dataset/$1" --checkpoint "$model" --quantize "$factor" --format "$2" --out "$out/$3"; }
    export_as corpus.vectors anserini anserini/docs/docs.jsonl
    export_as queries.vectors anserini-queries anserini/queries.tsv
    export_as corpus.vectors ciff pisa/index.ciff
    export_as queries.vectors pisa-queries pisa/queries.txt
    export_as corpus.vectors seismic seismic/docs.jsonl
    export_as queries.vectors seismic seismic/queries.jsonl

    anserini io.anserini.index.IndexCollection -collection JsonVectorCollection \
        -input "$out/anserini/docs" -index "$out/anserini/index" \
        -generator DefaultLuceneDocumentGenerator -threads 1 -impact -pretokenized >"$out/anserini/index.log"
    anserini io.anserini.search.SearchCollection -index "$out/anserini/index" \
        -topics "$out/anserini/queries.tsv" -topicReader TsvString -output "$out/anserini/run.trec" \
        -impact -pretokenized -removeQuery -hits 1000 >"$out/anserini/search.log"
    "$venv/bin/python" "$here/engines.py" pisa "$out/pisa/index.ciff" "$out/pisa/queries.txt" \
        "$out/pisa/run.trec" --index "$out/pisa/index" >"$out/pisa/log" 2>&1
    "$venv/bin/python" "$here/engines.py" seismic "$out/seismic/docs.jsonl" \
        "$out/seismic/queries.jsonl" "$out/seismic/run.trec" >"$out/seismic/log" 2>&1

    echo "== $name (impacts round(w × $factor)): $(wc -l <"$out/pisa/queries.txt") queries"
    "$venv/bin/python" "$here/engines.py" compare "$dataset/run.trec" \
        "anserini=$out/anserini/run.trec" "pisa=$out/pisa/run.trec" \
        "seismic=$out/seismic/run.trec" --recall seismic || status=1
done
exit $status
