#!/usr/bin/env bash
# Builds the release `lsr` with the backends asked for and every backend of the `lsr` already in
# target/release, so that no recipe replaces a GPU build with a CPU one (about 20 minutes of
# compiling each way). A build's backends are read from the binary itself: the panic locations
# it carries name the source files of the crates it was compiled from, and only a CUDA build
# has cubecl-cuda's, only a WGPU build wgpu-core's. (Cargo's lsr.d beside it lists the
# workspace's own files only, the same with any features.)
# Usage: scripts/build-lsr.sh [FEATURES...]   (cuda, wgpu, comma- or space-separated; none: CPU)
set -euo pipefail
cd "$(dirname "$0")/.."

lsr=${CARGO_TARGET_DIR:-target}/release/lsr
wanted=${*:-}
if [[ -f $lsr ]]; then
    for backend in cuda:cubecl-cuda wgpu:wgpu-core; do
        if grep -aqE "${backend#*:}[-/]" "$lsr"; then
            wanted+=",${backend%%:*}"
        fi
    done
fi
features=$(tr ', ' '\n\n' <<<"$wanted" | awk 'NF && !seen[$0]++' | sort | paste -sd, -)
if [[ ,$features, == *,cuda,* ]]; then
    scripts/cuda/llvm-bundle.sh
fi
echo "build-lsr: target/release/lsr with backends: flex${features:+,$features}" >&2
cargo build --release -p lsr-cli ${features:+--features "$features"}
