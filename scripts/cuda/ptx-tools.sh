#!/usr/bin/env bash
# Installs what turning lsr's kernels into sm_90 machine code needs without a GPU or a CUDA
# toolkit: `ptxas` and `libdevice.10.bc` (the math library cubecl's NVPTX path links `exp` and
# `ln` from), from NVIDIA's pinned, hashed PyPI wheels of CUDA 13.0 (the version cudarc is pinned
# to, `.cargo/config.toml`), and prints the directory that holds them as a CUDA toolkit lays
# them out (`bin/ptxas`, `nvvm/libdevice/libdevice.10.bc`): give it to the tests as
# `LSR_CUDA_TOOLS` (`just test`, `just ptx`).
#
# Only those two files are kept (about 50 MB of the wheels' 100). Idempotent: an installed
# directory carries a sentinel written after an atomic rename.
# Usage: scripts/cuda/ptx-tools.sh
set -euo pipefail

version=13.0.88
tool=ptx-tools
source "$(dirname "$0")/../lib/pinned-wheels.sh"
tools=$data_dir/lsr/cuda-tools-$version
sentinel=$tools/.lsr-installed

if [[ -e $sentinel ]]; then
    echo "$tools"
    exit 0
fi
start_install
echo "ptx-tools: fetching ptxas and libdevice of CUDA $version from PyPI" >&2
download_wheels manylinux_2_17_x86_64 manylinux_2_12_x86_64 <<REQ
nvidia-cuda-nvcc==$version --hash=sha256:56fe502eb77625a12f25172caa3cdddb4e4c8ba2c8c17dba44b164761b380f03
nvidia-nvvm==$version --hash=sha256:c5f41ffeb6466944a026dfa5317d7d85355c119bbec279205d22f1869d1054e0
REQ
mkdir -p "$work/tools/bin" "$work/tools/nvvm/libdevice"
python3 - "$work" <<'PY' || fail "the wheels do not hold bin/ptxas and nvvm/libdevice/libdevice.10.bc"
import glob, shutil, sys, zipfile
work = sys.argv[1]
wanted = {"bin/ptxas": "bin/ptxas", "nvvm/libdevice/libdevice.10.bc": "nvvm/libdevice/libdevice.10.bc"}
found = set()
for wheel in glob.glob(f"{work}/wheels/*.whl"):
    with zipfile.ZipFile(wheel) as archive:
        for name in archive.namelist():
            for suffix, target in wanted.items():
                if name.endswith("/" + suffix):
                    with archive.open(name) as src, open(f"{work}/tools/{target}", "wb") as dst:
                        shutil.copyfileobj(src, dst)
                    found.add(suffix)
sys.exit(0 if found == set(wanted) else 1)
PY
chmod +x "$work/tools/bin/ptxas"
"$work/tools/bin/ptxas" --version | grep -q "V${version%.*}" || fail "the unpacked ptxas is not CUDA ${version%.*}"
rm -rf "$tools"
mv "$work/tools" "$tools"
touch "$sentinel"
echo "ptx-tools: installed ptxas and libdevice in $tools" >&2
echo "$tools"
