//! The choice of burn device: the one rule that turns `flex`, `wgpu[:N]` or `cuda[:N]` (or
//! nothing: the best backend that starts on this machine) into a working device, and the
//! devices the tests compare on.

use std::sync::atomic::{AtomicBool, Ordering};

use burn::prelude::Device;

use lsr_files::workers::{Blame, device_did_not_start};

use crate::matmul::{self, MatmulMode, matmul_mode};
use crate::{ComputeError, Result, kernel_cache};

/// Set while a backend is being started: what it logs then is the probe's error text instead.
static PROBING: AtomicBool = AtomicBool::new(false);

/// Whether a backend is being started, for a log filter to silence the backend meanwhile.
pub fn probing() -> bool {
    PROBING.load(Ordering::Relaxed)
}

/// Makes burn's implicit default device the host (`BURN_DEVICE=flex`) unless the user set one.
/// lsr names a device for every tensor it makes, but burn materialises a loaded optimizer
/// record on its default device, which in a build with CUDA is GPU 0: on a machine without a
/// driver `--resume` would panic, and elsewhere the state would land on a GPU the run does not
/// use. On the host it costs one copy, at the next step, to the parameters' device.
///
/// # Safety
/// Sets a process environment variable: call it before any thread starts (first thing in
/// `main`), as `std::env::set_var` requires.
pub unsafe fn pin_implicit_default_to_host() {
    if std::env::var_os("BURN_DEVICE").is_none() {
        // SAFETY: the caller guarantees that no other thread runs yet.
        unsafe { std::env::set_var("BURN_DEVICE", "flex") };
    }
}

/// Why a process's output says its device failed it, if it does: out of memory, a device lost
/// or poisoned (a sticky driver fault), or a device that could not start, as lsr and cubecl word
/// them. A run that failed for reasons of its own (divergence, bad data) matches none.
pub fn device_failure(output: &str) -> Option<&'static str> {
    const SIGNS: [(&str, &str); 7] = [
        ("out of device memory", "out of memory"),
        ("out-of-memory", "out of memory"),
        ("out of memory", "out of memory"),
        (
            "device is poisoned",
            "a driver fault (the device is poisoned)",
        ),
        (
            "device was poisoned",
            "a driver fault (the device is poisoned)",
        ),
        ("device lost", "the device was lost"),
        ("could not start", "the device could not start"),
    ];
    let output = output.to_lowercase();
    SIGNS
        .iter()
        .find(|(sign, _)| output.contains(sign))
        .map(|(_, why)| *why)
}

/// Whom a worker's end blames: its device, where the worker could not start it or its `output`
/// says the device failed it; else the job (done, stopped, or failed for reasons of its own).
pub fn device_blame(status: std::process::ExitStatus, output: &str) -> Blame {
    if status.success() {
        return Blame::Job;
    }
    if device_did_not_start(status) {
        return Blame::Device("the device could not start".into());
    }
    match device_failure(output) {
        Some(why) => Blame::Device(why.to_string()),
        None => Blame::Job,
    }
}

/// Names of the backends compiled into this build, best first.
pub fn compiled_backends() -> Vec<&'static str> {
    let mut names = Vec::new();
    if cfg!(feature = "cuda") {
        names.push("cuda");
    }
    if cfg!(feature = "wgpu") {
        names.push("wgpu");
    }
    names.push("flex");
    names
}

/// Parses `flex`, `wgpu`, `wgpu:N`, `cuda` or `cuda:N` into a burn device that has been seen
/// to start. `None` takes `$LSR_DEVICE` if set, else the best backend compiled in that starts
/// here (CUDA, then WGPU, then the flex CPU backend), so a CUDA build still works on a login
/// node; it says which in the log. An explicit spec that cannot start is an error naming it.
///
/// `LSR_MATMUL` is checked here too, so that a bad value stops a command before its first
/// product; `cublas` on a device that is not CUDA, or `blas` on one that is not flex, is allowed
/// (its products use cube) and logged.
pub fn parse_device(spec: Option<&str>) -> Result<Device> {
    let device = choose(spec)?;
    let route = matmul::products_route(&device).map_err(ComputeError::Setting)?;
    let asked = matmul_mode().map_err(ComputeError::Setting)?;
    if matches!(asked, MatmulMode::Cublas | MatmulMode::Blas) && route != asked {
        let wants = if asked == MatmulMode::Blas {
            "the flex CPU device"
        } else {
            "a CUDA device"
        };
        tracing::warn!(
            "LSR_MATMUL={}: {device:?} is not {wants}; its products use cube",
            asked.name()
        );
    }
    Ok(device)
}

fn choose(spec: Option<&str>) -> Result<Device> {
    let from_env = std::env::var("LSR_DEVICE").ok().filter(|s| !s.is_empty());
    if let Some(spec) = spec.or(from_env.as_deref()) {
        return start(spec);
    }
    let mut refused = Vec::new();
    for name in compiled_backends() {
        match start(name) {
            Ok(device) => {
                let skipped = if refused.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", refused.join("; "))
                };
                tracing::info!("device: {name}{skipped}");
                return Ok(device);
            }
            Err(error) => refused.push(first_sentence(&error.to_string())),
        }
    }
    unreachable!("flex always starts")
}

fn start(spec: &str) -> Result<Device> {
    let (name, index) = match spec.split_once(':') {
        Some((name, index)) => {
            let index = index.parse::<usize>().map_err(|_| ComputeError::Device {
                spec: spec.to_string(),
                message: format!("`{index}` is not a device index"),
            })?;
            (name, Some(index))
        }
        None => (spec, None),
    };
    if name == "flex" || name == "cpu" {
        return Ok(Device::flex());
    }
    // Before a GPU backend reads cubecl's configuration, which it does once per process.
    kernel_cache::configure();
    let (device, missing) = match name {
        "wgpu" => (
            wgpu(index),
            "no Vulkan, Metal or GL adapter with a working driver",
        ),
        "cuda" => (cuda(index.unwrap_or(0)), "no CUDA driver or device"),
        other => {
            return Err(ComputeError::Device {
                spec: spec.to_string(),
                message: format!("unknown backend `{other}`; expected flex, wgpu[:N] or cuda[:N]"),
            });
        }
    };
    let device = device.map_err(|feature| ComputeError::Device {
        spec: spec.to_string(),
        message: format!(
            "this binary was built without the `{feature}` feature (compiled: {}); rebuild with \
             `--features {feature}`",
            compiled_backends().join(", ")
        ),
    })?;
    if name == "cuda" {
        cuda_driver_has(index.unwrap_or(0)).map_err(|why| ComputeError::Device {
            spec: spec.to_string(),
            message: format!("could not start ({missing}): {why}"),
        })?;
    }
    probe(device, spec, missing)
}

/// Whether the CUDA driver loads and has device `index`, asked of the driver directly. burn's
/// CUDA backend panics where there is none, and with fusion it does so while holding a lock
/// that every later backend start takes: after one failed CUDA probe, WGPU could not start in
/// that process either (a CUDA build on a machine with Vulkan and no NVIDIA driver).
fn cuda_driver_has(index: usize) -> std::result::Result<(), String> {
    #[cfg(feature = "cuda")]
    {
        use cudarc::driver::result;
        // The driver library is loaded on first use, and its absence is a panic.
        let count = quietly(|| result::init().and_then(|()| result::device::get_count()))
            .map_err(|panics| panics.first().cloned().unwrap_or_default())?
            .map_err(|error| format!("the CUDA driver refused: {error}"))?;
        match usize::try_from(count) {
            Ok(count) if index < count => Ok(()),
            _ => Err(format!(
                "the CUDA driver has {count} device(s), not device {index}"
            )),
        }
    }
    #[cfg(not(feature = "cuda"))]
    {
        let _ = index;
        Ok(())
    }
}

/// The devices a test comparing two computations of the same thing runs on: flex, and the
/// device `LSR_TEST_DEVICE` names (CI: WGPU on Mesa's software Vulkan).
pub fn test_devices() -> Vec<Device> {
    let mut devices = vec![Device::flex()];
    if let Some(spec) = lsr_files::ci::test_device("a second device") {
        devices.push(parse_device(Some(&spec)).expect("LSR_TEST_DEVICE"));
    }
    devices
}

/// `cuda: <why>` from a refusal, cut before the backend's list of library names.
fn first_sentence(error: &str) -> String {
    let end = [" - ", "; "]
        .iter()
        .filter_map(|cut| error.find(cut))
        .min()
        .unwrap_or(error.len());
    error[..end].to_string()
}

/// `wgpu` alone lets wgpu pick its preferred adapter; `wgpu:N` asks for the N-th discrete GPU.
fn wgpu(index: Option<usize>) -> std::result::Result<Device, &'static str> {
    #[cfg(feature = "wgpu")]
    {
        use burn::tensor::DeviceKind;
        Ok(Device::wgpu(match index {
            Some(index) => DeviceKind::DiscreteGpu(index),
            None => DeviceKind::DefaultDevice,
        }))
    }
    #[cfg(not(feature = "wgpu"))]
    {
        let _ = index;
        Err("wgpu")
    }
}

fn cuda(index: usize) -> std::result::Result<Device, &'static str> {
    #[cfg(feature = "cuda")]
    {
        Ok(Device::cuda(index))
    }
    #[cfg(not(feature = "cuda"))]
    {
        let _ = index;
        Err("cuda")
    }
}

/// Runs a one-element operation on a GPU device. A backend that cannot start (no adapter, no
/// driver) panics, on its own thread or this one, and logs; the panic is caught silently here
/// and its message becomes the error's.
fn probe(device: Device, spec: &str, missing: &str) -> Result<Device> {
    let probe_device = device.clone();
    match quietly(move || burn::prelude::Tensor::<1>::zeros([1], &probe_device).into_data()) {
        Ok(_) => Ok(device),
        Err(panics) => Err(ComputeError::Device {
            spec: spec.to_string(),
            // The first panic is the cause; the ones after it are its echoes on other threads.
            message: format!(
                "could not start ({missing}): {}",
                panics.first().map_or("no message", String::as_str)
            ),
        }),
    }
}

/// Runs `f`, turning a panic in it (or on a thread it waits for) into the panics' messages,
/// printed nowhere.
fn quietly<T>(f: impl FnOnce() -> T + std::panic::UnwindSafe) -> Result<T, Vec<String>> {
    use std::sync::{Arc, Mutex};
    // The hook is process-wide: one probe at a time.
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let _probing = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let messages = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&messages);
    PROBING.store(true, Ordering::Relaxed);
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic without a message".into());
        let first_line = message.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
        seen.lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(first_line.trim().to_string());
    }));
    let result = std::panic::catch_unwind(f);
    std::panic::set_hook(previous);
    PROBING.store(false, Ordering::Relaxed);
    let messages = std::mem::take(&mut *messages.lock().unwrap_or_else(|p| p.into_inner()));
    result.map_err(|_| messages)
}

/// The device rule: an explicit backend that cannot start is one error naming it, and no spec
/// means `$LSR_DEVICE` or else the best backend that starts (never an error: flex always does).
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_device_failure_is_told_from_a_run_that_failed_for_its_own_reasons() {
        let oom = "panicked at burn-cubecl: An out-of-memory error happened during launch";
        assert_eq!(device_failure(oom), Some("out of memory"));
        let start = "error: device `cuda:99`: could not start (no device 99)";
        assert_eq!(device_failure(start), Some("the device could not start"));
        assert_eq!(
            device_failure("error: The device is poisoned: CUDA_ERROR_ILLEGAL_ADDRESS"),
            Some("a driver fault (the device is poisoned)")
        );
        assert_eq!(
            device_failure("error: the loss is NaN at step 12: collapsed"),
            None
        );
        assert_eq!(
            device_failure("error: data/triples.tsv line 3: expected 3 fields"),
            None
        );
    }

    #[test]
    fn no_spec_picks_a_backend_that_starts() {
        let device = parse_device(None).expect("flex at worst");
        burn::prelude::Tensor::<1>::ones([3], &device).into_data();
    }

    #[test]
    fn unknown_backends_and_indices_are_errors_naming_the_spec() {
        for spec in ["tpu", "cuda:x", "wgpu:-1"] {
            let error = parse_device(Some(spec)).unwrap_err().to_string();
            assert!(error.contains(spec), "{spec}: {error}");
        }
    }

    #[test]
    fn a_backend_left_out_of_the_build_says_how_to_build_it() {
        for (name, compiled) in [
            ("cuda", cfg!(feature = "cuda")),
            ("wgpu", cfg!(feature = "wgpu")),
        ] {
            if !compiled {
                let error = parse_device(Some(name)).unwrap_err().to_string();
                assert!(error.contains(&format!("--features {name}")), "{error}");
            }
        }
    }

    /// On a machine without an NVIDIA driver (CI), a CUDA build refuses `cuda` in one line that
    /// says why, and the default falls back to another backend.
    #[cfg(feature = "cuda")]
    #[test]
    fn cuda_without_a_driver_is_a_clear_error_and_not_the_default() {
        if std::path::Path::new("/dev/nvidiactl").exists() {
            return;
        }
        let error = parse_device(Some("cuda")).unwrap_err().to_string();
        assert!(
            error.starts_with("device `cuda`: could not start"),
            "{error}"
        );
        assert!(!error.contains('\n'), "{error}");
        if std::env::var_os("LSR_DEVICE").is_none() {
            let picked = format!("{:?}", parse_device(None).unwrap());
            assert!(!picked.contains("Cuda"), "{picked}");
        }
    }

    /// A refused CUDA start leaves the other GPU backend startable in the same process: `lsr`
    /// tries CUDA first, and with burn's fusion a CUDA start that panics poisons a lock every later
    /// start takes. Run where `LSR_TEST_DEVICE` names a working WGPU device (CI: lavapipe).
    #[cfg(all(feature = "cuda", feature = "wgpu"))]
    #[test]
    fn a_refused_cuda_start_leaves_wgpu_startable() {
        let Some(spec) = lsr_files::ci::wgpu_test_device() else {
            return;
        };
        if std::path::Path::new("/dev/nvidiactl").exists() {
            return;
        }
        assert!(parse_device(Some("cuda")).is_err());
        parse_device(Some(&spec)).expect("WGPU starts after a refused CUDA start");
    }
}
