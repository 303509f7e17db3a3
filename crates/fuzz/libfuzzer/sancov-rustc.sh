#!/bin/sh
# rustc wrapper of the fuzz build: instruments for libFuzzer (the flags cargo-fuzz uses, which
# stable rustc accepts) only the crates that read input, lsr's and the parsers under them, so
# that burn and polars compile as usual and the coverage libFuzzer reports is the readers'.
rustc="$1"
shift
crate=""
previous=""
for argument in "$@"; do
    [ "$previous" = "--crate-name" ] && crate="$argument"
    previous="$argument"
done
case "$crate" in
    lsr_* | safetensors | pytorch_reader | tokenizers | serde_json | serde_path_to_error | \
    toml | toml_parser | toml_datetime | serde_spanned | flate2 | miniz_oxide | zip)
        exec "$rustc" "$@" \
            -Cpasses=sancov-module \
            -Cllvm-args=-sanitizer-coverage-level=4 \
            -Cllvm-args=-sanitizer-coverage-inline-8bit-counters \
            -Cllvm-args=-sanitizer-coverage-pc-table \
            -Cllvm-args=-sanitizer-coverage-trace-compares
        ;;
esac
exec "$rustc" "$@"
