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

/// The device `LSR_TEST_DEVICE` names, for a test that needs `what` (a second device, a GPU);
/// unset, [`cannot_set_up`] says so and this is `None`.
pub fn test_device(what: &str) -> Option<String> {
    match std::env::var("LSR_TEST_DEVICE") {
        Ok(spec) => Some(spec),
        Err(_) => {
            cannot_set_up(&format!("{what}: LSR_TEST_DEVICE is not set"));
            None
        }
    }
}

/// [`test_device`] for a test of WGPU alone: `None` too where it names another device.
pub fn wgpu_test_device() -> Option<String> {
    test_device("a WGPU device").filter(|spec| spec.starts_with("wgpu"))
}
