//! Tests whose environment cannot be set up (a mount, a device): skipped with their reason on a
//! developer's machine, failed in CI, where a skip would make a green run one that tested nothing.

/// Whether this runs in CI: `CI` set to anything but empty, `0` or `false`, as CI services set
/// it (`.ci/run` sets it too).
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !matches!(v.trim(), "" | "0" | "false"))
}

/// A test cannot set up `what`: it fails in CI; elsewhere it says on stderr why it is skipped,
/// and the caller returns.
pub fn cannot_set_up(what: &str) {
    if in_ci() {
        panic!("cannot set up {what}; CI is set, so this test must run here (unset CI to skip it)");
    }
    eprintln!("skipped: cannot set up {what}");
}
