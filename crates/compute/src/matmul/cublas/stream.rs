//! Route A: the ordering of each cuBLASLt call with cubecl's CUDA stream, lsr's own stream and
//! cuBLASLt context per device, and the totals of what the route did.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use burn_cubecl::cubecl::client::Client;
use burn_cubecl::cubecl::cuda::CudaRuntime;
use burn_cubecl::cubecl::server::Handle;
use cubecl_runtime::runtime::Runtime;
use cudarc::driver::sys::CUdeviceptr;
use cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT;
use cudarc::driver::{CudaContext, CudaStream};

use super::plans::{LtContext, LtError};
use crate::matmul::CublasTotals;

/// Orders one cuBLASLt call with cubecl's work on the device, Route A (docs/perf-gpu.md):
/// cubecl-cuda 0.11.3 keeps its CUDA stream private, so the call runs on a
/// stream of lsr's own, and the host waits twice: for cubecl's stream before the call (its
/// inputs written, and, through `get_resource`, the waits on other streams' writers enqueued),
/// and for lsr's stream after it (its output written before cubecl's next kernel reads it, and
/// its inputs no longer read when cubecl frees and reuses them). That costs two host round
/// trips and two drained GPU pipelines per product (an estimated 20-50 µs each), and it stops
/// the CPU from running ahead: right for checking numerics, too slow to win. Route B, a small
/// patch to cubecl-cuda that runs `work` on cubecl's own stream (docs/perf-gpu.md), replaces
/// this one function and nothing else.
pub(super) fn on_own_stream<R>(
    client: &Client,
    index: usize,
    handles: [Handle; 3],
    work: impl FnOnce(&mut LtContext, &CudaStream, [CUdeviceptr; 3]) -> Result<R, LtError>,
) -> Result<R, LtError> {
    type CudaServer = <CudaRuntime as Runtime>::Server;
    let waited = Instant::now();
    // The managed resources pin the allocations until the call is done.
    let resources = handles.map(|handle| client.get_resource::<CudaServer>(handle));
    let resources = resources
        .into_iter()
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| LtError::Before(format!("{e:?}")))?;
    burn_cubecl::cubecl::future::block_on(client.sync())
        .map_err(|e| LtError::Before(format!("{e:?}")))?;
    let mut waited = waited.elapsed();
    let pointers = [0, 1, 2].map(|i| resources[i].resource().ptr);
    let mut contexts = contexts()
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let own = match contexts.entry(index) {
        Entry::Occupied(own) => own.into_mut(),
        Entry::Vacant(slot) => slot.insert(OwnStream::new(index).map_err(LtError::Refused)?),
    };
    own.device
        .bind_to_thread()
        .map_err(|e| LtError::Before(format!("{e:?}")))?;
    let timing = device_timing();
    let start = timing.then(|| own.stream.record_event(Some(CU_EVENT_DEFAULT)));
    let result = work(&mut own.lt, &own.stream, pointers)?;
    let end = timing.then(|| own.stream.record_event(Some(CU_EVENT_DEFAULT)));
    let synced = Instant::now();
    own.stream
        .synchronize()
        .map_err(|e| LtError::After(format!("{e:?}")))?;
    waited += synced.elapsed();
    drop(resources);
    let device_seconds = match (start, end) {
        (Some(Ok(start)), Some(Ok(end))) => start.elapsed_ms(&end).ok().map(|ms| ms as f64 / 1e3),
        _ => None,
    };
    count_product(waited.as_secs_f64(), device_seconds);
    Ok(result)
}

/// Whether each product's device time is measured with CUDA events (`LSR_CUBLAS_TIMING=1`):
/// two events per product, read when Route A's sync after it has returned anyway.
pub(super) fn device_timing() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var(TIMING_VARIABLE).is_ok_and(|v| v == "1"))
}

/// `LSR_CUBLAS_TIMING=1` times each cuBLASLt product on the device (`lsr bench` reports it).
pub const TIMING_VARIABLE: &str = "LSR_CUBLAS_TIMING";

pub(super) fn count_product(host_sync_seconds: f64, device_seconds: Option<f64>) {
    let mut totals = totals();
    totals.products += 1;
    totals.host_sync_seconds += host_sync_seconds;
    if let Some(seconds) = device_seconds {
        *totals.device_seconds.get_or_insert(0.0) += seconds;
    }
}

pub(super) fn totals() -> std::sync::MutexGuard<'static, CublasTotals> {
    static TOTALS: Mutex<CublasTotals> = Mutex::new(CublasTotals {
        products: 0,
        fallbacks: 0,
        host_sync_seconds: 0.0,
        device_seconds: None,
    });
    TOTALS
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The totals since the last call, which starts them again.
pub fn take_totals() -> CublasTotals {
    std::mem::take(&mut *totals())
}

/// lsr's stream on one device, with its cuBLASLt context.
pub(super) struct OwnStream {
    pub(super) device: Arc<CudaContext>,
    pub(super) stream: Arc<CudaStream>,
    pub(super) lt: LtContext,
}

impl OwnStream {
    pub(super) fn new(index: usize) -> Result<Self, String> {
        // The device's primary context, the one cubecl runs in, made current on this thread.
        let device = CudaContext::new(index).map_err(|e| format!("CUDA device {index}: {e:?}"))?;
        let stream = device
            .new_stream()
            .map_err(|e| format!("CUDA stream: {e:?}"))?;
        let (major, _) = device.compute_capability().map_err(|e| format!("{e:?}"))?;
        let lt = LtContext::new(major).map_err(|e| format!("cuBLASLt: {e:?}"))?;
        Ok(Self { device, stream, lt })
    }
}

pub(super) fn contexts() -> &'static Mutex<HashMap<usize, OwnStream>> {
    static CONTEXTS: OnceLock<Mutex<HashMap<usize, OwnStream>>> = OnceLock::new();
    CONTEXTS.get_or_init(Default::default)
}
