#!/usr/bin/env bash
# Writes a variant of experiments/mini.toml to stdout: results under RESULTS, and optionally
# another device, precision (training and evaluation), data-order seed, recipe value, k grid,
# miniature models directory or probe fraction.
# Usage: scripts/mini/variant.sh RESULTS [--device D] [--precision P] [--seed S]
#        [--recipe KEY=VALUE]... [--k "1, 2, 4"] [--models DIR] [--probe FRACTION]
set -euo pipefail
results=$1; shift
edits=(-e "s|results/mini|$results|g" -e "s|^name = \"mini\"|name = \"$(basename "$results")\"|")
while [[ $# -gt 0 ]]; do
    case $1 in
        --device) edits+=(-e "s|^device = .*|device = \"$2\"|") ;;
        --precision) edits+=(-e "/^\[recipe\]/a precision = \"$2\"" -e "/^\[eval\]/a precision = \"$2\"") ;;
        --seed) edits+=(-e "s|^seed = .*|seed = $2|") ;;
        --recipe) edits+=(-e "s|^${2%%=*} = .*|${2%%=*} = ${2#*=}|") ;;
        --k) edits+=(-e "s|^k = .*|k = [$2]|") ;;
        --models) edits+=(-e "s|\"data/synth/models/|\"$2/|") ;;
        --probe) edits+=(-e "\$a [probe]\nfraction = $2") ;;
        *) echo "variant.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift 2
done
sed "${edits[@]}" "$(dirname "$0")/../../experiments/mini.toml"
