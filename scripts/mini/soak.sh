#!/usr/bin/env bash
# The miniature matrix under random SIGKILLs: runs it once undisturbed (the reference), then
# again while killing `lsr matrix run` at seeded random times and restarting it each time, and
# checks after every kill that no finished cell changed and that the steps to redo never reach
# back past the cell's last checkpoint; at the end, that every cell logged each step once, and
# that the weights, runs and Table 1 equal the reference's byte for byte.
# Usage: scripts/mini/soak.sh [KILLS] [SEED]   (after `just reproduce mini` has built the data)
set -euo pipefail
kills=${1:-24}
seed=${2:-1}
lsr=target/release/lsr
every=50
here=$(dirname "$0")
mkdir -p target/soak
"$here/variant.sh" results/soak-reference --recipe checkpoint_every=$every > target/soak/reference.toml
"$here/variant.sh" results/soak --recipe checkpoint_every=$every > target/soak/soak.toml
rm -rf results/soak

# The reference is kept between soaks while it is complete.
if [[ ! -f results/soak-reference/seconds ]]; then
    rm -rf results/soak-reference
    start=$SECONDS
    "$lsr" matrix run target/soak/reference.toml 2> target/soak/reference.log
    echo $((SECONDS - start)) > results/soak-reference/seconds
fi
reference_seconds=$(cat results/soak-reference/seconds)
echo "reference: ${reference_seconds} s undisturbed"

# Random delays averaging the reference's time over the kills, so that they spread over the
# whole matrix (each restart redoes some steps, so the last cells may run undisturbed).
max_ms=$((2000 * reference_seconds / kills))
RANDOM=$seed
killed=0
redone=0
declare -A finished
check_after_kill() {
    for dir in results/soak/*/; do
        local cell
        cell=$(basename "$dir")
        [[ -f $dir/train.csv ]] || continue
        if [[ -n ${finished[$cell]:-} ]]; then
            [[ $(sha256sum < "$dir/metrics.json") == "${finished[$cell]}" ]] \
                || { echo "FAIL: finished cell $cell changed"; exit 1; }
            continue
        fi
        if [[ -f $dir/metrics.json ]]; then
            finished[$cell]=$(sha256sum < "$dir/metrics.json")
            continue
        fi
        # Only a cell in training has steps to redo (a collapsed one is over).
        grep -q '"status": "running"' "$dir/status.json" 2> /dev/null || continue
        # Logged steps are 1..n in order (a row cut by the kill aside).
        local logged last checkpoint
        logged=$(awk -F, 'NR > 1 && $1 ~ /^[0-9]+$/ { if ($1 != NR - 1) bad = 1; n = $1 } END { print bad ? "bad" : n + 0 }' "$dir/train.csv")
        [[ $logged != bad ]] || { echo "FAIL: $cell logged a step twice or skipped one"; exit 1; }
        last=$(ls results/soak/checkpoints/"$cell" 2> /dev/null | sed -n 's/^step-0*\([0-9][0-9]*\)$/\1/p' | sort -n | tail -1 || true)
        checkpoint=${last:-0}
        (( logged - checkpoint <= every )) \
            || { echo "FAIL: $cell is at step $logged with its last checkpoint at $checkpoint"; exit 1; }
        redone=$((redone + logged - checkpoint))
    done
}

start=$SECONDS
while :; do
    "$lsr" matrix run target/soak/soak.toml 2>> target/soak/soak.log &
    pid=$!
    if (( killed < kills )); then
        delay_ms=$((500 + (RANDOM * 32768 + RANDOM) % max_ms))
        sleep "$(printf '%d.%03d' $((delay_ms / 1000)) $((delay_ms % 1000)))"
        if kill -9 "$pid" 2> /dev/null; then
            wait "$pid" 2> /dev/null || true
            killed=$((killed + 1))
            check_after_kill
            echo "kill $killed after ${delay_ms} ms; $(ls -d results/soak/*/metrics.json 2> /dev/null | wc -l) cells done"
            continue
        fi
    fi
    wait "$pid"
    break
done
echo "soak: ${killed} kills survived, $((SECONDS - start)) s, ${redone} steps redone after kills"

failures=0
for dir in results/soak-reference/*/; do
    cell=$(basename "$dir")
    [[ -f $dir/train.csv ]] || continue
    steps=$(awk -F, 'NR > 1 { n++; if ($1 != n) bad = 1 } END { print bad ? "bad" : n }' "results/soak/$cell/train.csv")
    reference_steps=$(awk 'NR > 1' "$dir/train.csv" | wc -l)
    [[ $steps == "$reference_steps" ]] || { echo "FAIL: $cell logged $steps steps, the reference $reference_steps"; failures=$((failures + 1)); }
    for file in checkpoints/"$cell"/model/model.safetensors $(cd results/soak-reference && ls "$cell"/eval/*/run.trec); do
        cmp -s "results/soak-reference/$file" "results/soak/$file" \
            || { echo "FAIL: $file differs from the reference"; failures=$((failures + 1)); }
    done
done
"$lsr" report results/soak-reference --only table > /dev/null
"$lsr" report results/soak --only table > /dev/null
diff results/soak-reference/report/table1.md results/soak/report/table1.md \
    || { echo "FAIL: Table 1 differs"; failures=$((failures + 1)); }
(( failures == 0 )) || exit 1
echo "every cell's weights, runs and Table 1 equal the undisturbed run's: 0 bytes differ"
