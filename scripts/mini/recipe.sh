#!/usr/bin/env bash
# What each of naver/splade's recipe options does to the miniature's Table 1: the miniature as
# committed, with lsr's former values all at once (which must give the former table), and with
# each option alone set back; then the mean nDCG@10 of every cell side by side (`lsr report
# --compare`, into results/mini-recipe).
# Usage: scripts/mini/recipe.sh   (after `just reproduce mini` built the data and ran `mini`)
set -euo pipefail
cd "$(dirname "$0")/../.."
lsr=${LSR:-target/release/lsr}
runs=(results/mini)

# NAME, then the recipe settings it changes.
run() {
    local name=$1 sets=()
    shift
    for setting in "$@"; do
        sets+=(--set "recipe.$setting")
    done
    "$lsr" matrix run experiments/mini.toml --results "results/$name" "${sets[@]}"
    runs+=("results/$name")
}

run mini-former dropout=false 'lr_warmup="from-first-step"' 'document_flops="all"' eps=1e-8
run mini-no-dropout dropout=false
run mini-warmup-first-step 'lr_warmup="from-first-step"'
run mini-flops-all 'document_flops="all"'
run mini-eps-1e-8 eps=1e-8
"$lsr" report "${runs[@]}" --compare --out results/mini-recipe
