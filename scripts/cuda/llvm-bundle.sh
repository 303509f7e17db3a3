#!/usr/bin/env bash
# Installs the LLVM 23 that burn's CUDA backend links (cubecl-llvm, via tracel-llvm-bundler)
# from PyPI instead of GitHub, so that `--features cuda` builds where GitHub is unreachable.
#
# tracel-llvm-bundler's build script skips its download when its bundle directory holds the
# sentinel `.tracel-llvm-installed`; this script fills that directory from two pinned, hashed
# wheels (LLVM's static libraries with llvm-config, and the extra targets that add NVPTX) and
# writes the sentinel last, after an atomic rename, so a half-unpacked bundle never carries it.
# Idempotent; where GitHub's release is reachable it does nothing and the bundler downloads.
# Usage: scripts/cuda/llvm-bundle.sh [--force]   (--force: install from PyPI even if online)
set -euo pipefail

bundle_version=23.1.0-4 # tracel-llvm-bundler's TRACEL_LLVM_FULL_VERSION, as pinned by Cargo.lock
data_dir=${XDG_DATA_HOME:-$HOME/.local/share}
bundle=$data_dir/tracel/tracel-llvm-$bundle_version
sentinel=$bundle/.tracel-llvm-installed
release=https://github.com/tracel-ai/tracel-llvm/releases/download/v$bundle_version/linux-x64.checksums.json

fail() { echo "llvm-bundle: $*" >&2; exit 1; }

if [[ -e $sentinel ]]; then
    echo "llvm-bundle: $bundle is installed"
    exit 0
fi
[[ $(uname -sm) == "Linux x86_64" ]] || fail "only Linux x86_64 has these wheels; this is $(uname -sm)"
locked=$(grep -A1 '^name = "tracel-llvm-bundler"' "$(dirname "$0")/../../Cargo.lock" | sed -n 's/^version = "\(.*\)"/\1/p')
[[ $locked == "$bundle_version" ]] || fail "Cargo.lock pins tracel-llvm-bundler $locked, this script installs $bundle_version: update both together"
if [[ ${1:-} != --force ]] && curl -sfIL --max-time 10 -o /dev/null "$release"; then
    echo "llvm-bundle: GitHub is reachable; the build downloads LLVM itself"
    exit 0
fi
command -v python3 >/dev/null || fail "python3 (with pip) is needed to fetch the wheels"
for lib in z zstd; do
    ld -l$lib -o /dev/null --unresolved-symbols=ignore-all 2>/dev/null ||
        fail "lib$lib for static linking is missing (Debian: apt-get install zlib1g-dev libzstd-dev)"
done

work=$(mktemp -d "$data_dir/tracel/.llvm-bundle.XXXXXX" 2>/dev/null || { mkdir -p "$data_dir/tracel" && mktemp -d "$data_dir/tracel/.llvm-bundle.XXXXXX"; })
trap 'rm -rf "$work"' EXIT
cat > "$work/requirements.txt" <<REQ
mlc-llvm-static==23.1.1.post0 --hash=sha256:dcfec888abfaa418be77d41af585805f31463584cf9c90582992c00f392c1ac5
mlc-llvm-static-extra-targets==23.1.1.post0 --hash=sha256:c36e834d9a4e9cf9759f27fece65711ece7a2fc2b5a96dbb15d66f5e9e787929
REQ
echo "llvm-bundle: fetching LLVM 23.1.1 (static, with NVPTX) from PyPI"
python3 -m pip download --quiet --no-deps --require-hashes --only-binary=:all: \
    --platform manylinux_2_28_x86_64 --python-version 3.11 -d "$work/wheels" -r "$work/requirements.txt" ||
    fail "pip could not fetch the pinned wheels (or their sha256 did not match)"
for wheel in "$work"/wheels/*.whl; do
    python3 -m zipfile -e "$wheel" "$work/unpacked" || fail "could not unpack $wheel"
done
prefix=$work/unpacked/mlc_llvm_static/static
chmod +x "$prefix"/bin/*
"$prefix/bin/llvm-config" --version | grep -q '^23\.' || fail "the unpacked llvm-config is not LLVM 23"
"$prefix/bin/llvm-config" --link-static --libs nvptx >/dev/null || fail "the unpacked LLVM lacks the NVPTX target"

rm -rf "$bundle"
mv "$prefix" "$bundle"
touch "$sentinel"
echo "llvm-bundle: installed LLVM $("$bundle/bin/llvm-config" --version) in $bundle"
