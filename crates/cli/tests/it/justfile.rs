//! The justfile's recipes: every release build goes through `scripts/build-lsr.sh`, which
//! never drops a backend the binary there has, and each recipe's comment is the one line
//! `just --list` shows.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repository() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The justfile and every shell script: none builds the release `lsr` but build-lsr.sh.
#[test]
fn every_release_build_goes_through_build_lsr() {
    let mut files = vec![repository().join("justfile")];
    let mut dirs = vec![repository().join("scripts")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "sh") {
                files.push(path);
            }
        }
    }
    for file in files {
        if file.ends_with("scripts/build-lsr.sh") {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        for (number, line) in text.lines().enumerate() {
            assert!(
                !(line.contains("cargo build") && line.contains("--release")),
                "{}:{}: `{line}` builds the release lsr without scripts/build-lsr.sh",
                file.display(),
                number + 1
            );
        }
    }
}

/// build-lsr.sh, with a stand-in `cargo` recording its arguments, in a copy of the layout it
/// expects: the features asked for, joined with those the binary there was built with.
#[test]
fn build_lsr_keeps_the_backends_of_the_binary_there() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::create_dir_all(root.join("scripts/cuda")).unwrap();
    std::fs::create_dir_all(root.join("target/release")).unwrap();
    std::fs::create_dir_all(root.join("bin")).unwrap();
    std::fs::copy(
        repository().join("scripts/build-lsr.sh"),
        root.join("scripts/build-lsr.sh"),
    )
    .unwrap();
    let stand_in = |path: &Path, body: &str| {
        std::fs::write(path, format!("#!/bin/sh\n{body}\n")).unwrap();
        let status = Command::new("chmod").arg("+x").arg(path).status().unwrap();
        assert!(status.success());
    };
    stand_in(
        &root.join("bin/cargo"),
        r#"echo "$*" >> "$(dirname "$0")/../cargo.args""#,
    );
    stand_in(
        &root.join("scripts/cuda/llvm-bundle.sh"),
        "touch llvm-bundle.ran",
    );
    let build = |features: &[&str]| {
        let path = format!(
            "{}:{}",
            root.join("bin").display(),
            std::env::var("PATH").unwrap()
        );
        let out = Command::new("bash")
            .arg(root.join("scripts/build-lsr.sh"))
            .args(features)
            .env("PATH", path)
            .env_remove("CARGO_TARGET_DIR")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let args = std::fs::read_to_string(root.join("cargo.args")).unwrap();
        std::fs::remove_file(root.join("cargo.args")).unwrap();
        args.trim().to_string()
    };
    assert_eq!(build(&[]), "build --release -p lsr-cli");
    assert_eq!(
        build(&["wgpu"]),
        "build --release -p lsr-cli --features wgpu"
    );
    assert!(!root.join("llvm-bundle.ran").exists());
    // A CPU build there: lsr's own words for the backends name no backend crate.
    let lsr = root.join("target/release/lsr");
    std::fs::write(&lsr, "\x7fELF expected flex, wgpu[:N] or cuda[:N]\0").unwrap();
    assert_eq!(build(&[]), "build --release -p lsr-cli");
    // A CUDA build there: its panic locations name cubecl-cuda's sources.
    let location = "/home/u/.cargo/registry/src/index.crates.io-0/cubecl-cuda-0.11.3/src/lib.rs";
    std::fs::write(&lsr, format!("\x7fELF\0{location}\0")).unwrap();
    assert_eq!(build(&[]), "build --release -p lsr-cli --features cuda");
    assert_eq!(
        build(&["wgpu"]),
        "build --release -p lsr-cli --features cuda,wgpu"
    );
    assert_eq!(
        build(&["cuda,wgpu"]),
        "build --release -p lsr-cli --features cuda,wgpu"
    );
    assert!(
        root.join("llvm-bundle.ran").exists(),
        "CUDA needs its LLVM first"
    );
}

/// `just --list` shows only the comment line right above a recipe: each is one line.
#[test]
fn every_recipe_is_documented_in_one_line() {
    let text = std::fs::read_to_string(repository().join("justfile")).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let recipe = |line: &str| {
        let name = line.split([' ', ':']).next().unwrap_or("");
        !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c == '-' || c.is_ascii_digit())
            && line.contains(':')
            && !line.contains(":=")
    };
    let mut recipes = 0;
    for (i, line) in lines.iter().enumerate().filter(|(_, l)| recipe(l)) {
        recipes += 1;
        let above = |n: usize| i >= n && lines[i - n].starts_with('#');
        assert!(above(1), "justfile:{}: `{line}` has no comment", i + 1);
        assert!(
            !above(2),
            "justfile:{}: `{line}`: `just --list` shows only the last of its comment lines",
            i + 1
        );
    }
    assert!(recipes >= 15, "{recipes} recipes found");
}
