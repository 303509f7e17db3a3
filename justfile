# lsr: reproduce "Rescaling MLM-Head for Neural Sparse Retrieval".

set shell := ["bash", "-euo", "pipefail", "-c"]

# List the recipes.
default:
    @just --list

# Every test: the workspace on flex, the encoder parity tests on WGPU (Mesa's software Vulkan
# stands in for a GPU), and a compile check of the CUDA backend.
test:
    cargo test --workspace
    XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp}" LSR_TEST_DEVICE=wgpu cargo test -p lsr-backbone --features wgpu --test parity
    # The CUDA backend links a prebuilt LLVM that its build script downloads from GitHub, which
    # CI cannot reach; DOCS_RS=1 makes those build scripts skip it, and `check` links nothing.
    DOCS_RS=1 cargo check -p lsr-cli --features cuda

# Regenerate the parity fixtures with transformers (needs the venv in scripts/fixtures/README.md).
fixtures python=".venv/bin/python":
    {{python}} scripts/fixtures/generate.py

# Build the `lsr` binary (features: wgpu, cuda).
build *features:
    cargo build --release -p lsr-cli {{ if features == "" { "" } else { "--features " + features } }}

# SPLADE encoding benchmark, lsr and PyTorch on the same machine.
bench-encode device="flex" python=".venv/bin/python":
    cargo run --release -p lsr-cli -- bench encode --device {{device}}
    {{python}} scripts/bench/encode.py
