//! `git` in a directory: the build script reads the commit lsr is built from with it, and the
//! tests that check what a run recorded read the same way.

use std::path::Path;
use std::process::Command;

/// The trimmed output of `git args` in `dir`, if git is there and succeeds.
pub fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let output = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .ok()?;
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).trim().to_string())
}
