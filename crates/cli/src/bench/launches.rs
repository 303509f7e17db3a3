//! `--launches` of the train-step and encode benches: what one steady-state step or batch costs
//! a GPU in kernel launches and in the bytes it keeps for the backward pass, counted on any GPU
//! backend (WGPU's software device included) without timing anything. The shape it counts at is
//! BERT-base's structure (12 layers, its vocabulary, the bench's batch) with narrower widths,
//! so that a software device runs it in minutes: launches depend on the graph, the vocabulary's
//! tiles and the token counts, not on the widths; bytes scale with them.
//! `scripts/bench/train_step.py --count` and `encode.py --count` count PyTorch at the same shape.

use std::collections::BTreeMap;

use anyhow::Result;
use burn::prelude::*;
use lsr_compute::launches::{Counting, DeviceLimits, Launches};
use serde::Serialize;

/// The hidden width of a count: 12 heads of 64 would make it BERT-base; 2 heads of 64 keep
/// the per-head shape and run on a software device in minutes.
pub const COUNT_HIDDEN: usize = 128;

/// The widths of a model of BERT-base's structure with `hidden` units: BERT-base's head size
/// (64) and FFN ratio (4).
pub fn bert_widths(hidden: usize) -> (usize, usize) {
    ((hidden / 64).max(1), 4 * hidden)
}

/// What one unit of work (a training step, an encoded batch) launched, counted twice: once as
/// it runs, and once with region markers that say which part of the model issued each launch
/// (markers are opaque to fusion, so that count can be a little higher).
#[derive(Serialize)]
pub struct LaunchReport {
    /// Launches of the unmarked run.
    pub total: u64,
    pub by_kernel: BTreeMap<String, u64>,
    /// The run with region markers: its total and its launches per region.
    pub with_regions: RegionCounts,
    /// Bytes the allocator held before `backward()` beyond what it held when the step started
    /// (parameters, AdamW's state): the activations kept for the backward pass, and the loss's
    /// tensors. Training steps only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub activation_bytes: Option<i64>,
    /// The allocator's bytes in use at each point of the marked run.
    pub bytes_in_use: Vec<(String, u64)>,
    /// The device's limits that decide fusion.
    pub limits: Option<DeviceLimits>,
}

#[derive(Serialize)]
pub struct RegionCounts {
    pub total: u64,
    pub by_region: BTreeMap<String, u64>,
    pub by_region_and_kernel: BTreeMap<String, BTreeMap<String, u64>>,
}

/// Runs `work` `warmup` times (tuning and compiling happen there), then once counted as it is
/// and once with region markers.
pub fn count<T>(
    device: &Device,
    warmup: usize,
    mut work: impl FnMut() -> T,
) -> Result<LaunchReport> {
    for _ in 0..warmup {
        drop(work());
    }
    let plain = counted(device, false, &mut work)?;
    let marked = counted(device, true, &mut work)?;
    Ok(LaunchReport {
        total: plain.total,
        by_kernel: plain.by_kernel,
        activation_bytes: marked.bytes_since_start("before-backward"),
        with_regions: RegionCounts {
            total: marked.total,
            by_region: marked.by_region,
            by_region_and_kernel: marked.by_region_and_kernel,
        },
        bytes_in_use: marked.bytes_in_use,
        limits: DeviceLimits::of(device),
    })
}

fn counted<T>(device: &Device, regions: bool, work: &mut impl FnMut() -> T) -> Result<Launches> {
    let counting = Counting::start(device, regions)?;
    let result = work();
    let launches = counting.finish()?;
    drop(result);
    Ok(launches)
}

/// The lines printed without `--json`: totals, regions, bytes.
pub fn describe(report: &LaunchReport) -> String {
    let regions = report
        .with_regions
        .by_region
        .iter()
        .map(|(region, n)| format!("{region} {n}"))
        .collect::<Vec<_>>()
        .join(", ");
    let bytes = report.activation_bytes.map_or(String::new(), |b| {
        format!(
            "; {:.1} MiB kept for the backward pass",
            b as f64 / (1024.0 * 1024.0)
        )
    });
    format!(
        "{} launches ({} with region markers: {regions}){bytes}",
        report.total, report.with_regions.total
    )
}
