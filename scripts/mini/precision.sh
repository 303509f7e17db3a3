#!/usr/bin/env bash
# The miniature in f32, in bf16-mixed, and in f32 with another data-order seed (the noise
# yardstick), then whether bf16-mixed gives the same Table 1 pattern (compare_precision.py).
# Usage: scripts/mini/precision.sh [--device D]   (after `just reproduce mini` built the data)
set -euo pipefail
cd "$(dirname "$0")/../.."
lsr=${LSR:-target/release/lsr}
python=${PYTHON:-python3}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
scripts/mini/variant.sh results/mini "$@" > "$dir/mini.toml"
scripts/mini/variant.sh results/mini-bf16 "$@" --precision bf16-mixed > "$dir/mini-bf16.toml"
scripts/mini/variant.sh results/mini-seed "$@" --seed 124 > "$dir/mini-seed.toml"
for m in mini mini-bf16 mini-seed; do
    "$lsr" matrix run "$dir/$m.toml"
    "$lsr" report "results/$m" --only table >/dev/null
done
$python scripts/mini/compare_precision.py results/mini results/mini-bf16 results/mini-seed
