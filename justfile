# lsr: reproduce "Rescaling MLM-Head for Neural Sparse Retrieval".

set shell := ["bash", "-euo", "pipefail", "-c"]

# List the recipes.
default:
    @just --list

# Every test: all crates on flex, the CUDA + WGPU `lsr` linked and run, encoder parity on WGPU.
test:
    # burn's CUDA backend links LLVM 23; where GitHub is unreachable it comes from PyPI.
    scripts/cuda/llvm-bundle.sh
    # ptxas and libdevice (PyPI wheels) for the test that compiles lsr's kernels for sm_90.
    scripts/cuda/ptx-tools.sh > /dev/null
    # oneMKL and oneDNN (PyPI wheels) for the tests of products through a CPU BLAS (LSR_BLAS, and
    # LSR_TEST_BLAS for the product tests' second library; the model uses one only under
    # LSR_MATMUL=blas|auto).
    scripts/cpu/blas.sh > /dev/null
    scripts/cpu/blas.sh onednn > /dev/null
    # One build with CUDA and WGPU compiled in, so that nothing is compiled twice: the tests run
    # on flex (LSR_DEVICE), the CLI tests run the CUDA-enabled `lsr`, the encoder parity tests
    # run again on WGPU (Mesa's software Vulkan where there is no GPU), and CUDA, having no
    # driver there, must refuse clearly. BURN_DEVICE pins burn's implicit default device to the
    # host for the in-process tests, as `lsr` does for itself. burn's autotune times candidate
    # kernels on first use; on a software Vulkan device that is CPU time the tests, which check
    # values and not speed, need not spend on more than the fewest candidates. The WGPU tests
    # run attention through lsr's fused kernels (LSR_ATTENTION=fused, opt-in elsewhere); flex
    # runs the composed attention, which is the same code on every backend.
    BURN_DEVICE=flex LSR_DEVICE=flex LSR_TEST_DEVICE=wgpu LSR_ATTENTION=fused LSR_CUDA_TOOLS="$(scripts/cuda/ptx-tools.sh)" LSR_BLAS="$(scripts/cpu/blas.sh)" LSR_TEST_BLAS="$(scripts/cpu/blas.sh onednn)" CUBECL_AUTOTUNE_LEVEL=minimal XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-/tmp}" cargo test --workspace --features lsr-cli/cuda,lsr-cli/wgpu
    # The default build, without GPU backends (`just reproduce mini`), must compile too.
    cargo check -p lsr-cli

# lsr's attention kernels compiled for sm_90a without a GPU: registers and spills per kernel (docs/perf-gpu.md)
ptx:
    scripts/cuda/llvm-bundle.sh
    LSR_CUDA_TOOLS="$(scripts/cuda/ptx-tools.sh)" cargo test --workspace --features lsr-cli/cuda,lsr-cli/wgpu --lib every_attention_kernel_compiles -- --nocapture

# Regenerate the fixtures with transformers, pytrec_eval and scipy (venv: scripts/fixtures/README.md).
fixtures python=".venv/bin/python":
    {{python}} scripts/fixtures/generate.py
    {{python}} scripts/fixtures/train_step.py
    {{python}} scripts/fixtures/distillation.py
    {{python}} scripts/fixtures/numpy_pickles.py
    {{python}} scripts/fixtures/trec_eval_fixtures.py
    {{python}} scripts/fixtures/significance.py
    scripts/fixtures/sparse_encoder.sh {{python}}
    scripts/fixtures/tensorboard.sh {{python}}

# Run every cell of a matrix not yet done, then write its tables and figures (`lsr`: target/release).
reproduce matrix="mini":
    # table1 and table1-distil need the CUDA build; the miniatures (mini, mini-distil) run on CPU
    # and first build their synthetic data and miniature models. No build drops a backend the
    # binary already has (scripts/build-lsr.sh).
    scripts/build-lsr.sh {{ if matrix =~ "^mini" { "" } else { "cuda" } }}
    {{ if matrix =~ "^mini" { "target/release/lsr data mini-task --out data/synth && target/release/lsr data mini-models --spec experiments/mini-models.toml --vocab data/synth/vocab.txt --out data/synth/models" } else { "true" } }}
    status=0; target/release/lsr matrix run experiments/{{matrix}}.toml || status=$?; \
    target/release/lsr report results/{{matrix}}; \
    echo 'lsr is target/release/lsr, not on the PATH: export PATH="$PWD/target/release:$PATH"'; \
    exit $status

# Launches and kept bytes per train step and encoded batch: lsr on WGPU (fused attention, autotune minimal) beside PyTorch
launches python=".venv/bin/python" *options="":
    scripts/build-lsr.sh wgpu
    {{python}} scripts/bench/launches.py --lsr target/release/lsr --out docs/gpu/launches-wgpu.json {{options}}

# The miniature again in bf16-mixed and with another data-order seed: same Table 1 pattern as f32?
mini-precision: (reproduce "mini")
    scripts/mini/precision.sh

# Choosing k on the miniature: rule and probe against the 35-cell grid, three seeds (docs/k-choice.md).
mini-k *seeds: (reproduce "mini")
    scripts/mini/k-choice.sh {{seeds}}

# The miniature under seeded random SIGKILLs must end byte-identical to an undisturbed run.
soak kills="24" seed="2":
    # Restarted after each kill: every finished cell stays as it was, no step is redone from
    # before a checkpoint, and the weights, runs and Table 1 equal an undisturbed run's byte for
    # byte (results/soak-reference, kept between soaks). Not in CI.
    scripts/build-lsr.sh
    target/release/lsr data mini-task --out data/synth
    target/release/lsr data mini-models --spec experiments/mini-models.toml --vocab data/synth/vocab.txt --out data/synth/models
    scripts/mini/soak.sh {{kills}} {{seed}}

# Train and evaluate one cell, e.g. `just cell mini modernbert 16`.
cell matrix backbone k:
    scripts/build-lsr.sh {{ if matrix =~ "^mini" { "" } else { "cuda" } }}
    target/release/lsr matrix run experiments/{{matrix}}.toml --cell {{backbone}}-k{{k}}

# One figure of a matrix's results: `just plot tradeoff`, `just plot losses mini`.
plot what matrix="table1":
    scripts/build-lsr.sh
    target/release/lsr report results/{{matrix}} --only {{what}}

# Table 1 (Markdown, CSV, LaTeX) and the per-dataset table of a matrix's results.
table matrix="table1":
    scripts/build-lsr.sh
    target/release/lsr report results/{{matrix}} --only table

# Build target/release/lsr with these backends and those it has (wgpu, cuda): `just build cuda`.
build *features:
    scripts/build-lsr.sh {{ features }}

# SPLADE encoding benchmark: lsr, PyTorch and (on the CPU) ONNX Runtime on this machine, and the ratios.
bench-encode device="flex" torch_device="cpu" python=".venv/bin/python":
    scripts/build-lsr.sh {{ if device == "flex" { "" } else { replace_regex(device, ":.*", "") } }}
    lsr=$(target/release/lsr bench encode --device {{device}} --json); \
    torch=$({{python}} scripts/bench/encode.py --device {{torch_device}}); \
    ort={{ if torch_device == "cpu" { "$(" + python + " scripts/bench/encode_onnx.py)" } else { "null" } }}; \
    echo "lsr:          $lsr"; echo "pytorch:      $torch"; echo "onnxruntime:  $ort"; \
    {{python}} -c 'import json,sys; a,b,c=(json.loads(x) for x in sys.argv[1:]); r=lambda o: "%.2f, peak RSS: %.2f" % (a["sequences_per_second"]/o["sequences_per_second"], a["peak_rss_mib"]/o["peak_rss_mib"]); print("lsr/pytorch throughput: " + r(b)); c and print("lsr/onnxruntime throughput: " + r(c))' "$lsr" "$torch" "$ort"

# Exact retrieval benchmark, lsr then scipy.sparse on the same collection, and their ratio.
bench-retrieve shape="uniform" python=".venv/bin/python":
    scripts/build-lsr.sh
    lsr=$(target/release/lsr bench retrieve --shape {{shape}} --json --run target/bench-retrieve.trec); \
    scipy=$({{python}} scripts/bench/retrieve.py --shape {{shape}} --compare target/bench-retrieve.trec); \
    echo "lsr:   $lsr"; echo "scipy: $scipy"; \
    {{python}} -c 'import json,sys; a,b=(json.loads(x) for x in sys.argv[1:]); print("lsr/scipy queries/s: %.1f, identical top-10: %s" % (a["queries_per_second"]/b["queries_per_second"], b["identical_top_k"]))' "$lsr" "$scipy"

# SPLADE training-step benchmark, lsr then PyTorch on this machine, and their ratio.
bench-train-step device="flex" torch_device="cpu" python=".venv/bin/python":
    scripts/build-lsr.sh {{ if device == "flex" { "" } else { replace_regex(device, ":.*", "") } }}
    lsr=$(target/release/lsr bench train-step --device {{device}} --json); \
    torch=$({{python}} scripts/bench/train_step.py --device {{torch_device}}); \
    echo "lsr:     $lsr"; echo "pytorch: $torch"; \
    {{python}} -c 'import json,sys; a,b=(json.loads(x) for x in sys.argv[1:]); print("lsr/pytorch seconds per step: %.2f, peak RSS: %.2f" % (a["seconds_per_step"]/b["seconds_per_step"], a["peak_rss_mib"]/b["peak_rss_mib"]))' "$lsr" "$torch"

# An `lsr eval --quantize 100` output checked against Anserini, PISA and Seismic (PyPI, Java 21+).
engines eval model:
    # Not in CI: each engine indexes the evaluation's exports and searches them, and its run is
    # compared with lsr's (docs/interop.md, "Checked against the engines").
    scripts/build-lsr.sh
    scripts/engines/run.sh {{eval}} {{model}}

# Fuzz one reader (crates/fuzz/README.md), `runs` executions or `seconds`: `just fuzz safetensors`.
fuzz target runs="1000000" seconds="1800":
    crates/fuzz/fuzz.sh {{target}} {{runs}} {{seconds}}

# Every fuzz target, one after the other, each for `runs` executions or `seconds`.
fuzz-all runs="1000000" seconds="1800":
    crates/fuzz/fuzz.sh all {{runs}} {{seconds}}
