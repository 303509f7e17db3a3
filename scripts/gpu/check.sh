#!/usr/bin/env bash
# The GPU check: what lsr has to show on a GPU machine, in one run, by priority: parity with
# transformers and PyTorch on CUDA (f32 and bf16-mixed) with each way of computing products
# (`LSR_MATMUL`: cube = cubecl's kernels chosen by burn's autotune, cublas = cuBLASLt), the
# matmul kernel alone, the train step at the recipe's shape against PyTorch on the same GPU
# (peak memory too), where the device time goes in the faster mode (per-kernel profile, after a
# warm-up process), corpus encoding, the reductions over tokens alone, WGPU, and miniature cells
# end to end. The build before autotune and fusion is not rerun: its figures are in
# docs/gpu/2026-11-30-2.json, measured by this script at the same shapes.
#
# On the GPU machine (CUDA driver, PyTorch, transformers; no Rust, no network), from the
# repository root, with the prebuilt binary in target/gpu/lsr.tar.xz (`scripts/gpu/pack.sh`)
# and the Vulkan loader packages in .gl (docs/gpu.md, "At run time"):
#     OUT=<dir> scripts/gpu/check.sh [--budget SECONDS] [--precisions "f32 bf16-mixed"]
#                                    [--modes "cube cublas"]
# Dry run on a CPU (flex, tiny shapes, PyTorch on CPU from .venv), which is how it is tested:
#     scripts/gpu/check.sh --dry-run
# Writes results.jsonl (one line per step), summary.json, summary.md, machine.txt and log.txt
# to $OUT (default ./gpu-check). Steps that would start after the budget are recorded as
# skipped, so the check ends in time whatever happens.
set -uo pipefail
cd "$(dirname "$0")/../.."
repo=$(pwd)

dry=0
budget=450
precisions="f32 bf16-mixed"
modes="cube cublas"
while [[ $# -gt 0 ]]; do
    case $1 in
        --dry-run) dry=1 ;;
        --budget) budget=$2; shift ;;
        --precisions) precisions=$2; shift ;;
        --modes) modes=$2; shift ;;
        *) echo "check.sh: unknown argument $1" >&2; exit 2 ;;
    esac
    shift
done

out=${OUT:-gpu-check}
mkdir -p "$out"
out=$(cd "$out" && pwd)
results=$out/results.jsonl
: > "$results"
exec > >(tee "$out/log.txt") 2>&1
started=$(date +%s)
deadline=$((started + budget))
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if (( dry )); then
    gpu=flex torch_device=cpu python=${PYTHON:-.venv/bin/python}
    lsr=$(realpath "${LSR:-target/release/lsr}")
    small=(--queries 2 --query-len 8 --document-len 16) recipe=(--queries 2 --query-len 16 --document-len 32)
    encode_shape=(--batch 4 --seq-len 32) head=(--m 64 --k 768 --n 4096) ffn=(--m 64 --k 768 --n 3072)
    reduce_shape=(--rows 256 --width 64 --batch 2 --seq-len 16 --terms 128)
    iterations=1 warmup=1
else
    gpu=cuda torch_device=cuda python=python3
    mkdir -p "$work/bin"
    python3 -c 'import lzma, sys, tarfile; tarfile.open(fileobj=lzma.open(sys.argv[1])).extractall(sys.argv[2])' \
        target/gpu/lsr.tar.xz "$work/bin" || { echo "no binary: run scripts/gpu/pack.sh on the build machine"; exit 1; }
    lsr=$work/bin/lsr
    small=(--queries 8 --query-len 32 --document-len 128) recipe=(--queries 32 --query-len 32 --document-len 256)
    # The head's product at the encoding shape (128 × 256 tokens), and the FFN's first one.
    encode_shape=(--batch 128 --seq-len 256) head=(--m 32768 --k 768 --n 30522) ffn=(--m 32768 --k 768 --n 3072)
    reduce_shape=()
    iterations=10 warmup=2
    if [[ -d .gl ]]; then
        for f in .gl/*.deb; do dpkg -x "$f" /; done
        ldconfig
        export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
        export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
    fi
fi

echo "== machine ($(date -u +%FT%TZ))"
{
    nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader 2>/dev/null || echo "no nvidia-smi"
    $python -c 'import torch, transformers; print("torch", torch.__version__, "cuda", torch.version.cuda, "transformers", transformers.__version__)'
    command -v nvcc >/dev/null && nvcc --version | tail -1
    ls -d /usr/local/cuda* 2>/dev/null
    nproc
    "$lsr" --version
} | tee "$out/machine.txt"

# Peak device memory of the process a step runs, sampled from the driver (MiB above what was
# in use before it): autotuning's trial buffers included.
sampler=
start_sampler() {
    [[ $gpu == flex ]] && return 0
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 50 > "$work/mem" 2>/dev/null &
    sampler=$!
    sleep 0.2
}
stop_sampler() {
    [[ -n $sampler ]] || { echo null; return; }
    kill "$sampler" 2>/dev/null; wait "$sampler" 2>/dev/null; sampler=
    awk 'NR==1 {base=$1} {if ($1>max) max=$1} END {if (NR) print max-base; else print "null"}' "$work/mem"
}

# step NAME LIMIT_SECONDS META_JSON COMMAND...: runs COMMAND (its last stdout line is its JSON
# result) unless the budget is spent, and appends one line to results.jsonl.
step() {
    local name=$1 limit=$2 meta=$3; shift 3
    local left=$((deadline - $(date +%s)))
    if (( left < 10 )); then
        echo "== $name: skipped (budget spent)"
        echo "{\"step\":\"$name\",\"status\":\"skipped\",\"meta\":$meta}" >> "$results"
        return
    fi
    (( limit > left )) && limit=$left
    echo "== $name (limit ${limit}s)"
    start_sampler
    local t0; t0=$(date +%s%N)
    timeout -k 5 "$limit" "$@" > "$work/stdout"
    local rc=$?
    local wall_ms=$(( ($(date +%s%N) - t0) / 1000000 ))
    local mem; mem=$(stop_sampler)
    cat "$work/stdout"
    local status=ok
    (( rc == 124 || rc == 137 )) && status=timeout
    (( rc != 0 && rc != 124 && rc != 137 )) && status="exit $rc"
    $python -c 'import json, sys
try:
    r = json.loads(sys.argv[1])
except ValueError:
    r = None
print(json.dumps({"step": sys.argv[2], "status": sys.argv[3], "wall_s": int(sys.argv[4]) / 1000,
    "gpu_peak_mib": None if sys.argv[5] == "null" else float(sys.argv[5]),
    "meta": json.loads(sys.argv[6]), "result": r}))' "$(tail -n 1 "$work/stdout")" "$name" "$status" "$wall_ms" "$mem" "$meta" >> "$results"
}

meta() { # key=value...: a JSON object of strings
    $python -c 'import json, sys; print(json.dumps(dict(a.split("=", 1) for a in sys.argv[1:])))' "$@"
}

lsr_train() { # device mode precision shape-name shape...
    local device=$1 mode=$2 precision=$3 shape=$4; shift 4
    step "lsr-$device-$mode-train-$shape-$precision" 150 "$(meta tool=lsr device="$device" matmul="$mode" precision="$precision" shape="$shape" kind=train)" \
        env LSR_MATMUL="$mode" "$lsr" bench train-step --device "$device" --precision "$precision" "$@" --warmup "$warmup" --iterations "$iterations" --json
}
lsr_encode() { # device mode precision
    step "lsr-$1-$2-encode-$3" 120 "$(meta tool=lsr device="$1" matmul="$2" precision="$3" shape=encode kind=encode)" \
        env LSR_MATMUL="$2" "$lsr" bench encode --device "$1" --precision "$3" "${encode_shape[@]}" --warmup "$warmup" --iterations "$iterations" --json
}
lsr_matmul() { # mode shape-name precision shape...
    local mode=$1 shape=$2 precision=$3; shift 3
    step "lsr-$mode-matmul-$shape-$precision" 60 "$(meta tool=lsr device="$gpu" matmul="$mode" precision="$precision" shape="$shape" kind=matmul)" \
        env LSR_MATMUL="$mode" "$lsr" bench matmul --device "$gpu" --precision "$precision" --transposed-rhs "$@" --json
}
torch_train() { # precision tf32 shape-name shape...
    local precision=$1 tf32=$2 shape=$3; shift 3
    step "torch-train-$shape-$precision-tf32$tf32" 90 "$(meta tool=torch device="$torch_device" precision="$precision" tf32="$tf32" shape="$shape" kind=train)" \
        $python scripts/bench/train_step.py --device "$torch_device" --precision "$precision" --tf32 "$tf32" "$@" --warmup "$warmup" --iterations "$iterations"
}
torch_encode() { # precision tf32
    step "torch-encode-$1-tf32$2" 90 "$(meta tool=torch device="$torch_device" precision="$1" tf32="$2" shape=encode kind=encode)" \
        $python scripts/bench/encode.py --device "$torch_device" --precision "$1" --tf32 "$2" "${encode_shape[@]}" --warmup "$warmup" --iterations "$iterations"
}
torch_matmul() { # shape-name precision tf32 shape...
    local shape=$1 precision=$2 tf32=$3; shift 3
    step "torch-matmul-$shape-$precision-tf32$tf32" 60 "$(meta tool=torch device="$torch_device" precision="$precision" tf32="$tf32" shape="$shape" kind=matmul)" \
        $python scripts/bench/matmul.py --device "$torch_device" --precision "$precision" --tf32 "$tf32" --transposed-rhs "$@"
}
# profile NAME MODE BENCH-ARGS...: an lsr benchmark with cubecl's per-kernel profiling on, once
# with one timed iteration and once with three: their difference is two steady-state
# iterations. A process without profiling runs the same benchmark first: whatever cubecl keeps
# on disk between processes is then warm for both profiled runs, which would otherwise differ in
# it (the 2026-11-30 encode profile came out negative that way); what every process repeats
# (autotuning: this build keeps its choices in memory only) is equal in both and cancels out.
profile() {
    local name=$1 mode=$2; shift 2
    local dir=$work/profile-$name
    mkdir -p "$dir/one" "$dir/three"
    for run in one three; do
        printf '[profiling.logger]\nlevel = "basic"\nfile = "%s"\nappend = false\n' "$dir/$run/kernels.log" > "$dir/$run/cubecl.toml"
    done
    step "lsr-profile-$name" 180 "$(meta tool=lsr device="$gpu" matmul="$mode" kind=profile name="$name")" \
        env LSR_MATMUL="$mode" bash -c 'set -e; lsr=$1 dir=$2; shift 2
            (cd "$dir" && "$lsr" bench "$@" --warmup 1 --iterations 1 > warmup.json)
            (cd "$dir/one" && "$lsr" bench "$@" --warmup 1 --iterations 1 > bench.json)
            (cd "$dir/three" && "$lsr" bench "$@" --warmup 1 --iterations 3 > bench.json)
            python3 "'"$repo"'/scripts/gpu/kernel_profile.py" "$dir/three/kernels.log" --minus "$dir/one/kernels.log" --per 2 --bench "$dir/three/bench.json"' \
        _ "$lsr" "$dir" "$@" --device "$gpu" --json
}

# The products' mode whose f32 train step was fastest in this run (the first mode if none ran).
fastest_mode() {
    $python - "$results" "$modes" <<'PY'
import json, sys
best = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    m, res = r["meta"], r.get("result") or {}
    if r["status"] == "ok" and m.get("tool") == "lsr" and m.get("kind") == "train" and m.get("shape") == "recipe" and m.get("precision") == "f32":
        best[m["matmul"]] = res["seconds_per_step"]
print(min(best, key=best.get) if best else sys.argv[2].split()[0])
PY
}

# 1. Correctness first: nothing below means anything if the parity fails.
for mode in $modes; do
    for precision in $precisions; do
        step "lsr-$gpu-$mode-parity-$precision" 120 "$(meta tool=lsr device="$gpu" matmul="$mode" precision="$precision" kind=parity)" \
            env LSR_MATMUL="$mode" "$lsr" check --device "$gpu" --precision "$precision" --json
    done
done
step "torch-parity" 60 "$(meta tool=torch device="$torch_device" kind=parity)" \
    $python scripts/gpu/torch_parity.py --device "$torch_device"

# 2. The matrix product alone, at the head's and the FFN's shapes, each mode, then PyTorch.
for mode in $modes; do
    for precision in $precisions; do
        lsr_matmul "$mode" head "$precision" "${head[@]}"
        lsr_matmul "$mode" ffn "$precision" "${ffn[@]}"
    done
done
torch_matmul head f32 on "${head[@]}"
torch_matmul head bf16 off "${head[@]}"
torch_matmul ffn f32 on "${ffn[@]}"
torch_matmul ffn bf16 off "${ffn[@]}"

# 3. The train step at the recipe's shape, each mode, then PyTorch (lsr's f32 runs in TF32 where
# cubecl picks tensor cores and in cuBLASLt, so PyTorch's f32 is measured with TF32 on).
for mode in $modes; do
    for precision in $precisions; do
        lsr_train "$gpu" "$mode" "$precision" recipe "${recipe[@]}"
    done
done
torch_train f32 on recipe "${recipe[@]}"
torch_train bf16 off recipe "${recipe[@]}"

# 4. Where the device time goes, in the faster mode.
best=$(fastest_mode)
for precision in $precisions; do
    profile "train-$precision" "$best" train-step --precision "$precision" "${recipe[@]}"
done

# 5. Corpus encoding, each mode, then PyTorch; the reductions over tokens alone.
for mode in $modes; do
    for precision in $precisions; do
        lsr_encode "$gpu" "$mode" "$precision"
    done
done
torch_encode f32 on
torch_encode bf16 off
step "lsr-$gpu-reduce" 60 "$(meta tool=lsr device="$gpu" kind=reduce)" \
    "$lsr" bench reduce --device "$gpu" "${reduce_shape[@]}" --warmup "$warmup" --iterations "$iterations" --json
profile encode-f32 "$best" encode --precision f32 "${encode_shape[@]}"

# 6. WGPU on the same GPU.
if (( ! dry )); then
    step "lsr-wgpu-parity-f32" 90 "$(meta tool=lsr device=wgpu matmul=cube precision=f32 kind=parity)" "$lsr" check --device wgpu --json
    lsr_encode wgpu cube f32
fi

# 7. A cell of the miniature matrix end to end (train, evaluate) in each precision.
step "mini-data" 60 '{"kind":"setup"}' bash -c "'$lsr' data mini-task --out data/synth >/dev/null && \
    '$lsr' data mini-models --spec experiments/mini-models.toml --vocab data/synth/vocab.txt --out data/synth/models >/dev/null && echo '{}'"
for precision in $precisions; do
    mini=$work/mini-$precision
    variant="--results '$mini' --set device=$gpu --set recipe.precision=$precision --set eval.precision=$precision"
    step "mini-modernbert-k16-$precision" 90 "$(meta tool=lsr device="$gpu" precision="$precision" kind=mini cell=modernbert-k16)" \
        bash -c "'$lsr' matrix run experiments/mini.toml $variant --cell modernbert-k16 >&2; s=\$?; tr -d '\n' < '$mini/modernbert-k16/metrics.json' 2>/dev/null; echo; exit \$s"
done

# 8. PyTorch without TF32, and the small training shape, if time is left.
torch_train f32 off recipe "${recipe[@]}"
torch_encode f32 off
lsr_train "$gpu" "$best" f32 small "${small[@]}"
torch_train f32 on small "${small[@]}"

echo "== summary"
$python scripts/gpu/summarize.py "$results" --out "$out" --elapsed "$(( $(date +%s) - started ))"
