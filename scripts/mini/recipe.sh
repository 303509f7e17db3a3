#!/usr/bin/env bash
# What each of naver/splade's recipe options does to the miniature's Table 1: the miniature as
# committed, with lsr's former values all at once (which must give the former table), and with
# each option alone set back; then the mean nDCG@10 of every cell side by side.
# Usage: scripts/mini/recipe.sh   (after `just reproduce mini` built the data and ran `mini`)
set -euo pipefail
cd "$(dirname "$0")/../.."
lsr=${LSR:-target/release/lsr}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
declare -A variants=(
    [mini-no-dropout]="--recipe dropout=false"
    [mini-warmup-first-step]="--recipe lr_warmup=\"from-first-step\""
    [mini-flops-all]="--recipe document_flops=\"all\""
    [mini-eps-1e-8]="--recipe eps=1e-8"
    [mini-former]="--recipe dropout=false --recipe lr_warmup=\"from-first-step\" --recipe document_flops=\"all\" --recipe eps=1e-8"
)
runs=(results/mini)
for name in mini-former mini-no-dropout mini-warmup-first-step mini-flops-all mini-eps-1e-8; do
    eval "scripts/mini/variant.sh results/$name ${variants[$name]}" > "$dir/$name.toml"
    "$lsr" matrix run "$dir/$name.toml"
    "$lsr" report "results/$name" --only table >/dev/null
    runs+=("results/$name")
done
${PYTHON:-python3} scripts/mini/compare_runs.py "${runs[@]}"
