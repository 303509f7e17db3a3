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
runs=(results/mini)

# NAME, then variant.sh's arguments.
run() {
    local name=$1
    shift
    scripts/mini/variant.sh "results/$name" "$@" > "$dir/$name.toml"
    "$lsr" matrix run "$dir/$name.toml"
    "$lsr" report "results/$name" --only table >/dev/null
    runs+=("results/$name")
}

run mini-former --recipe dropout=false --recipe 'lr_warmup="from-first-step"' \
    --recipe 'document_flops="all"' --recipe eps=1e-8
run mini-no-dropout --recipe dropout=false
run mini-warmup-first-step --recipe 'lr_warmup="from-first-step"'
run mini-flops-all --recipe 'document_flops="all"'
run mini-eps-1e-8 --recipe eps=1e-8
${PYTHON:-python3} scripts/mini/compare_runs.py "${runs[@]}"
