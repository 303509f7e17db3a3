#!/usr/bin/env bash
# Builds the release `lsr` with the backends asked for and every backend of the `lsr` already in
# target/release, so that no recipe replaces a GPU build with a CPU one (about 20 minutes of
# compiling each way). A build's backends are read from the dependency file cargo writes beside
# the binary (lsr.d), which names the sources of burn's backend crates it was compiled from.
# Usage: scripts/build-lsr.sh [FEATURES...]   (cuda, wgpu, comma- or space-separated; none: CPU)
set -euo pipefail
cd "$(dirname "$0")/.."

depfile=${CARGO_TARGET_DIR:-target}/release/lsr.d
wanted=${*:-}
if [[ -f $depfile ]]; then
    for backend in cuda wgpu; do
        if grep -q "/burn-$backend-" "$depfile"; then
            wanted+=",$backend"
        fi
    done
fi
features=$(tr ', ' '\n\n' <<<"$wanted" | awk 'NF && !seen[$0]++' | sort | paste -sd, -)
if [[ ,$features, == *,cuda,* ]]; then
    scripts/cuda/llvm-bundle.sh
fi
echo "build-lsr: target/release/lsr with backends: flex${features:+,$features}" >&2
cargo build --release -p lsr-cli ${features:+--features "$features"}
