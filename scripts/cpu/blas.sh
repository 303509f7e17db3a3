#!/usr/bin/env bash
# Installs a CPU BLAS for lsr's products (`LSR_MATMUL=blas|auto`, crates/compute's
# `matmul/blas.rs`) from its pinned, hashed PyPI wheel, and prints the file to give lsr as
# `LSR_BLAS` (`just test` does; so can a user: `export LSR_BLAS=$(scripts/cpu/blas.sh onednn)`).
#
#   onemkl (the default): oneMKL 2026.2.1, the fastest f32 and bf16 products on Intel's CPUs
#     (AMX); only what lsr loads is kept (about 520 MB of the wheel's 720 MB unpacked): the single
#     dynamic library `libmkl_rt`, its core, sequential and LP64 layers, and its per-CPU kernels.
#   onednn: oneDNN 3.2 (`onednn-cpu-gomp` 2023.2.0, its newest CPU-only build on PyPI, threaded by
#     GNU OpenMP, which lsr holds to one thread per task), whose bf16 products use AVX512_BF16 on
#     any CPU that has it, AMD's Zen 4 included, where oneMKL's do not; 55 MB, and the system's
#     libgomp.
#
# Nothing is linked: lsr opens the library when a product first needs it. Idempotent: an
# installed directory carries a sentinel written after an atomic rename.
# Usage: scripts/cpu/blas.sh [onemkl|onednn]
set -euo pipefail

tool=blas
source "$(dirname "$0")/../lib/pinned-wheels.sh"

case ${1:-onemkl} in
onemkl)
    version=2026.2.1
    requirement="mkl==$version --hash=sha256:76322a3abf512594ab7b4e82cb72df91e4e5d195498769aa8b292373c1ddd6d1"
    platform=manylinux_2_28_x86_64
    blas=$data_dir/lsr/mkl-$version
    file=libmkl_rt.so.3
    # The dispatcher, its layers, and the kernels per instruction set (def, mc3, avx2, avx512,
    # avx10); the ones required must be there.
    keep='libmkl_(rt|core|sequential|intel_lp64|def|mc3|avx2|avx512|avx10|vml_[a-z0-9_]+)\.so\.3$'
    needed='rt core sequential intel_lp64 avx2 avx512'
    needed=$(for n in $needed; do printf 'libmkl_%s.so.3 ' "$n"; done)
    ;;
onednn)
    version=2023.2.0
    requirement="onednn-cpu-gomp==$version --hash=sha256:2f22a54d6a890ed14bfa185d42a4be65d8b5b1df85dc1f0f3a9abe31620416fb"
    platform=manylinux1_x86_64
    blas=$data_dir/lsr/onednn-$version
    file=libdnnl.so.3
    keep='libdnnl\.so\.3$'
    needed=libdnnl.so.3
    ;;
*) fail "unknown library \`$1\`; expected onemkl or onednn" ;;
esac
sentinel=$blas/.lsr-installed

if [[ -e $sentinel ]]; then
    echo "$blas/$file"
    exit 0
fi
start_install
echo "blas: fetching $requirement from PyPI" >&2
download_wheels "$platform" <<<"$requirement"
mkdir -p "$work/lib"
python3 - "$work" "$keep" $needed <<'PY' || fail "the wheel does not hold $needed"
import glob, os, re, shutil, sys, zipfile
work, keep, needed = sys.argv[1], re.compile(sys.argv[2]), set(sys.argv[3:])
found = set()
for wheel in glob.glob(f"{work}/wheels/*.whl"):
    with zipfile.ZipFile(wheel) as archive:
        for name in archive.namelist():
            base = os.path.basename(name)
            if keep.match(base):
                with archive.open(name) as src, open(f"{work}/lib/{base}", "wb") as dst:
                    shutil.copyfileobj(src, dst)
                found.add(base)
sys.exit(0 if needed <= found else 1)
PY
rm -rf "$blas"
mv "$work/lib" "$blas"
touch "$sentinel"
echo "blas: installed $blas" >&2
echo "$blas/$file"
