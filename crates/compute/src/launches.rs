//! What a pass costs a GPU, counted without timing it: the kernels it launches (in total, by
//! kernel name, and by the part of the model that issued them) and the bytes the device's
//! allocator holds at the step's boundaries. Benchmarks read it (`lsr bench train-step
//! --launches`); it changes nothing when no count is running.
//!
//! Kernels are counted by cubecl's launch observer, which every runtime calls before it
//! submits a launch. Attributing them to regions of the model needs more than the program's
//! own position: with burn's fusion an operation runs later, on the fusion server's thread,
//! inside a block it shares with its neighbours. So a region change travels with the work, as
//! a marker operation in the same stream ([`mark`], [`enter`]): when the marker runs, it sets
//! the region the next launches count towards, and in the backward pass each marker's gradient
//! sets the backward region of the part of the model that came before it. Markers are opaque
//! to fusion, so a count with regions can launch a few more kernels than one without: a count
//! is taken either way ([`Counting::start`]'s `regions`), and a report gives both totals.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use burn::prelude::*;
use serde::Serialize;

use crate::{ComputeError, Result};

#[cfg(any(feature = "wgpu", feature = "cuda"))]
mod marker;

/// Parts of a training step, in the order a step runs them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Region {
    /// Token, position and type embeddings and their LayerNorm.
    Embedding,
    /// A layer's attention: projections, scores, softmax, output, residual and LayerNorm.
    Attention,
    /// A layer's feed-forward block, with its residual and LayerNorm.
    Ffn,
    /// The MLM head and SPLADE pooling (tiles, masked max, `log(1 + relu)`).
    Head,
    /// The loss and regularisers on the pooled vectors.
    Loss,
    /// The values a step logs, read back from the device (PyTorch's reference reads the loss
    /// alone).
    Metrics,
    /// The global gradient norm (and clipping, where the recipe asks).
    GradientNorm,
    /// AdamW's update, and in bf16-mixed the cast of its master a step's forward passes use.
    Optimizer,
}

impl Region {
    /// As serialised: `embedding`, `gradient-norm`, …
    pub fn name(self) -> &'static str {
        match self {
            Self::Embedding => "embedding",
            Self::Attention => "attention",
            Self::Ffn => "ffn",
            Self::Head => "head",
            Self::Loss => "loss",
            Self::Metrics => "metrics",
            Self::GradientNorm => "gradient-norm",
            Self::Optimizer => "optimizer",
        }
    }
}

/// A region and the direction of the pass through it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Label {
    pub region: Region,
    pub backward: bool,
}

impl Label {
    pub fn forward(region: Region) -> Self {
        Self {
            region,
            backward: false,
        }
    }

    pub fn backward(region: Region) -> Self {
        Self {
            region,
            backward: true,
        }
    }

    /// `attention`, `attention-backward`, …
    pub fn name(self) -> String {
        let region = self.region.name();
        match self.backward {
            false => region.to_string(),
            true => format!("{region}-backward"),
        }
    }

    #[cfg(any(feature = "wgpu", feature = "cuda", test))]
    fn code(self) -> u32 {
        (self.region as u32) << 1 | self.backward as u32
    }

    fn from_code(code: u32) -> Option<Self> {
        const REGIONS: [Region; 8] = [
            Region::Embedding,
            Region::Attention,
            Region::Ffn,
            Region::Head,
            Region::Loss,
            Region::Metrics,
            Region::GradientNorm,
            Region::Optimizer,
        ];
        let region = *REGIONS.get((code >> 1) as usize)?;
        Some(Self {
            region,
            backward: code & 1 == 1,
        })
    }
}

/// No region yet: launches before the first marker of a count.
const UNLABELLED: u32 = u32::MAX;

/// Whether a count with regions is running: [`mark`] and [`enter`] do nothing otherwise.
static REGIONS: AtomicBool = AtomicBool::new(false);
/// The label launches count towards, set by markers as they run (on the fusion server's
/// thread, in stream order).
static CURRENT: AtomicU32 = AtomicU32::new(UNLABELLED);
/// The region the program last marked (on the thread that builds the graph): the region
/// whose backward pass follows a new marker's in the backward pass.
static LAST: Mutex<Option<Region>> = Mutex::new(None);
/// The allocator's bytes in use at each [`memory_point`] of a count with regions.
static POINTS: Mutex<Vec<(&'static str, u64)>> = Mutex::new(Vec::new());

/// `x`, marked as the entry of `region`: the launches after it count towards `region`, and in
/// the backward pass, those after its gradient towards the backward of the region marked
/// before it. `x` itself, with no operation added, unless a count with regions is running.
pub fn mark<const D: usize>(x: Tensor<D>, region: Region) -> Tensor<D> {
    let [x] = mark_all([x], region);
    x
}

/// [`mark`] for several tensors entering `region` from the same place (the loss's inputs).
pub fn mark_all<const D: usize, const N: usize>(
    tensors: [Tensor<D>; N],
    region: Region,
) -> [Tensor<D>; N] {
    if !REGIONS.load(Ordering::Relaxed) {
        return tensors;
    }
    let before = LAST.lock().expect("not poisoned").replace(region);
    let forward = Label::forward(region);
    let backward = before.map_or(forward, Label::backward);
    tensors.map(|x| marked(x, forward, backward))
}

/// Switches the launches that follow, in stream order, to `label`, without joining the graph:
/// where a pass starts (embeddings), between passes (the loss, the optimizer) and where the
/// backward pass starts. Nothing unless a count with regions is running.
pub fn enter(device: &Device, label: Label) {
    if !REGIONS.load(Ordering::Relaxed) {
        return;
    }
    if !label.backward {
        *LAST.lock().expect("not poisoned") = Some(label.region);
    }
    let carrier = Tensor::<1>::empty([1], &device.clone().inner());
    drop(marked(carrier, label, label));
}

/// Records the bytes the device's allocator holds once everything issued so far has run, as
/// `name`, in a count with regions (it waits for the device, which a count without regions
/// must not).
pub fn memory_point(device: &Device, name: &'static str) {
    if !REGIONS.load(Ordering::Relaxed) {
        return;
    }
    if let Some(bytes) = bytes_in_use(device) {
        POINTS.lock().expect("not poisoned").push((name, bytes));
    }
}

fn bytes_in_use(device: &Device) -> Option<u64> {
    device.sync().ok()?;
    device.memory_pool_usage().map(|usage| usage.bytes_in_use)
}

#[cfg(any(feature = "wgpu", feature = "cuda"))]
fn marked<const D: usize>(x: Tensor<D>, forward: Label, backward: Label) -> Tensor<D> {
    marker::mark(x, forward.code(), backward.code())
}

#[cfg(not(any(feature = "wgpu", feature = "cuda")))]
fn marked<const D: usize>(x: Tensor<D>, _forward: Label, _backward: Label) -> Tensor<D> {
    x
}

/// Called by the marker operation when it runs.
#[cfg(any(feature = "wgpu", feature = "cuda"))]
fn reached(code: u32) {
    CURRENT.store(code, Ordering::Relaxed);
}

/// What a count saw.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Launches {
    pub total: u64,
    /// By kernel name (generics shortened as cubecl's profiling log shortens them).
    pub by_kernel: BTreeMap<String, u64>,
    /// By region of the model, when the count had regions (`embedding`, `attention-backward`,
    /// …; `unlabelled` before the first marker).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub by_region: BTreeMap<String, u64>,
    /// Each region's launches by kernel name.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub by_region_and_kernel: BTreeMap<String, BTreeMap<String, u64>>,
    /// The allocator's bytes in use at the count's start, at each [`memory_point`], and at
    /// its end, when the count had regions.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub bytes_in_use: Vec<(String, u64)>,
}

impl Launches {
    /// The bytes at point `name` less those at the count's start.
    pub fn bytes_since_start(&self, name: &str) -> Option<i64> {
        let at = |n: &str| self.bytes_in_use.iter().find(|(p, _)| p == n).map(|p| p.1);
        Some(at(name)? as i64 - at(START)? as i64)
    }
}

const START: &str = "start";
const END: &str = "end";

/// A count in progress: every launch the process issues until [`Counting::finish`].
pub struct Counting {
    device: Device,
    counter: Arc<Counter>,
    #[cfg(any(feature = "wgpu", feature = "cuda"))]
    _observation: cubecl_runtime::logging::LaunchObservation,
}

impl Counting {
    /// Starts counting once `device` has finished what was issued before; with `regions`,
    /// markers attribute the launches and [`memory_point`]s are recorded. Only one count
    /// runs at a time in a process; `device` must be a GPU backend's.
    pub fn start(device: &Device, regions: bool) -> Result<Self> {
        if !is_gpu(device) {
            return Err(ComputeError::Setting(format!(
                "counting kernel launches needs a GPU backend (wgpu or cuda); {device:?} runs \
                 no kernels"
            )));
        }
        let counter = Arc::new(Counter::default());
        let start_bytes = bytes_in_use(device);
        *LAST.lock().expect("not poisoned") = None;
        CURRENT.store(UNLABELLED, Ordering::Relaxed);
        let mut points = POINTS.lock().expect("not poisoned");
        points.clear();
        points.extend(start_bytes.map(|bytes| (START, bytes)));
        drop(points);
        REGIONS.store(regions, Ordering::Relaxed);
        Ok(Self {
            device: device.clone(),
            #[cfg(any(feature = "wgpu", feature = "cuda"))]
            _observation: cubecl_runtime::logging::LaunchObservation::new(counter.clone()),
            counter,
        })
    }

    /// Waits for the device and returns what was counted.
    pub fn finish(self) -> Result<Launches> {
        let regions = REGIONS.load(Ordering::Relaxed);
        memory_point(&self.device, END);
        self.device
            .sync()
            .map_err(|e| ComputeError::Setting(format!("waiting for the device: {e:?}")))?;
        REGIONS.store(false, Ordering::Relaxed);
        let counter = self.counter.clone();
        drop(self);
        let counted = counter.counts.lock().expect("not poisoned");
        let mut launches = Launches::default();
        for ((kernel, code), &n) in counted.iter() {
            launches.total += n;
            *launches.by_kernel.entry(short_name(kernel)).or_default() += n;
            if regions {
                let region = Label::from_code(*code).map_or("unlabelled".into(), Label::name);
                *launches.by_region.entry(region.clone()).or_default() += n;
                let kernels = launches.by_region_and_kernel.entry(region).or_default();
                *kernels.entry(short_name(kernel)).or_default() += n;
            }
        }
        if regions {
            let points = std::mem::take(&mut *POINTS.lock().expect("not poisoned"));
            launches.bytes_in_use = points.into_iter().map(|(n, b)| (n.into(), b)).collect();
        }
        Ok(launches)
    }
}

/// Launches by kernel and by the label current when each was issued.
#[derive(Default)]
struct Counter {
    counts: Mutex<BTreeMap<(&'static str, u32), u64>>,
}

#[cfg(any(feature = "wgpu", feature = "cuda"))]
impl cubecl_runtime::logging::LaunchObserver for Counter {
    fn launched(&self, kernel: &'static str) {
        let label = CURRENT.load(Ordering::Relaxed);
        *self
            .counts
            .lock()
            .expect("not poisoned")
            .entry((kernel, label))
            .or_default() += 1;
    }
}

#[cfg(any(feature = "wgpu", feature = "cuda"))]
fn short_name(kernel: &str) -> String {
    use cubecl_runtime::config::{TypeNameFormatLevel, type_name_format};
    type_name_format(kernel, TypeNameFormatLevel::Balanced)
}

#[cfg(not(any(feature = "wgpu", feature = "cuda")))]
fn short_name(kernel: &str) -> String {
    kernel.to_string()
}

#[cfg(any(feature = "wgpu", feature = "cuda"))]
fn is_gpu(device: &Device) -> bool {
    use burn::backend::DispatchDevice;
    matches!(
        device.clone().inner().as_dispatch(),
        DispatchDevice::Cube(_)
    )
}

#[cfg(not(any(feature = "wgpu", feature = "cuda")))]
fn is_gpu(_: &Device) -> bool {
    false
}

/// The limits of `device` that decide how burn fuses and how cubecl launches: fused blocks are
/// cut at `max_bindings` buffers, so a device with fewer bindings launches more kernels for the
/// same graph. `None` off the GPU backends.
#[derive(Clone, Debug, Serialize)]
pub struct DeviceLimits {
    pub max_bindings: u32,
    /// The largest buffer one allocation (and one tensor) may have.
    pub max_buffer_bytes: u64,
    /// The bytes a buffer's offset must be a multiple of: a slice that starts or ends elsewhere
    /// is copied rather than viewed.
    pub buffer_alignment: u64,
    pub max_shared_memory_bytes: usize,
    pub max_units_per_cube: u32,
    pub plane_size_min: u32,
    pub plane_size_max: u32,
    pub streaming_multiprocessors: Option<u32>,
}

impl DeviceLimits {
    #[cfg(any(feature = "wgpu", feature = "cuda"))]
    pub fn of(device: &Device) -> Option<Self> {
        use burn::backend::DispatchDevice;
        let inner = device.clone().inner();
        let DispatchDevice::Cube(cube) = inner.as_dispatch() else {
            return None;
        };
        let client = cube.client();
        let properties = client.properties();
        let hardware = &properties.hardware;
        Some(Self {
            max_bindings: hardware.max_bindings,
            max_buffer_bytes: properties.memory.max_page_size,
            buffer_alignment: properties.memory.alignment,
            max_shared_memory_bytes: hardware.max_shared_memory_size,
            max_units_per_cube: hardware.max_units_per_cube,
            plane_size_min: hardware.plane_size_min,
            plane_size_max: hardware.plane_size_max,
            streaming_multiprocessors: hardware.num_streaming_multiprocessors,
        })
    }

    #[cfg(not(any(feature = "wgpu", feature = "cuda")))]
    pub fn of(_: &Device) -> Option<Self> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_round_trip_through_their_codes() {
        for code in 0..16 {
            let label = Label::from_code(code).expect("eight regions, two directions");
            assert_eq!(label.code(), code);
        }
        assert_eq!(Label::from_code(16), None);
        assert_eq!(Label::from_code(UNLABELLED), None);
        assert_eq!(Label::backward(Region::Ffn).name(), "ffn-backward");
        assert_eq!(Label::forward(Region::GradientNorm).name(), "gradient-norm");
    }

    #[test]
    fn marks_change_nothing_when_no_count_runs() {
        let device = Device::flex();
        let x = Tensor::<1>::from_floats([1.0, 2.0], &device);
        let y = mark(x.clone(), Region::Attention);
        assert_eq!(x.into_data(), y.into_data());
        enter(&device, Label::forward(Region::Loss));
        assert!(LAST.lock().unwrap().is_none());
    }

    #[test]
    fn counting_refuses_the_cpu_backend() {
        let error = Counting::start(&Device::flex(), false)
            .err()
            .expect("flex runs no kernels");
        assert!(error.to_string().contains("GPU backend"), "{error}");
    }
}
