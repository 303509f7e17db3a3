use burn::prelude::Device;

use crate::error::{BackboneError, Result};

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

/// Parses `flex`, `wgpu`, `wgpu:N`, `cuda` or `cuda:N` into a burn device. `None` picks the
/// best backend compiled in (CUDA, then WGPU, then the flex CPU backend).
pub fn parse_device(spec: Option<&str>) -> Result<Device> {
    let spec = spec.unwrap_or(compiled_backends()[0]);
    let (name, index) = match spec.split_once(':') {
        Some((name, index)) => {
            let index = index.parse::<usize>().map_err(|_| BackboneError::Device {
                spec: spec.to_string(),
                message: format!("`{index}` is not a device index"),
            })?;
            (name, index)
        }
        None => (spec, 0),
    };
    let not_compiled = |feature: &str| BackboneError::Device {
        spec: spec.to_string(),
        message: format!(
            "this binary was built without the `{feature}` feature (compiled: {}); rebuild with \
             `--features {feature}`",
            compiled_backends().join(", ")
        ),
    };
    let device = match name {
        "flex" | "cpu" => Device::flex(),
        "wgpu" => {
            #[cfg(feature = "wgpu")]
            {
                // `wgpu` alone lets wgpu pick its preferred adapter; `wgpu:N` asks for the
                // N-th discrete GPU.
                use burn::tensor::DeviceKind;
                let kind = if spec.contains(':') {
                    DeviceKind::DiscreteGpu(index)
                } else {
                    DeviceKind::DefaultDevice
                };
                Device::wgpu(kind)
            }
            #[cfg(not(feature = "wgpu"))]
            {
                let _ = index;
                return Err(not_compiled("wgpu"));
            }
        }
        "cuda" => {
            #[cfg(feature = "cuda")]
            {
                Device::cuda(index)
            }
            #[cfg(not(feature = "cuda"))]
            {
                return Err(not_compiled("cuda"));
            }
        }
        other => {
            return Err(BackboneError::Device {
                spec: spec.to_string(),
                message: format!("unknown backend `{other}`; expected flex, wgpu[:N] or cuda[:N]"),
            });
        }
    };
    probe(device, spec)
}

/// Runs a one-element operation on a GPU device. A backend that cannot start (no adapter, no
/// driver) panics on its own thread; that becomes an error naming the device instead.
#[cfg(any(feature = "wgpu", feature = "cuda"))]
fn probe(device: Device, spec: &str) -> Result<Device> {
    let probe_device = device.clone();
    let started = std::panic::catch_unwind(move || {
        burn::prelude::Tensor::<1>::zeros([1], &probe_device).into_data()
    });
    match started {
        Ok(_) => Ok(device),
        Err(_) => Err(BackboneError::Device {
            spec: spec.to_string(),
            message: "the backend could not start on this machine (for wgpu: no Vulkan, Metal or \
                      GL adapter with a working driver; for cuda: no CUDA driver or device); \
                      the backend's own message is above"
                .into(),
        }),
    }
}

#[cfg(not(any(feature = "wgpu", feature = "cuda")))]
fn probe(device: Device, _spec: &str) -> Result<Device> {
    Ok(device)
}
