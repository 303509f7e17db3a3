#!/usr/bin/env bash
# Builds the release `lsr` the GPU check carries (CUDA and WGPU) and packs it into
# target/gpu/lsr.tar.xz (~22 MB; the transfer to a GPU machine is limited to 64 MiB).
# Usage: scripts/gpu/pack.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
scripts/build-lsr.sh cuda,wgpu
stage=target/gpu/stage
rm -rf "$stage" && mkdir -p "$stage"
cp target/release/lsr "$stage/lsr"
tar -C "$stage" -cf - lsr | xz -T2 -6 > target/gpu/lsr.tar.xz.partial
mv target/gpu/lsr.tar.xz.partial target/gpu/lsr.tar.xz
ls -l target/gpu/lsr.tar.xz
