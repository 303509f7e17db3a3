#!/usr/bin/env bash
# The miniature in f32, in bf16-mixed, and in f32 with another data-order seed (the noise
# yardstick), then whether bf16-mixed gives the same Table 1 pattern (`lsr report --compare
# --noise`, into results/mini-precision).
# Usage: scripts/mini/precision.sh [--set KEY=VALUE]...   (after `just reproduce mini` built the
# data; the settings, e.g. `--set device=cuda`, apply to all three runs)
set -euo pipefail
cd "$(dirname "$0")/../.."
lsr=${LSR:-target/release/lsr}
mini=experiments/mini.toml
bf16=(--set recipe.precision=bf16-mixed --set eval.precision=bf16-mixed)
"$lsr" matrix run "$mini" "$@"
"$lsr" matrix run "$mini" "$@" --results results/mini-bf16 "${bf16[@]}"
"$lsr" matrix run "$mini" "$@" --results results/mini-seed --set recipe.seed=124
"$lsr" report results/mini results/mini-bf16 --compare --noise results/mini-seed --out results/mini-precision
