#!/usr/bin/env bash
# Installs oneMKL's BLAS for lsr's CPU products (`LSR_MATMUL=blas|auto`, crates/compute's
# `matmul/blas.rs`), from Intel's pinned, hashed PyPI wheel, and prints the file to give lsr as
# `LSR_BLAS` (`just test` does; so can a user: `export LSR_BLAS=$(scripts/cpu/blas.sh)`).
#
# Only what lsr's products load is kept (about 520 MB of the wheel's 720 MB unpacked): the
# single dynamic library `libmkl_rt`, its core, sequential and LP64 layers, and the per-CPU
# kernels it chooses from at run time. Nothing is linked: lsr opens the library when a product
# first needs it. Idempotent: an installed directory carries a sentinel written after an atomic
# rename.
# Usage: scripts/cpu/blas.sh
set -euo pipefail

version=2026.2.1
tool=blas
source "$(dirname "$0")/../lib/pinned-wheels.sh"
blas=$data_dir/lsr/mkl-$version
sentinel=$blas/.lsr-installed

if [[ -e $sentinel ]]; then
    echo "$blas/libmkl_rt.so.3"
    exit 0
fi
start_install
echo "blas: fetching oneMKL $version from PyPI" >&2
download_wheels manylinux_2_28_x86_64 <<REQ
mkl==$version --hash=sha256:76322a3abf512594ab7b4e82cb72df91e4e5d195498769aa8b292373c1ddd6d1
REQ
mkdir -p "$work/lib"
python3 - "$work" <<'PY' || fail "the wheel does not hold libmkl_rt.so.3 and the layers it loads"
import glob, os, re, shutil, sys, zipfile
work = sys.argv[1]
# The dispatcher, its layers, and the kernels per instruction set (def, mc3, avx2, avx512, avx10).
keep = re.compile(r"libmkl_(rt|core|sequential|intel_lp64|def|mc3|avx2|avx512|avx10|vml_[a-z0-9_]+)\.so\.3$")
found = set()
for wheel in glob.glob(f"{work}/wheels/*.whl"):
    with zipfile.ZipFile(wheel) as archive:
        for name in archive.namelist():
            base = os.path.basename(name)
            if keep.match(base):
                with archive.open(name) as src, open(f"{work}/lib/{base}", "wb") as dst:
                    shutil.copyfileobj(src, dst)
                found.add(base)
needed = {f"libmkl_{n}.so.3" for n in ("rt", "core", "sequential", "intel_lp64", "avx2", "avx512")}
sys.exit(0 if needed <= found else 1)
PY
rm -rf "$blas"
mv "$work/lib" "$blas"
touch "$sentinel"
echo "blas: installed oneMKL $version in $blas" >&2
echo "$blas/libmkl_rt.so.3"
