# Sourced by the scripts that install files from pinned, hashed PyPI wheels (scripts/cuda/
# ptx-tools.sh, scripts/cpu/blas.sh), after they set `tool` (their name in messages): where
# installs go, the checks before fetching, a work directory beside the installs (so that the
# final rename is atomic), and the download itself.

data_dir=${XDG_DATA_HOME:-$HOME/.local/share}

fail() { echo "$tool: $*" >&2; exit 1; }

# Checks what fetching needs and makes $work, removed when the script exits.
start_install() {
    [[ $(uname -sm) == "Linux x86_64" ]] || fail "only Linux x86_64 has these wheels; this is $(uname -sm)"
    command -v python3 >/dev/null || fail "python3 (with pip) is needed to fetch the wheels"
    mkdir -p "$data_dir/lsr"
    work=$(mktemp -d "$data_dir/lsr/.$tool.XXXXXX")
    trap 'rm -rf "$work"' EXIT
}

# Downloads the requirements read from stdin (each pinned with its sha256) into $work/wheels,
# as built for the platform tags given.
download_wheels() {
    cat > "$work/requirements.txt"
    local platforms=() platform
    for platform in "$@"; do platforms+=(--platform "$platform"); done
    python3 -m pip download --quiet --no-deps --require-hashes --only-binary=:all: \
        "${platforms[@]}" --python-version 3.11 -d "$work/wheels" -r "$work/requirements.txt" >&2 ||
        fail "pip could not fetch the pinned wheels (or their sha256 did not match)"
}
