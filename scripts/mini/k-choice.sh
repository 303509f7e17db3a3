#!/usr/bin/env bash
# Choosing k on the miniature, measured against the full grid: for each seed, the miniature
# models and the data order drawn again, every backbone probed (`lsr matrix probe`: the first
# 50 of the recipe's 300 steps of every cell, the miniature's first validation step; PROBE sets
# another fraction), the whole grid k ∈ {1, 2, 4, 8, 16} × seven families run (the probed cells
# go on from where the probe stopped), then the agreement of the head-norm rule and of the probe
# with each grid's best k, pooled over the seeds (`lsr report --only k-choice`). Resumable: run
# it again after a stop.
# Usage: scripts/mini/k-choice.sh [SEED...]   (default 1 2 3; after `just reproduce mini` built
# data/synth). Seed s draws the miniatures with seed 16 + s and the data order with 122 + s,
# so seed 1 is the miniature of `just reproduce mini`.
set -euo pipefail
cd "$(dirname "$0")/../.."
lsr=${LSR:-target/release/lsr}
seeds=("$@")
[[ ${#seeds[@]} -gt 0 ]] || seeds=(1 2 3)
mapfile -t families < <("$lsr" matrix list experiments/mini.toml | cut -f2 | uniq)
runs=()
for s in "${seeds[@]}"; do
    models=data/synth/models-seed-$s
    results=results/mini-k/seed-$s
    "$lsr" data mini-models --spec experiments/mini-models.toml --seed $((16 + s)) \
        --vocab data/synth/vocab.txt --out "$models"
    variant=(experiments/mini.toml --results "$results" --set recipe.seed=$((122 + s))
        --set 'k=[1, 2, 4, 8, 16]' --set probe.fraction="${PROBE:-0.1667}")
    for family in "${families[@]}"; do
        variant+=(--set "backbone.$family.checkpoint=$models/$family")
    done
    "$lsr" matrix probe "${variant[@]}"
    "$lsr" matrix run "${variant[@]}"
    "$lsr" report "$results" >/dev/null
    runs+=("$results")
done
"$lsr" report "${runs[@]}" --only k-choice --out results/mini-k/report
