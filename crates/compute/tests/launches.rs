//! Counting kernel launches on the GPU device `LSR_TEST_DEVICE` names (CI: WGPU on Mesa's
//! software Vulkan). A test binary of its own: a count sees every launch of the process, so no
//! other test may run on the device meanwhile (the tests here take turns: [`alone`]).

use burn::prelude::*;
use lsr_compute::launches::{Counting, DeviceLimits, Label, Region, enter, mark, memory_point};

/// Held by each test while it counts.
fn alone() -> std::sync::MutexGuard<'static, ()> {
    static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());
    TURN.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn gpu() -> Option<Device> {
    let spec = lsr_files::ci::test_device("a GPU device")?;
    Some(lsr_compute::parse_device(Some(&spec)).expect("LSR_TEST_DEVICE starts"))
}

/// A two-region pass and its backward: `ffn(attention(x))`, each region a reduction and an
/// element-wise chain, the loss their sum. Marked as the model is: each region at its entry,
/// the last one also at its exit (as the head is), where the backward pass enters it.
fn pass(x: Tensor<2>, marked: bool) -> Tensor<1> {
    let region = |x, r| if marked { mark(x, r) } else { x };
    let a = region(x, Region::Attention);
    let a = (a.clone() - a.mean_dim(1)).exp();
    let f = region(a, Region::Ffn);
    let f = region(f.clone() * f.sum_dim(1).recip(), Region::Ffn);
    if marked {
        enter(&f.device(), Label::forward(Region::Loss));
    }
    f.square().sum()
}

fn input(device: &Device) -> Tensor<2> {
    let values: Vec<f32> = (0..64 * 48).map(|i| ((i as f32) * 0.37).sin()).collect();
    Tensor::from_data(TensorData::new(values, [64, 48]), device).require_grad()
}

fn values<const D: usize>(t: Tensor<D>) -> Vec<f32> {
    t.into_data().convert::<f32>().try_into_vec().unwrap()
}

#[test]
fn launches_are_counted_and_attributed_to_the_regions_that_issued_them() {
    let Some(device) = gpu() else { return };
    let _turn = alone();
    let device = device.autodiff();
    let run = |marked: bool| {
        let x = input(&device);
        let loss = pass(x.clone(), marked);
        if marked {
            memory_point(&device, "before-backward");
            enter(&device, Label::backward(Region::Loss));
        }
        let grads = loss.clone().backward();
        (values(loss), values(x.grad(&grads).expect("x's gradient")))
    };
    // Tuning and compiling happen here, outside the counts.
    let unmarked = run(false);
    run(true);

    let counting = Counting::start(&device, false).unwrap();
    run(false);
    let plain = counting.finish().unwrap();
    assert!(
        plain.total >= 4,
        "two reductions and their gradients: {plain:?}"
    );
    assert_eq!(plain.by_kernel.values().sum::<u64>(), plain.total);
    assert!(plain.by_region.is_empty() && plain.bytes_in_use.is_empty());

    let counting = Counting::start(&device, true).unwrap();
    let marked = run(true);
    let regions = counting.finish().unwrap();
    assert_eq!(
        marked, unmarked,
        "markers change neither values nor gradients"
    );
    assert_eq!(regions.by_region.values().sum::<u64>(), regions.total);
    for region in ["attention", "ffn", "attention-backward", "ffn-backward"] {
        assert!(
            regions.by_region.contains_key(region),
            "{region}: {regions:?}"
        );
    }
    assert!(!regions.by_region.contains_key("unlabelled"), "{regions:?}");
    let points: Vec<&str> = regions
        .bytes_in_use
        .iter()
        .map(|(p, _)| p.as_str())
        .collect();
    assert_eq!(points, ["start", "before-backward", "end"]);
    assert!(regions.bytes_since_start("before-backward").unwrap() > 0);

    let limits = DeviceLimits::of(&device).expect("a GPU device has limits");
    assert!(limits.max_bindings > 0);
    assert!(limits.max_buffer_bytes >= 128 << 20, "{limits:?}");
    assert!(DeviceLimits::of(&Device::flex()).is_none());
}

/// A linear map's bias, and what follows it element-wise, run in the product's kernel (or, where
/// autotune picks the unfused product, in one fused kernel after it), never as a kernel of its
/// own: its row made after the product used to end the product's fused block.
#[test]
fn a_linear_maps_bias_add_is_fused_with_its_product() {
    let Some(device) = gpu() else { return };
    let _turn = alone();
    let layer = burn::nn::LinearConfig::new(48, 96).init(&device);
    let x = input(&device.clone().autodiff())
        .inner()
        .reshape([4, 16, 48]);
    let run = || {
        let y = lsr_compute::precision::linear(&layer, x.clone(), burn::tensor::DType::F32);
        (y.exp() * 2.0).into_data()
    };
    let expected = run();
    let counting = Counting::start(&device, false).unwrap();
    assert_eq!(run(), expected);
    let counted = counting.finish().unwrap();
    let unfused: Vec<&String> = (counted.by_kernel.keys())
        .filter(|kernel| !kernel.starts_with("MatmulEntry") && kernel.as_str() != "ElemwiseFuse")
        .collect();
    assert!(unfused.is_empty(), "{:?}", counted.by_kernel);
    assert!(counted.total <= 2, "{:?}", counted.by_kernel);
}
