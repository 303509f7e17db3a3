#!/bin/bash
# The GPU check of the training work, run on a lent GPU machine (CUDA, PyTorch, no Rust, no
# network) from the repository root, with a release `lsr` carried in target/release/lsr.
# Writes everything to $OUT (or ./gpu-check). A CUDA build of lsr cannot be made on the
# offline build machine (burn's cuda backend bundles an LLVM downloaded at build time), so lsr
# runs on the GPU through WGPU (Vulkan on the NVIDIA driver) when the machine has a Vulkan ICD.
set -u
out=${OUT:-gpu-check}
mkdir -p "$out"
exec > >(tee "$out/log.txt") 2>&1
echo "== machine"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
python -c 'import torch, transformers; print("torch", torch.__version__, "cuda", torch.version.cuda, "transformers", transformers.__version__)'
ls /usr/share/vulkan/icd.d /etc/vulkan/icd.d 2>/dev/null
echo "== PyTorch, CUDA: SPLADE train step (8 x 32 queries, 16 x 128 documents, AdamW)"
python scripts/bench/train_step.py --device cuda --iterations 20 | tee "$out/torch_train_step_cuda.json"
echo "== PyTorch, CUDA: SPLADE encoding (32 x 128)"
python scripts/bench/encode.py --device cuda --iterations 20 | tee "$out/torch_encode_cuda.json"
echo "== lsr, WGPU on the GPU"
# The binary travels xz-compressed (the uncompressed one is over the transfer limit).
mkdir -p target/release
python -c 'import lzma, shutil; shutil.copyfileobj(lzma.open("target/gpu/lsr.xz"), open("target/release/lsr", "wb"))'
chmod +x target/release/lsr
target/release/lsr --version
timeout 200 target/release/lsr bench train-step --device wgpu --iterations 10 --json | tee "$out/lsr_train_step_wgpu.json"
timeout 100 target/release/lsr bench encode --device wgpu --iterations 10 --json | tee "$out/lsr_encode_wgpu.json"
echo "== lsr, flex on the machine's CPU cores (for scale)"
timeout 120 target/release/lsr bench train-step --device flex --iterations 2 --json | tee "$out/lsr_train_step_flex.json"
echo "== done"
