//! The commit `lsr` is built from, recorded with every result (`cell.json`, the model card):
//! `LSR_BUILD_COMMIT` (empty when built outside lsr's git checkout, e.g. from a source archive)
//! and `LSR_BUILD_DIRTY` (`true` when the sources it is built from, `crates/`, `Cargo.toml` and
//! `Cargo.lock`, differ from that commit). Rerun when the commit or those sources change.

mod git;

use std::path::{Path, PathBuf};

use git::git;

/// The sources of the build, relative to the workspace root.
const SOURCES: [&str; 3] = ["crates", "Cargo.toml", "Cargo.lock"];

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let root = manifest.join("../..");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=git.rs");
    // The repository must be lsr's own: an archive unpacked inside another repository was not
    // built from that repository's commits.
    let commit = git(
        &root,
        &["ls-files", "--error-unmatch", "crates/cli/build.rs"],
    )
    .and_then(|_| git(&root, &["rev-parse", "HEAD"]));
    let dirty = commit.as_ref().and_then(|_| {
        let status = [&["status", "--porcelain", "--"][..], &SOURCES];
        git(&root, &status.concat()).map(|changes| !changes.is_empty())
    });
    println!(
        "cargo:rustc-env=LSR_BUILD_COMMIT={}",
        commit.as_deref().unwrap_or("")
    );
    println!("cargo:rustc-env=LSR_BUILD_DIRTY={}", dirty.unwrap_or(false));
    // Also when no commit was found: a first commit, or `git add` of this file, changes that.
    for path in watched(&root) {
        println!("cargo:rerun-if-changed={}", path.display());
    }
}

/// What a new commit, a checkout, staging or an edit of the sources changes.
fn watched(root: &Path) -> Vec<PathBuf> {
    let git_path = |name: &str| git(root, &["rev-parse", "--git-path", name]).map(|p| root.join(p));
    let mut paths: Vec<PathBuf> = ["HEAD", "index", "packed-refs"]
        .iter()
        .filter_map(|name| git_path(name))
        .collect();
    if let Some(branch) = git(root, &["symbolic-ref", "-q", "HEAD"]) {
        paths.extend(git_path(&branch));
    }
    paths.extend(SOURCES.iter().map(|source| root.join(source)));
    // A path that does not exist would make cargo rerun this script on every build.
    paths.retain(|path| path.exists());
    paths
}
