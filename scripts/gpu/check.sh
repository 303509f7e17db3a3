#!/usr/bin/env bash
# The GPU check: what lsr has to show on a GPU machine, in one run of at most --budget seconds
# (untar to summary), by priority: parity with transformers and PyTorch on CUDA (f32 and
# bf16-mixed) with each way of computing products (`LSR_MATMUL`: cube = cubecl's kernels chosen
# by burn's autotune, cublas = cuBLASLt) — a mode whose parity is not ok is dropped from every
# later step —, cuBLASLt's fallback when it refuses a product, the products alone at the model's
# shapes, the train step at the recipe's shape against PyTorch (peak memory too) with attention
# each way (`LSR_ATTENTION`: fused = lsr's kernels, composed = burn's operations; PyTorch's is
# SDPA), corpus encoding against PyTorch likewise, what the kernel cache saves a second process,
# where the device time goes (per-kernel profile), WGPU, and miniature cells end to end.
#
# The parity steps tune at cubecl's minimal level (`CUBECL_AUTOTUNE_LEVEL=minimal`: the fixtures'
# many small shapes are correctness, not speed): on 2026-12-04 each `lsr check` at the default
# level ran past 40 s on a cold cache and timed out. The benchmarks tune at the default level;
# their warm-up iterations include the tuning, and their limits leave room for it.
#
# On the GPU machine (CUDA driver, PyTorch, transformers; no Rust, no network), from the
# repository root, with the prebuilt binary in target/gpu/lsr.tar.xz (`scripts/gpu/pack.sh`)
# and the Vulkan loader packages in .gl (docs/gpu.md, "At run time"):
#     OUT=<dir> scripts/gpu/check.sh [--budget SECONDS] [--precisions "f32 bf16-mixed"]
#                                    [--modes "cube cublas"] [--attention "fused composed"]
#                                    [--torch on|off]   (off: PyTorch's figures from an earlier
#                                    run on the same machine kind; its parity still runs)
# Dry run on a CPU (flex, tiny shapes, PyTorch on CPU from .venv), which is how it is tried:
#     scripts/gpu/check.sh --dry-run [--fail-parity MODE]
# Plan run: every command replaced by a stand-in that succeeds (or, for --fail-parity MODE,
# fails that mode's parity) and takes its whole limit (or S seconds) of a clock of the plan's
# own, to see the order, the limits and what is dropped or skipped, with nothing but bash (the
# CLI tests run it):
#     [PLAN_STEP_SECONDS=S] scripts/gpu/check.sh --plan [--fail-parity MODE] [--budget SECONDS]
# Writes results.jsonl (one line per step), summary.json, summary.md, machine.txt and log.txt
# to $OUT (default ./gpu-check). A step that would start after the budget is recorded as
# skipped and a dropped mode's steps as dropped, so the check ends in time whatever happens.
set -uo pipefail
cd "$(dirname "$0")/../.."
repo=$(pwd)

run=gpu
budget=400
precisions="f32 bf16-mixed"
modes="cube cublas"
attentions="fused composed"
torch=on
fail_parity=
while [[ $# -gt 0 ]]; do
    case $1 in
        --dry-run) run=dry ;;
        --plan) run=plan ;;
        --fail-parity) fail_parity=$2; shift ;;
        --budget) budget=$2; shift ;;
        --precisions) precisions=$2; shift ;;
        --modes) modes=$2; shift ;;
        --attention) attentions=$2; shift ;;
        --torch) torch=$2; shift ;;
        *) echo "check.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done
if [[ -n $fail_parity && $run == gpu ]]; then
    echo "check.sh: --fail-parity is for --dry-run and --plan" >&2
    exit 2
fi

out=${OUT:-gpu-check}
mkdir -p "$out"
out=$(cd "$out" && pwd)
results=$out/results.jsonl
: > "$results"
exec > >(tee "$out/log.txt") 2>&1
# A plan run keeps a clock of its own: each step takes its limit (or PLAN_STEP_SECONDS), so that
# the plan shows what the budget reaches when every step runs as long as it may.
virtual=0
now() { [[ $run == plan ]] && echo $((started + virtual)) || date +%s; }
started=$(date +%s)
# The summary's few seconds come after the last step.
deadline=$((started + budget - 10))
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
dropped=" "

# The shapes of the model's products (BERT-base; M = the encoding's 128 × 256 tokens): the MLM
# head, an attention projection, the FFN's two, and the FFN's first with a right operand that is
# not a transpose. `t`: the right operand is a PyTorch-layout weight, as in the model.
products=(--shape head=32768x768x30522t --shape attention=32768x768x768t --shape ffn-in=32768x768x3072t
          --shape ffn-out=32768x3072x768t --shape ffn-in-plain=32768x768x3072)
case $run in
    gpu)
        gpu=cuda torch_device=cuda python=python3
        mkdir -p "$work/bin"
        python3 -c 'import lzma, sys, tarfile; tarfile.open(fileobj=lzma.open(sys.argv[1])).extractall(sys.argv[2])' \
            target/gpu/lsr.tar.xz "$work/bin" || { echo "no binary: run scripts/gpu/pack.sh on the build machine"; exit 1; }
        lsr=$work/bin/lsr
        small=(--queries 8 --query-len 32 --document-len 128) recipe=(--queries 32 --query-len 32 --document-len 256)
        encode_shape=(--batch 128 --seq-len 256)
        # Launch counts at the benches' own count shape, which docs/gpu/launches-wgpu.json has.
        count_device=cuda count_shape=() count_encode=()
        iterations=10 warmup=2
        if [[ -d .gl ]]; then
            for f in .gl/*.deb; do dpkg -x "$f" /; done
            ldconfig
            export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
            export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
        fi
        ;;
    dry|plan)
        gpu=flex torch_device=cpu python=${PYTHON:-.venv/bin/python}
        lsr=$(realpath "${LSR:-target/release/lsr}")
        small=(--queries 2 --query-len 8 --document-len 16) recipe=(--queries 2 --query-len 16 --document-len 32)
        encode_shape=(--batch 4 --seq-len 32)
        products=(--shape head=64x768x4096t --shape ffn-in=64x768x3072t --shape ffn-in-plain=64x768x3072)
        iterations=1 warmup=1
        # flex runs no kernels to count: WGPU (Mesa's software Vulkan) at a tiny shape, whose
        # first run may outlast its limit while it tunes (a timeout there is the plumbing tried).
        count_device=wgpu count_shape=(--hidden 64 --queries 1 --query-len 4 --document-len 8)
        count_encode=(--hidden 64 --batch 1 --seq-len 8)
        ;;
esac
# One kernel cache for every lsr process of the check: the warm-up process of a profile and
# the steps after the first tune and compile nothing twice.
export LSR_KERNEL_CACHE=$work/kernels

# libcublasLt as a user's lsr finds it: through the loader. Where the loader has none, the copy
# in the image's Python packages (the nvidia-cublas wheel) is linked alone into a directory on
# LD_LIBRARY_PATH, never the wheel's whole folder.
find_cublaslt() {
    if ldconfig -p 2>/dev/null | grep -q 'libcublasLt\.so'; then
        echo "libcublasLt: the loader's cache: $(ldconfig -p | grep -m1 'libcublasLt\.so' | sed 's/.*=> //')"
        return
    fi
    local wheel
    wheel=$($python -c 'import nvidia.cublas, os; print(os.path.join(list(nvidia.cublas.__path__)[0], "lib"))' 2>/dev/null)
    local lib
    lib=$(ls "$wheel"/libcublasLt.so.* 2>/dev/null | head -n 1)
    if [[ -z $lib ]]; then
        echo "libcublasLt: not found (neither ldconfig -p nor the nvidia-cublas wheel)"
        return
    fi
    mkdir -p "$work/cublaslt"
    ln -s "$lib" "$work/cublaslt/$(basename "$lib")"
    export LD_LIBRARY_PATH=$work/cublaslt${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    echo "libcublasLt: linked from the Python packages: $lib"
}

echo "== machine ($(date -u +%FT%TZ))"
if [[ $run == plan ]]; then
    echo "plan: no commands run" > "$out/machine.txt"
else
    {
        nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader 2>/dev/null || echo "no nvidia-smi"
        $python -c 'import torch, transformers; print("torch", torch.__version__, "cuda", torch.version.cuda, "transformers", transformers.__version__)'
        command -v nvcc >/dev/null && nvcc --version | tail -1
        ls -d /usr/local/cuda* 2>/dev/null
        nproc
        "$lsr" --version
        echo "kernel cache: $LSR_KERNEL_CACHE"
    } | tee "$out/machine.txt"
    [[ $run == gpu ]] && find_cublaslt | tee -a "$out/machine.txt"
fi

# Peak device memory of the process a step runs, sampled from the driver (MiB above what was
# in use before it): autotuning's trial buffers included.
sampler=
start_sampler() {
    [[ $run == gpu ]] || return 0
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 50 > "$work/mem" 2>/dev/null &
    sampler=$!
    sleep 0.2
}
stop_sampler() {
    [[ -n $sampler ]] || { echo null; return; }
    kill "$sampler" 2>/dev/null; wait "$sampler" 2>/dev/null; sampler=
    awk 'NR==1 {base=$1} {if ($1>max) max=$1} END {if (NR) print max-base; else print "null"}' "$work/mem"
}

# A JSON object of strings from key=value arguments (keys and values are plain words here).
meta() {
    local json="" pair
    for pair in "$@"; do
        json+="${json:+,}\"${pair%%=*}\":\"${pair#*=}\""
    done
    echo "{$json}"
}

# record NAME STATUS META [WALL_S MEM_MIB RESULT]: one line of results.jsonl.
record() {
    printf '{"step":"%s","status":"%s","wall_s":%s,"gpu_peak_mib":%s,"meta":%s,"result":%s}\n' \
        "$1" "$2" "${4:-null}" "${5:-null}" "$3" "${6:-null}" >> "$results"
}

# record_each_shape NAME STATUS META [WALL MEM]: a products bench that printed nothing, on the
# lines a run has: one per shape, named as a run's are.
record_each_shape() {
    local arg
    for arg in "${products[@]}"; do
        [[ $arg == --shape ]] ||
            record "$1-${arg%%=*}" "$2" "${3%\}},\"shape\":\"${arg%%=*}\"}" "${4:-}" "${5:-}"
    done
}

# record_not_run NAME STATUS META: a step that did not run, on the lines it would have had.
record_not_run() {
    if [[ $3 == *'"kind":"matmul"'* ]]; then
        record_each_shape "$@"
    else
        record "$1" "$2" "$3"
    fi
}

# The stand-in for a command in a plan run: a parity step of the mode --fail-parity names
# fails, everything else succeeds with an empty result; a products bench prints a line per
# shape as its tool writes JSON (serde_json compact, PyTorch's json.dumps with ": ").
stand_in() {
    local name=$1 arg separator=":"
    if [[ -n $fail_parity && $name == *"-$fail_parity-parity-"* ]]; then
        echo '{"pass":false}'
        return 1
    fi
    case $name in
        *-parity-*) echo '{"pass":true}' ;;
        *-matmul-*)
            [[ $name == torch-* ]] && separator=": "
            for arg in "${products[@]}"; do
                [[ $arg == --shape ]] || echo "{\"shape\"$separator\"${arg%%=*}\"}"
            done ;;
        *) echo '{}' ;;
    esac
}

# step NAME LIMIT_SECONDS META COMMAND...: runs COMMAND unless its products' mode was dropped or
# the budget is spent, and records one line per JSON line it prints last (a bench of several
# shapes prints one per shape; each is recorded with its shape's name).
step() {
    local name=$1 limit=$2 meta=$3; shift 3
    local mode
    mode=$(sed -n 's/.*"device":"\([a-z]*\)".*"matmul":"\([a-z]*\)".*/\1:\2/p' <<< "$meta")
    if [[ -n $mode && $dropped == *" $mode "* ]]; then
        echo "== $name: dropped (${mode#*:}'s parity on ${mode%:*} was not ok)"
        record_not_run "$name" dropped "$meta"
        return
    fi
    local left=$((deadline - $(now)))
    if (( left < 10 )); then
        echo "== $name: skipped (budget spent)"
        record_not_run "$name" skipped "$meta"
        return
    fi
    (( limit > left )) && limit=$left
    echo "== $name (limit ${limit}s)"
    start_sampler
    local t0; t0=$(date +%s%N)
    if [[ $run == plan ]]; then
        stand_in "$name" > "$work/stdout"
        local rc=$?
        local took=${PLAN_STEP_SECONDS:-$limit}
        virtual=$((virtual + (took < limit ? took : limit)))
        (exit $rc)
    elif [[ $run == dry && -n $fail_parity && $name == *"-$fail_parity-parity-"* ]]; then
        echo '{"pass": false, "injected": true}' > "$work/stdout"; false
    else
        timeout -k 5 "$limit" "$@" > "$work/stdout"
    fi
    local rc=$?
    local wall; wall=$(awk -v ns=$(( $(date +%s%N) - t0 )) 'BEGIN {printf "%.3f", ns / 1e9}')
    local mem; mem=$(stop_sampler)
    cat "$work/stdout"
    local status=ok
    (( rc == 124 || rc == 137 )) && status=timeout
    (( rc != 0 && rc != 124 && rc != 137 )) && status="exit $rc"
    local lines; lines=$(grep -c '^{' "$work/stdout")
    if [[ $meta == *'"kind":"matmul"'* ]] && (( lines == 0 )); then
        record_each_shape "$name" "$status" "$meta" "$wall" "$mem"
        return
    fi
    if [[ $meta != *'"kind":"matmul"'* ]]; then
        record "$name" "$status" "$meta" "$wall" "$mem" "$(json_or_null "$(grep '^{' "$work/stdout" | tail -n 1)")"
        return
    fi
    local line shape
    while IFS= read -r line; do
        shape=$(sed -n 's/.*"shape": *"\([^"]*\)".*/\1/p' <<< "$line")
        record "$name-$shape" "$status" "${meta%\}},\"shape\":\"$shape\"}" "$wall" "$mem" "$(json_or_null "$line")"
    done < <(grep '^{' "$work/stdout")
}

# A line of JSON as it is, or null where it does not parse (cut short by a timeout, say).
json_or_null() {
    if [[ -z $1 ]] || { [[ $run != plan ]] && ! $python -c 'import json, sys; json.loads(sys.argv[1])' "$1" 2>/dev/null; }; then
        echo null
    else
        echo "$1"
    fi
}

# parity MODE PRECISION: `lsr check`, and the mode dropped from every later step if it fails.
parity() {
    local mode=$1 precision=$2 name="lsr-$gpu-$1-parity-$2"
    step "$name" 120 "$(meta tool=lsr device="$gpu" matmul="$mode" precision="$precision" kind=parity)" \
        env LSR_MATMUL="$mode" CUBECL_AUTOTUNE_LEVEL=minimal "$lsr" check --device "$gpu" --precision "$precision" --json
    local last; last=$(tail -n 1 "$results")
    [[ $last == *'"status":"dropped"'* || $last == *'"status":"skipped"'* ]] && return
    if [[ $last != *'"status":"ok"'*'"pass":true'* ]]; then
        [[ $dropped == *" $gpu:$mode "* ]] || dropped+="$gpu:$mode "
        echo "== $mode dropped: its $precision parity on $gpu was not ok"
        record "drop-$mode" dropped "$(meta kind=drop matmul_dropped="$mode" after="$name")"
    fi
}

lsr_train() { # mode attention precision shape-name shape...
    local mode=$1 attention=$2 precision=$3 shape=$4; shift 4
    step "lsr-$gpu-$mode-$attention-train-$shape-$precision" 90 "$(meta tool=lsr device="$gpu" matmul="$mode" attention="$attention" precision="$precision" shape="$shape" kind=train)" \
        env LSR_MATMUL="$mode" LSR_ATTENTION="$attention" LSR_CUBLAS_TIMING=1 "$lsr" bench train-step --device "$gpu" --precision "$precision" "$@" --warmup "$warmup" --iterations "$iterations" --json
}
lsr_encode() { # device mode attention precision
    step "lsr-$1-$2-$3-encode-$4" 60 "$(meta tool=lsr device="$1" matmul="$2" attention="$3" precision="$4" shape=encode kind=encode)" \
        env LSR_MATMUL="$2" LSR_ATTENTION="$3" LSR_CUBLAS_TIMING=1 "$lsr" bench encode --device "$1" --precision "$4" "${encode_shape[@]}" --warmup "$warmup" --iterations "$iterations" --json
}
lsr_products() { # mode precision
    step "lsr-$1-matmul-$2" 45 "$(meta tool=lsr device="$gpu" matmul="$1" precision="$2" kind=matmul)" \
        env LSR_MATMUL="$1" LSR_CUBLAS_TIMING=1 "$lsr" bench matmul --device "$gpu" --precision "$2" "${products[@]}" --warmup "$warmup" --iterations "$iterations" --json
}
torch_train() { # precision tf32 shape-name shape...
    [[ $torch == on ]] || return 0
    local precision=$1 tf32=$2 shape=$3; shift 3
    step "torch-train-$shape-$precision-tf32$tf32" 45 "$(meta tool=torch device="$torch_device" precision="$precision" tf32="$tf32" shape="$shape" kind=train)" \
        $python scripts/bench/train_step.py --device "$torch_device" --precision "$precision" --tf32 "$tf32" "$@" --warmup "$warmup" --iterations "$iterations"
}
torch_encode() { # precision tf32
    [[ $torch == on ]] || return 0
    step "torch-encode-$1-tf32$2" 45 "$(meta tool=torch device="$torch_device" precision="$1" tf32="$2" shape=encode kind=encode)" \
        $python scripts/bench/encode.py --device "$torch_device" --precision "$1" --tf32 "$2" "${encode_shape[@]}" --warmup "$warmup" --iterations "$iterations"
}
torch_products() { # precision tf32
    [[ $torch == on ]] || return 0
    step "torch-matmul-$1-tf32$2" 40 "$(meta tool=torch device="$torch_device" precision="$1" tf32="$2" kind=matmul)" \
        $python scripts/bench/matmul.py --device "$torch_device" --precision "$1" --tf32 "$2" "${products[@]}" --warmup "$warmup" --iterations "$iterations"
}
# profile NAME MODE BENCH-ARGS...: an lsr benchmark with cubecl's per-kernel profiling on, once
# with one timed iteration and once with three: their difference is two steady-state
# iterations. A process without profiling runs the same benchmark first, so that the kernel
# cache is equally warm for both profiled runs (the 2026-11-30 encode profile came out negative
# without it).
profile() {
    local name=$1 mode=$2; shift 2
    local dir=$work/profile-$name
    mkdir -p "$dir/one" "$dir/three"
    for one_or_three in one three; do
        printf '[profiling.logger]\nlevel = "basic"\nfile = "%s"\nappend = false\n' "$dir/$one_or_three/kernels.log" > "$dir/$one_or_three/cubecl.toml"
    done
    step "lsr-profile-$name" 90 "$(meta tool=lsr device="$gpu" matmul="$mode" kind=profile name="$name")" \
        env LSR_MATMUL="$mode" bash -c 'set -e; lsr=$1 dir=$2; shift 2
            (cd "$dir" && "$lsr" bench "$@" --warmup 1 --iterations 1 > warmup.json)
            (cd "$dir/one" && "$lsr" bench "$@" --warmup 1 --iterations 1 > bench.json)
            (cd "$dir/three" && "$lsr" bench "$@" --warmup 1 --iterations 3 > bench.json)
            python3 "'"$repo"'/scripts/gpu/kernel_profile.py" "$dir/three/kernels.log" --minus "$dir/one/kernels.log" --per 2 --bench "$dir/three/bench.json"' \
        _ "$lsr" "$dir" "$@" --device "$gpu" --json
}

# The products' mode whose train step at the recipe's shape was fastest in this run, in the
# precision given (the first mode not dropped if none ran).
fastest_mode() {
    local fallback
    for fallback in $modes; do [[ $dropped == *" $gpu:$fallback "* ]] || break; done
    [[ $run == plan ]] && { echo "$fallback"; return; }
    $python - "$results" "$1" "$fallback" <<'PY'
import json, sys
best = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    m, res = r["meta"], r.get("result") or {}
    if r["status"] == "ok" and m.get("tool") == "lsr" and m.get("kind") == "train" and m.get("shape") == "recipe" and m.get("precision") == sys.argv[2] and "seconds_per_step" in res:
        best[m["matmul"]] = res["seconds_per_step"]
print(min(best, key=best.get) if best else sys.argv[3])
PY
}

# 1. Correctness first: nothing below means anything if the parity fails. A mode whose parity
# is not ok in either precision is dropped from every later step.
for mode in $modes; do
    for precision in $precisions; do
        parity "$mode" "$precision"
    done
done
[[ $torch == on ]] && step "torch-parity" 40 "$(meta tool=torch device="$torch_device" kind=parity)" \
    $python scripts/gpu/torch_parity.py --device "$torch_device"
# cuBLASLt refusing every product (the fault switch): burn's matmul computes them, one warning
# per shape, and the values are the same.
[[ " $modes " == *" cublas "* ]] && step "lsr-$gpu-cublas-refused-parity-f32" 120 "$(meta tool=lsr device="$gpu" matmul=cublas precision=f32 kind=fallback)" \
    env LSR_MATMUL=cublas LSR_CUBLAS_REFUSE=all CUBECL_AUTOTUNE_LEVEL=minimal "$lsr" check --device "$gpu" --precision f32 --json

# 2. The train step at the recipe's shape, each mode, then PyTorch (lsr's f32 runs in TF32 where
# cubecl picks tensor cores and in cuBLASLt, so PyTorch's f32 is measured with TF32 on).
for precision in $precisions; do
    for mode in $modes; do
        for attention in $attentions; do
            lsr_train "$mode" "$attention" "$precision" recipe "${recipe[@]}"
        done
    done
done
torch_train bf16 off recipe "${recipe[@]}"
torch_train f32 on recipe "${recipe[@]}"
loaded=$(grep -o '"library":"[^"]*"' "$results" | head -n 1 | cut -d'"' -f4)
echo "libcublasLt loaded by lsr: ${loaded:-none (no product went to cuBLASLt)}" | tee -a "$out/machine.txt"

# 3. Corpus encoding, each mode, then PyTorch.
for precision in $precisions; do
    for mode in $modes; do
        for attention in $attentions; do
            lsr_encode "$gpu" "$mode" "$attention" "$precision"
        done
    done
done
torch_encode bf16 off
torch_encode f32 on

# 4. The products alone at the model's shapes, each mode, then cuBLAS through PyTorch.
for precision in $precisions; do
    for mode in $modes; do
        lsr_products "$mode" "$precision"
    done
done
torch_products bf16 off
torch_products f32 on

# 5. What the kernel cache saves: the small train step in a fresh cache, then again.
for cache in cold warm; do
    step "lsr-kernel-cache-$cache" 45 "$(meta tool=lsr device="$gpu" kind=cache cache="$cache")" \
        env LSR_KERNEL_CACHE="$work/kernels-probe" "$lsr" bench train-step --device "$gpu" "${small[@]}" --warmup 1 --iterations 1 --json
done

# 5b. Kernel launches per step (train, both precisions; encoding) at the count shape, with the
# products on cube (cuBLASLt's kernels are not cubecl's to observe), and PyTorch's: its operators
# per step (foreach, then fused AdamW) and the CUDA kernels torch.profiler sees. Beside
# docs/gpu/launches-wgpu.json (the same counts on lavapipe), the calibration of that proxy.
for precision in $precisions; do
    step "lsr-$count_device-launches-train-$precision" 45 "$(meta tool=lsr device="$count_device" matmul=cube precision="$precision" kind=launches shape=train)" \
        env LSR_MATMUL=cube "$lsr" bench train-step --device "$count_device" --launches --precision "$precision" "${count_shape[@]}" --json
done
step "lsr-$count_device-launches-encode-f32" 45 "$(meta tool=lsr device="$count_device" matmul=cube precision=f32 kind=launches shape=encode)" \
    env LSR_MATMUL=cube "$lsr" bench encode --device "$count_device" --launches "${count_encode[@]}" --json
for precision in f32 bf16; do
    for adamw in foreach fused; do
        step "torch-launches-train-$precision-$adamw" 45 "$(meta tool=torch device="$torch_device" precision="$precision" kind=launches shape=train adamw="$adamw")" \
            $python scripts/bench/train_step.py --device "$torch_device" --count --precision "$precision" --adamw "$adamw"
    done
done
step "torch-launches-encode-f32" 45 "$(meta tool=torch device="$torch_device" precision=f32 kind=launches shape=encode)" \
    $python scripts/bench/encode.py --device "$torch_device" --count

# 6. Where the device time goes, in the faster mode: diagnosis, after every target.
profile train-bf16-mixed "$(fastest_mode bf16-mixed)" train-step --precision bf16-mixed "${recipe[@]}"
profile train-f32 "$(fastest_mode f32)" train-step --precision f32 "${recipe[@]}"

# 7. WGPU on the same GPU.
if [[ $run != dry ]]; then
    step "lsr-wgpu-parity-f32" 120 "$(meta tool=lsr device=wgpu matmul=cube precision=f32 kind=parity)" env CUBECL_AUTOTUNE_LEVEL=minimal "$lsr" check --device wgpu --json
    lsr_encode wgpu cube fused f32
fi

# 8. A cell of the miniature matrix end to end (train, evaluate) in each precision.
step "mini-data" 30 '{"kind":"setup"}' bash -c "'$lsr' data mini-task --out data/synth >/dev/null && \
    '$lsr' data mini-models --spec experiments/mini-models.toml --vocab data/synth/vocab.txt --out data/synth/models >/dev/null && echo '{}'"
for precision in $precisions; do
    mini=$work/mini-$precision
    variant="--results '$mini' --set device=$gpu --set recipe.precision=$precision --set eval.precision=$precision"
    step "mini-modernbert-k16-$precision" 45 "$(meta tool=lsr device="$gpu" precision="$precision" kind=mini cell=modernbert-k16)" \
        bash -c "'$lsr' matrix run experiments/mini.toml $variant --cell modernbert-k16 >&2; s=\$?; tr -d '\n' < '$mini/modernbert-k16/metrics.json' 2>/dev/null; echo; exit \$s"
done

# 9. PyTorch without TF32, the encode profile and the small training shape, if time is left.
torch_train f32 off recipe "${recipe[@]}"
profile encode-f32 "$(fastest_mode f32)" encode --precision f32 "${encode_shape[@]}"
lsr_train "$(fastest_mode f32)" fused f32 small "${small[@]}"
torch_train f32 on small "${small[@]}"

echo "== summary"
if [[ $run == plan ]]; then
    cat "$results"
    exit 0
fi
$python scripts/gpu/summarize.py "$results" --out "$out" --elapsed "$(( $(now) - started ))"
