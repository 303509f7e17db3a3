#!/usr/bin/env bash
# The GPU check: everything lsr needs to show on a GPU machine, in one run, by priority:
# parity with transformers/PyTorch on CUDA, the train step and corpus encoding against PyTorch
# on the same GPU (f32 with TF32 off and on, bf16 autocast) with peak GPU memory, the other
# CUDA compiler path and WGPU, and a few cells of the miniature matrix end to end.
#
# On the GPU machine (CUDA driver, PyTorch, transformers; no Rust, no network), from the
# repository root, with the prebuilt binaries in target/gpu/lsr.tar.xz (`scripts/gpu/pack.sh`):
#     OUT=<dir> scripts/gpu/check.sh [--budget SECONDS] [--precisions "f32 bf16-mixed"]
# Dry run on a CPU (flex, tiny shapes, PyTorch on CPU from .venv), which is how it is tested:
#     scripts/gpu/check.sh --dry-run
# Writes results.jsonl (one line per measurement), summary.json, summary.md and log.txt to
# $OUT (default ./gpu-check). Steps that would start after the budget are recorded as skipped.
set -uo pipefail
cd "$(dirname "$0")/../.."

dry=0
budget=420
precisions="f32"
while [[ $# -gt 0 ]]; do
    case $1 in
        --dry-run) dry=1 ;;
        --budget) budget=$2; shift ;;
        --precisions) precisions=$2; shift ;;
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
    binaries=(flex="${LSR:-target/release/lsr}")
    small=(--queries 2 --query-len 8 --document-len 16) recipe=(--queries 2 --query-len 16 --document-len 32)
    encode_shape=(--batch 4 --seq-len 32) iterations=1 warmup=1
else
    gpu=cuda torch_device=cuda python=python3
    mkdir -p "$work/bin"
    python3 -c 'import lzma, sys, tarfile; tarfile.open(fileobj=lzma.open(sys.argv[1])).extractall(sys.argv[2])' \
        target/gpu/lsr.tar.xz "$work/bin" || { echo "no binaries: run scripts/gpu/pack.sh on the build machine"; exit 1; }
    # Each compiler path's binary, `lsr-<path>`; the first is measured most.
    binaries=()
    for label in $(cat "$work/bin/order"); do binaries+=("$label=$work/bin/lsr-$label"); done
    small=(--queries 8 --query-len 32 --document-len 128) recipe=(--queries 32 --query-len 32 --document-len 256)
    encode_shape=(--batch 128 --seq-len 256) iterations=10 warmup=2
    # WGPU needs the Vulkan loader, carried as Debian packages in .gl (see the README).
    if [[ -d .gl ]]; then
        for f in .gl/*.deb; do dpkg -x "$f" /; done
        ldconfig
        export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
        export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
    fi
fi
first_binary=${binaries[0]#*=}

echo "== machine ($(date -u +%FT%TZ))"
{
    nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader 2>/dev/null || echo "no nvidia-smi"
    $python -c 'import torch, transformers; print("torch", torch.__version__, "cuda", torch.version.cuda, "transformers", transformers.__version__)'
    command -v nvcc >/dev/null && nvcc --version | tail -1
    ls -d /usr/local/cuda* 2>/dev/null
    ldconfig -p | grep -E 'libnvrtc|libcuda\.so|libvulkan' | head -5
    nproc
    for b in "${binaries[@]}"; do echo "${b%%=*}: $("${b#*=}" --version)"; done
} | tee "$out/machine.txt"

# Peak device memory of the process a step runs (MiB above what was in use before it).
sampler=
start_sampler() {
    [[ $gpu == cuda ]] || return 0
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
    local now; now=$(date +%s)
    local left=$((deadline - now))
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
    local result; result=$(tail -n 1 "$work/stdout")
    $python -c 'import json, sys
try:
    r = json.loads(sys.argv[1])
except ValueError:
    r = None
print(json.dumps({"step": sys.argv[2], "status": sys.argv[3], "wall_s": int(sys.argv[4]) / 1000,
    "gpu_peak_mib": None if sys.argv[5] == "null" else float(sys.argv[5]),
    "meta": json.loads(sys.argv[6]), "result": r}))' "$result" "$name" "$status" "$wall_ms" "$mem" "$meta" >> "$results"
}

# lsr's flag for a precision other than its default f32.
precision_flag() { [[ $1 == f32 ]] || echo "--precision $1"; }
lsr_train() { # binary label precision shape-name shape...
    local bin=$1 label=$2 precision=$3 shape=$4; shift 4
    # shellcheck disable=SC2046
    step "lsr-$label-train-$shape-$precision" 150 \
        "{\"tool\":\"lsr\",\"binary\":\"$label\",\"device\":\"$gpu\",\"precision\":\"$precision\",\"shape\":\"$shape\",\"kind\":\"train\"}" \
        "$bin" bench train-step --device "$gpu" $(precision_flag "$precision") "$@" --warmup "$warmup" --iterations "$iterations" --json
}
lsr_encode() { # binary label precision
    # shellcheck disable=SC2046
    step "lsr-$2-encode-$3" 120 \
        "{\"tool\":\"lsr\",\"binary\":\"$2\",\"device\":\"$gpu\",\"precision\":\"$3\",\"shape\":\"encode\",\"kind\":\"encode\"}" \
        "$1" bench encode --device "$gpu" $(precision_flag "$3") "${encode_shape[@]}" --warmup "$warmup" --iterations "$iterations" --json
}
torch_train() { # precision tf32 shape-name shape...
    local precision=$1 tf32=$2 shape=$3; shift 3
    step "torch-train-$shape-$precision-tf32$tf32" 90 \
        "{\"tool\":\"torch\",\"device\":\"$torch_device\",\"precision\":\"$precision\",\"tf32\":\"$tf32\",\"shape\":\"$shape\",\"kind\":\"train\"}" \
        $python scripts/bench/train_step.py --device "$torch_device" --precision "$precision" --tf32 "$tf32" "$@" --warmup "$warmup" --iterations "$iterations"
}
torch_encode() { # precision tf32
    step "torch-encode-$1-tf32$2" 90 \
        "{\"tool\":\"torch\",\"device\":\"$torch_device\",\"precision\":\"$1\",\"tf32\":\"$2\",\"shape\":\"encode\",\"kind\":\"encode\"}" \
        $python scripts/bench/encode.py --device "$torch_device" --precision "$1" --tf32 "$2" "${encode_shape[@]}" --warmup "$warmup" --iterations "$iterations"
}

# 1. Correctness first: nothing below means anything if the parity fails.
label=${binaries[0]%%=*}
for precision in $precisions; do
    # shellcheck disable=SC2046
    step "lsr-$label-parity-$precision" 150 \
        "{\"tool\":\"lsr\",\"binary\":\"$label\",\"device\":\"$gpu\",\"precision\":\"$precision\",\"kind\":\"parity\"}" \
        "$first_binary" check --device "$gpu" $(precision_flag "$precision") --json
done

# 2. Speed at the recipe's shape, lsr then PyTorch, then corpus encoding.
for precision in $precisions; do
    lsr_train "$first_binary" "$label" "$precision" recipe "${recipe[@]}"
done
torch_train f32 off recipe "${recipe[@]}"
torch_train f32 on recipe "${recipe[@]}"
torch_train bf16 off recipe "${recipe[@]}"
for precision in $precisions; do
    lsr_encode "$first_binary" "$label" "$precision"
done
torch_encode f32 off
torch_encode f32 on
torch_encode bf16 off

# 3. The other compiler path, then WGPU on the same GPU.
for b in "${binaries[@]:1}"; do
    other=${b%%=*} bin=${b#*=}
    step "lsr-$other-parity" 120 "{\"tool\":\"lsr\",\"binary\":\"$other\",\"device\":\"$gpu\",\"kind\":\"parity\"}" "$bin" check --device "$gpu" --json
    lsr_train "$bin" "$other" f32 recipe "${recipe[@]}"
    lsr_encode "$bin" "$other" f32
done
if (( ! dry )); then
    gpu=wgpu
    step "lsr-wgpu-parity" 90 "{\"tool\":\"lsr\",\"binary\":\"$label\",\"device\":\"wgpu\",\"kind\":\"parity\"}" "$first_binary" check --device wgpu --json
    lsr_train "$first_binary" "$label" f32 recipe "${recipe[@]}"
    lsr_encode "$first_binary" "$label" f32
    gpu=cuda
fi

# 4. A few cells of the miniature matrix, end to end on the device.
mini=$work/mini
sed -e "s|^device = .*|device = \"$gpu\"|" -e "s|results/mini|$mini|g" experiments/mini.toml > "$work/mini.toml"
step "mini-data" 120 '{"kind":"setup"}' bash -c "'$first_binary' data synth --out data/synth >/dev/null && \
    '$first_binary' data miniatures --spec experiments/mini-models.toml --vocab data/synth/vocab.txt --out data/synth/models >/dev/null && echo '{}'"
for cell in modernbert-k1 modernbert-k16 bert-k1; do
    step "mini-$cell" 150 "{\"tool\":\"lsr\",\"device\":\"$gpu\",\"kind\":\"mini\",\"cell\":\"$cell\"}" \
        bash -c "'$first_binary' matrix run '$work/mini.toml' --cell $cell >&2; s=\$?; tr -d '\n' < '$mini/$cell/metrics.json' 2>/dev/null; echo; exit \$s"
done
step "mini-report" 60 '{"kind":"mini-report"}' bash -c "'$first_binary' report '$mini' >&2 && echo '{}'"
[[ -f $mini/report/table1.md ]] && cp "$mini/report/table1.md" "$out/mini-table.md"

# 5. PyTorch's own TF32 deviation on the fixtures, and the small training shape.
step "torch-parity" 60 "{\"tool\":\"torch\",\"device\":\"$torch_device\",\"kind\":\"parity\"}" \
    $python scripts/gpu/torch_parity.py --device "$torch_device"
lsr_train "$first_binary" "$label" f32 small "${small[@]}"
torch_train f32 off small "${small[@]}"
torch_train f32 on small "${small[@]}"
torch_train bf16 off small "${small[@]}"

echo "== summary"
$python scripts/gpu/summarize.py "$results" --out "$out" --elapsed "$(( $(date +%s) - started ))"
