#!/usr/bin/env bash
# The miniature matrix under random SIGKILLs: runs it once undisturbed (the reference), then
# again while killing `lsr matrix run` at seeded random times (every other kill once an
# evaluation has started), and restarting it each time. After
# every kill no finished cell may have changed, and `lsr matrix verify` checks that each log
# holds its steps once and in order and that no cell has more to redo than one checkpoint
# interval; at the end, `lsr matrix verify --against` the reference checks that every cell
# logged the same steps to the same weights, runs and measures, and Table 1 must be the same.
# Usage: scripts/mini/soak.sh [KILLS] [SEED]   (after `just reproduce mini` has built the data)
set -euo pipefail
kills=${1:-24}
seed=${2:-1}
# LSR: another build of lsr (e.g. target/debug/lsr, where a release build does not fit).
lsr=${LSR:-target/release/lsr}
# Shards of 16 documents, so that kills land in evaluation too and it resumes shard by shard.
mini=(experiments/mini.toml --set recipe.checkpoint_every=50 --set eval.shard_documents=16)
reference=("${mini[@]}" --results results/soak-reference)
soak=("${mini[@]}" --results results/soak)
mkdir -p target/soak
rm -rf results/soak

# The reference is kept between soaks while it is complete.
if [[ ! -f results/soak-reference/seconds ]]; then
    rm -rf results/soak-reference
    start=$SECONDS
    "$lsr" matrix run "${reference[@]}" 2> target/soak/reference.log
    echo $((SECONDS - start)) > results/soak-reference/seconds
fi
reference_seconds=$(cat results/soak-reference/seconds)
echo "reference: ${reference_seconds} s undisturbed"

# Random delays averaging the reference's time over the kills, so that they spread over the
# whole matrix (each restart redoes some steps, so the last cells may run undisturbed).
max_ms=$((2000 * reference_seconds / kills))
RANDOM=$seed
killed=0
declare -A finished
check_after_kill() {
    for metrics in results/soak/*/metrics.json; do
        [[ -f $metrics ]] || continue
        local digest
        digest=$(sha256sum < "$metrics")
        [[ ${finished[$metrics]:-$digest} == "$digest" ]] || { echo "FAIL: finished $metrics changed"; exit 1; }
        finished[$metrics]=$digest
    done
    "$lsr" matrix verify "${soak[@]}" || { echo "FAIL: after kill $killed"; exit 1; }
}

# Returns once a corpus is being encoded (its shard folder exists) or `lsr` has exited.
until_evaluating() {
    while kill -0 "$1" 2> /dev/null \
        && ! compgen -G "results/soak/*/eval/*/corpus.shards" > /dev/null; do
        sleep 0.02
    done
}

in_evaluation=0
start=$SECONDS
while :; do
    "$lsr" matrix run "${soak[@]}" 2>> target/soak/soak.log &
    pid=$!
    if (( killed < kills )); then
        # Every other kill waits for an evaluation to start: it takes a few seconds of a
        # cell's thirty, where random times would seldom land.
        if (( killed % 2 == 1 )); then
            until_evaluating "$pid"
            delay_ms=$(((RANDOM * 32768 + RANDOM) % 1500))
        else
            delay_ms=$((500 + (RANDOM * 32768 + RANDOM) % max_ms))
        fi
        sleep "$(printf '%d.%03d' $((delay_ms / 1000)) $((delay_ms % 1000)))"
        if kill -9 "$pid" 2> /dev/null; then
            wait "$pid" 2> /dev/null || true
            killed=$((killed + 1))
            where=training
            if compgen -G "results/soak/*/eval/*/corpus.shards/*.vectors" > /dev/null; then
                where=evaluation
                in_evaluation=$((in_evaluation + 1))
            fi
            echo "kill $killed after ${delay_ms} ms, in $where"
            check_after_kill
            continue
        fi
    fi
    wait "$pid"
    break
done
echo "soak: ${killed} kills survived (${in_evaluation} with corpus shards kept), $((SECONDS - start)) s"
(( killed == 0 || in_evaluation > 0 )) || { echo "FAIL: no kill landed in evaluation"; exit 1; }

failures=0
"$lsr" matrix verify "${soak[@]}" --against results/soak-reference || failures=$((failures + 1))
"$lsr" report results/soak-reference --only table > /dev/null
"$lsr" report results/soak --only table > /dev/null
diff results/soak-reference/report/table1.md results/soak/report/table1.md \
    || { echo "FAIL: Table 1 differs"; failures=$((failures + 1)); }
(( failures == 0 )) || exit 1
echo "every cell's weights, runs, measures and Table 1 equal the undisturbed run's"
