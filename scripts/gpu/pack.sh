#!/usr/bin/env bash
# Builds the release binaries the GPU check carries and packs them into target/gpu/lsr.tar.xz:
# one `lsr` per CUDA compiler path (`nvrtc`: CUDA C++ through NVRTC; `llvm`: cubecl's LLVM/NVPTX
# path), both with WGPU. The two differ only in cubecl-cuda's backend, so one xz stream with a
# dictionary larger than a binary stores the second mostly as references to the first.
# Usage: scripts/gpu/pack.sh [nvrtc] [llvm]   (default: both; the first named is measured most)
set -euo pipefail
cd "$(dirname "$0")/../.."
paths=("$@")
[[ ${#paths[@]} -gt 0 ]] || paths=(nvrtc llvm)
scripts/cuda/llvm-bundle.sh
stage=target/gpu/stage
rm -rf "$stage" && mkdir -p "$stage"
for path in "${paths[@]}"; do
    case $path in
        nvrtc) features=cuda-nvrtc,wgpu ;;
        llvm) features=cuda,wgpu ;;
        *) echo "pack.sh: unknown compiler path $path (nvrtc or llvm)" >&2; exit 2 ;;
    esac
    cargo build --release -p lsr-cli --features "$features"
    cp target/release/lsr "$stage/lsr-$path"
done
printf '%s\n' "${paths[@]}" > "$stage/order"
tar -C "$stage" -cf - order "${paths[@]/#/lsr-}" | xz -T2 -6e --lzma2=preset=6e,dict=256MiB > target/gpu/lsr.tar.xz.partial
mv target/gpu/lsr.tar.xz.partial target/gpu/lsr.tar.xz
ls -l target/gpu/lsr.tar.xz "$stage"
