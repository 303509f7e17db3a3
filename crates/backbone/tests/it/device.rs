//! The device rule: an explicit backend that cannot start is one error naming it, and no spec
//! means `$LSR_DEVICE` or else the best backend that starts (never an error: flex always does).

use lsr_backbone::parse_device;

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
    let Ok(spec) = std::env::var("LSR_TEST_DEVICE") else {
        lsr_files::ci::cannot_set_up("a WGPU device: LSR_TEST_DEVICE is not set");
        return;
    };
    if !spec.starts_with("wgpu") || std::path::Path::new("/dev/nvidiactl").exists() {
        return;
    }
    assert!(parse_device(Some("cuda")).is_err());
    parse_device(Some(&spec)).expect("WGPU starts after a refused CUDA start");
}
