#!/usr/bin/env bash
# Runs one fuzz target (or `all`, one after the other) under libFuzzer, niced: builds the
# driver, seeds the target's corpus from the committed fixtures the first time, fuzzes for RUNS
# executions or SECONDS, whichever comes first, and keeps the log and any crashing input under
# crates/fuzz/artifacts/. Usage: fuzz.sh TARGET|all [RUNS] [SECONDS]
set -euo pipefail

fuzz=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$fuzz/../.." && pwd)
targets=(safetensors pytorch config tokenizer trec_run trec_qrels beir triples teacher vectors matrix cell)
target=${1:?usage: fuzz.sh TARGET|all [RUNS] [SECONDS]; targets: ${targets[*]}}
runs=${2:-1000000}
seconds=${3:-1800}
if [ "$target" != all ] && [[ " ${targets[*]} " != *" $target "* ]]; then
    echo "unknown target $target; targets: ${targets[*]}" >&2
    exit 2
fi

# The committed fixtures a target's corpus starts from, plus its small seeds in seeds/<target>/.
seed() {
    local target=$1 corpus=$fuzz/corpus/$1 f
    mkdir -p "$corpus"
    local fixtures=$root/data/fixtures
    case $target in
        safetensors) for f in "$fixtures"/{bert,bert-f16,bert-bf16,bert-sharded,modernbert}/model*.safetensors; do
                cp "$f" "$corpus/$(basename "$(dirname "$f")")-$(basename "$f")"; done ;;
        pytorch) cp "$fixtures"/bert-pytorch-bin/pytorch_model.bin "$corpus"/ ;;
        config) for f in "$fixtures"/*/config.json; do cp "$f" "$corpus/$(basename "$(dirname "$f")").json"; done ;;
        tokenizer) for f in "$fixtures"/*/tokenizer.json; do cp "$f" "$corpus/$(basename "$(dirname "$f")").json"; done ;;
        trec_run) cp "$fixtures"/trec_eval/run.txt "$corpus"/
            head -c 600 "$fixtures"/trec_eval/run.txt | gzip -c > "$corpus"/run.txt.gz ;;
        trec_qrels) cp "$fixtures"/trec_eval/qrels.* "$corpus"/
            gzip -c "$fixtures"/trec_eval/qrels.binary.tsv > "$corpus"/qrels.binary.tsv.gz ;;
        beir) { cat "$fixtures"/train/collection.tsv; printf '\0'; cat "$fixtures"/train/queries.tsv
                printf '\0'; cat "$fixtures"/trec_eval/qrels.binary.tsv; } > "$corpus"/fixtures.txt ;;
        triples) { printf '\0'; cat "$fixtures"/train/triples.tsv; } > "$corpus"/text.txt
            { printf '\1'; cat "$fixtures"/train/triples.jsonl; } > "$corpus"/jsonl.txt
            { printf '\2'; cat "$fixtures"/train/qidpidtriples.tsv; printf '\0'
              cat "$fixtures"/train/queries.tsv; printf '\0'; cat "$fixtures"/train/collection.tsv; } > "$corpus"/ids.txt ;;
        teacher) cp "$fixtures"/train/scores*.pkl.gz "$fixtures"/pickle/*.pkl "$corpus"/ ;;
        matrix) cp "$root"/experiments/*.toml "$corpus"/ ;;
        vectors | cell) ;;
    esac
    if [ -d "$fuzz/seeds/$target" ]; then cp "$fuzz/seeds/$target"/* "$corpus"/; fi
}

run() {
    local target=$1 artifacts=$fuzz/artifacts/$1
    [ -d "$fuzz/corpus/$target" ] || seed "$target"
    mkdir -p "$artifacts"
    # -timeout: an input running over a second is a hang; -rss_limit_mb: the process as a whole
    # may not pass 2 GiB (single allocations over 1 GiB abort in the driver's allocator).
    # -fork=1: one child process at a time, so that a finding is kept and the run goes on.
    LSR_FUZZ_TARGET=$target nice -n 19 "$fuzz"/libfuzzer/target/release/lsr-fuzz-libfuzzer \
        -fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 \
        -runs="$runs" -max_total_time="$seconds" -timeout=1 -rss_limit_mb=2048 \
        -artifact_prefix="$artifacts/" "$fuzz/corpus/$target" 2>&1 | tee "$artifacts/fuzz.log"
    # A niced process on shared cores can be starved past the timeout: a timeout counts as a hang
    # only if the input still takes over a second when run again on its own.
    local input
    for input in "$artifacts"/timeout-*; do
        [ -e "$input" ] || continue
        if LSR_FUZZ_TARGET=$target "$fuzz"/libfuzzer/target/release/lsr-fuzz-libfuzzer \
            -timeout=1 "$input" > /dev/null 2>&1; then
            echo "$input: under a second when run alone (the machine was busy); not a hang"
            rm "$input"
        fi
    done
    local findings
    findings=$(find "$artifacts" -name 'crash-*' -o -name 'timeout-*' -o -name 'oom-*' | sort)
    if [ -n "$findings" ]; then
        printf '%s: findings\n%s\n' "$target" "$findings"
        return 1
    fi
}

(cd "$fuzz/libfuzzer" && nice -n 19 cargo build -j 1 --release)
# Every fuzzing process writes its inputs into a directory of its own in here.
LSR_FUZZ_SCRATCH=$(mktemp -d -p /dev/shm lsr-fuzz.XXXXXX 2>/dev/null || mktemp -d)
export LSR_FUZZ_SCRATCH
trap 'rm -rf "$LSR_FUZZ_SCRATCH"' EXIT
if [ "$target" = all ]; then
    # A finding ends that target's run, not the others'.
    status=0
    for t in "${targets[@]}"; do run "$t" || status=1; done
    exit $status
else
    run "$target"
fi
