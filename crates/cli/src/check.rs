//! `lsr check`: the parity fixtures on a chosen device, so that a build is verified where it
//! runs (a GPU machine has no Rust toolchain to run the tests): transformers' logits and SPLADE
//! vectors for every committed fixture, one training step against PyTorch's, and where the
//! device runs lsr's fused attention kernels, their outputs and gradients against the host's.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use burn::prelude::*;
use clap::{Args, ValueEnum};
use lsr_backbone::reference::{
    ReferenceOutputs, Yardstick, fixture_texts_in, reduced_precision_logit_bound,
};
use lsr_backbone::{Backbone, RescaleMode, Scale};
use lsr_compute::attention::verify::fused_against_host;
use lsr_compute::{Precision, parse_device};
use lsr_splade::SpladeEncoder;
use lsr_train::reference::{StepDeviation, bf16_step_bounds, step_deviation};
use serde::Serialize;

#[derive(Args)]
pub struct CheckArgs {
    /// flex, wgpu[:N] or cuda[:N]; default: `$LSR_DEVICE`, else the best backend that starts here.
    #[arg(long)]
    device: Option<String>,
    /// f32, or bf16-mixed (compared with the same f32 references).
    #[arg(long, default_value = "f32")]
    precision: Precision,
    /// The repository's fixtures (`data/fixtures`, relative to the working directory).
    #[arg(long, default_value = "data/fixtures")]
    fixtures: PathBuf,
    /// `exact` (the tests' 1e-4), `tf32` or `bf16`; default: bf16 for bf16-mixed, else exact
    /// on flex and tf32 on a GPU.
    #[arg(long)]
    tolerance: Option<Tolerance>,
    #[arg(long)]
    json: bool,
}

/// How close a device must come to the references.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Tolerance {
    /// f32 arithmetic in another order: 1e-4 on logits, SPLADE weights, loss terms and every
    /// updated weight (the tests' bounds).
    Exact,
    /// cubecl's GPU matmuls run f32 products on tensor cores in TF32 (10-bit mantissa, relative
    /// rounding 2^-11 per operand) whenever its autotune picks them, with no switch to turn that
    /// off. Logits and SPLADE weights within twice PyTorch's own TF32 deviation on the same
    /// fixture (`tf32-cuda.json`), loss terms within 1% relative, the step's update within 10%
    /// of its size (relative L2: a weight whose tiny gradient changed sign under rounding makes
    /// the largest single-weight difference meaningless). 10% is twice a quarter of PyTorch's
    /// own bf16 step deviation (~20%): TF32 rounds 4× finer than bf16.
    Tf32,
    /// bf16-mixed: lsr's autocast held to PyTorch's. Logits and SPLADE weights within twice
    /// PyTorch's own bf16 autocast deviation on the same fixture (`bf16-autocast.json`), the
    /// step's loss terms and update within twice what PyTorch's bf16 step deviates from its f32
    /// step (`train-step/bf16-autocast.json`).
    Bf16,
}

impl Tolerance {
    /// The bound on |Δ logit| and |Δ SPLADE weight| on fixture `name` whose largest |logit| is
    /// `scale`.
    fn logits(self, root: &Path, name: &str, scale: f32) -> Result<f64> {
        Ok(match self {
            Self::Exact => 1e-4,
            Self::Tf32 => reduced_precision_logit_bound(root, Yardstick::Tf32, name, scale)? as f64,
            Self::Bf16 => reduced_precision_logit_bound(root, Yardstick::Bf16, name, scale)? as f64,
        })
    }

    /// The bounds on the loss terms (relative) and on the updated weights, and what the
    /// weights are judged by.
    fn step(self, root: &Path) -> Result<StepBounds> {
        Ok(match self {
            Self::Exact => StepBounds {
                scalars: 1e-4,
                weights: 1e-4,
                weights_by: WeightsBy::Largest,
            },
            Self::Tf32 => StepBounds {
                scalars: 1e-2,
                weights: 0.1,
                weights_by: WeightsBy::UpdateRelL2,
            },
            Self::Bf16 => {
                let (scalars, weights) = bf16_step_bounds(root)?;
                StepBounds {
                    scalars,
                    weights,
                    weights_by: WeightsBy::UpdateRelL2,
                }
            }
        })
    }
}

struct StepBounds {
    scalars: f64,
    weights: f64,
    weights_by: WeightsBy,
}

enum WeightsBy {
    /// The largest |Δ| of any weight.
    Largest,
    /// `‖θ − θ_PyTorch‖ / ‖θ_PyTorch − θ_0‖`.
    UpdateRelL2,
}

impl WeightsBy {
    fn judge(&self, step: &StepDeviation) -> (&'static str, f64) {
        match self {
            Self::Largest => ("train step: updated weights", step.max_param_abs),
            Self::UpdateRelL2 => ("train step: update (relative L2)", step.update_rel_l2),
        }
    }
}

/// One comparison: its largest deviation, the bound it must stay under, and the verdict.
#[derive(Serialize)]
struct Item {
    name: String,
    what: &'static str,
    max_abs: f64,
    bound: f64,
    pass: bool,
    detail: String,
}

impl Item {
    fn new(name: &str, what: &'static str, max_abs: f64, bound: f64, detail: String) -> Self {
        // NaN fails: `<=` is false for it.
        let pass = max_abs <= bound;
        Self {
            name: name.into(),
            what,
            max_abs,
            bound,
            pass,
            detail,
        }
    }
}

#[derive(Serialize)]
struct Report {
    device: String,
    precision: Precision,
    tolerance: Tolerance,
    pass: bool,
    items: Vec<Item>,
}

pub fn run(args: CheckArgs) -> Result<()> {
    if !args.fixtures.join("texts.json").is_file() {
        bail!(
            "no fixtures at {}: `--fixtures` names the repository's data/fixtures, by default \
             relative to the working directory (run from the repository root, or pass \
             --fixtures <repository>/data/fixtures)",
            lsr_files::resolved(&args.fixtures)
        );
    }
    let device = parse_device(args.device.as_deref())?;
    args.precision.usable_on(&device)?;
    let tolerance = args
        .tolerance
        .unwrap_or(if args.precision != Precision::F32 {
            Tolerance::Bf16
        } else if device == Device::flex() {
            Tolerance::Exact
        } else {
            Tolerance::Tf32
        });
    let (texts, max_length) = fixture_texts_in(&args.fixtures)?;
    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();

    let mut items = Vec::new();
    for name in fixture_names(&args.fixtures)? {
        items.extend(encoder_items(
            &args.fixtures,
            &name,
            &texts,
            max_length,
            &device,
            args.precision,
            tolerance,
        )?);
    }
    let train_device = device.clone().autodiff();
    let bounds = tolerance.step(&args.fixtures)?;
    for family in ["bert", "modernbert"] {
        let step = step_deviation(&args.fixtures, family, None, &train_device, args.precision)?;
        items.extend(step_items(family, &step, &bounds));
    }
    items.extend(attention_items(&device, args.precision));
    let report = Report {
        device: format!("{device:?}"),
        precision: args.precision,
        tolerance,
        pass: items.iter().all(|i| i.pass),
        items,
    };
    report.print(args.json)?;
    if !report.pass {
        bail!(
            "{} of {} comparisons out of tolerance on {}",
            report.items.iter().filter(|i| !i.pass).count(),
            report.items.len(),
            report.device
        );
    }
    Ok(())
}

/// A training step against PyTorch's: its loss terms, then its updated weights.
fn step_items(family: &str, step: &StepDeviation, bounds: &StepBounds) -> [Item; 2] {
    let worst = step.scalars.iter().max_by(|a, b| {
        let rel = |s: &(String, f64, f64)| (s.1 - s.2).abs() / s.2.abs().max(1.0);
        rel(a).total_cmp(&rel(b))
    });
    let detail = worst.map_or(String::new(), |(n, o, t)| {
        format!("worst {n}: {o} vs PyTorch {t}")
    });
    let scalars = Item::new(
        family,
        "train step: loss terms (relative)",
        step.max_scalar_rel(),
        bounds.scalars,
        detail,
    );
    let all_compared = step.params_compared == step.params_named;
    let (what, value) = bounds.weights_by.judge(step);
    let value = if all_compared { value } else { f64::INFINITY };
    let detail = format!(
        "{} of {} parameters; largest |Δ| {:.1e} in {}; update off by {:.1e} (relative L2)",
        step.params_compared,
        step.params_named,
        step.max_param_abs,
        step.worst_param,
        step.update_rel_l2
    );
    [
        scalars,
        Item::new(family, what, value, bounds.weights, detail),
    ]
}

/// The fused attention kernels against attention in f32 on the host, where the device runs
/// them (none elsewhere): each case's output and gradients, as a fraction of their largest
/// value. In f32 the kernels compute in f32 (no tensor cores), so they are held to 1e-4 on any
/// device (the tests hold lavapipe to 2e-5); in bf16-mixed to 3e-2, bf16's rounding of the
/// output (2^-9 relative) with the inputs' and the products' below it.
fn attention_items(device: &Device, precision: Precision) -> Vec<Item> {
    let Some(deviations) = fused_against_host(device, precision.compute()) else {
        return Vec::new();
    };
    let bound = match precision {
        // bf16 runs on flex alone, where no fused kernel runs; its products narrow in the BLAS.
        Precision::F32 | Precision::Bf16 => 1e-4,
        Precision::Bf16Mixed => 3e-2,
    };
    deviations
        .into_iter()
        .map(|d| {
            let what = match d.what {
                "out" => "fused attention: output (relative)",
                "dq" => "fused attention: dQ (relative)",
                "dk" => "fused attention: dK (relative)",
                _ => "fused attention: dV (relative)",
            };
            let detail = format!("largest |value| {:.2e}", d.largest);
            let layout = if d.packed { "-qkv" } else { "" };
            Item::new(
                &format!("attention-{}{layout}", d.case),
                what,
                d.relative(),
                bound,
                detail,
            )
        })
        .collect()
}

impl Report {
    /// One JSON object, or a line per comparison.
    fn print(&self, json: bool) -> Result<()> {
        if json {
            println!("{}", serde_json::to_string(self)?);
            return Ok(());
        }
        println!(
            "parity on {} in {} (tolerance: {:?})",
            self.device, self.precision, self.tolerance
        );
        for item in &self.items {
            let verdict = if item.pass { "ok  " } else { "FAIL" };
            println!(
                "{verdict} {:<26} {:<34} max |Δ| {:.2e} (≤ {:.0e})  {}",
                item.name, item.what, item.max_abs, item.bound, item.detail
            );
        }
        Ok(())
    }
}

/// Every fixture with transformers' outputs, in name order.
fn fixture_names(root: &Path) -> Result<Vec<String>> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(root).with_context(|| root.display().to_string())? {
        let path = entry?.path();
        if path.join("expected.safetensors").is_file() {
            names.extend(path.file_name().map(|n| n.to_string_lossy().into_owned()));
        }
    }
    if names.is_empty() {
        bail!(
            "{}: no fixture (a directory with expected.safetensors)",
            root.display()
        );
    }
    names.sort();
    Ok(names)
}

/// Logits and SPLADE vectors of one fixture against transformers'.
fn encoder_items(
    root: &Path,
    name: &str,
    texts: &[&str],
    max_length: usize,
    device: &Device,
    precision: Precision,
    tolerance: Tolerance,
) -> Result<[Item; 2]> {
    let dir = root.join(name);
    let expected = ReferenceOutputs::read(&dir)?;
    let mut backbone = Backbone::load(
        dir.to_str().context("fixture path is not UTF-8")?,
        device,
        max_length,
    )?;
    backbone.model = backbone.model.with_precision(precision);
    let logits = expected.logits_deviation(&backbone, texts, device)?;
    let bound = tolerance.logits(root, name, logits.reference_max_abs)?;
    let tokens_ok = logits.ids_match && logits.mask_match;
    let detail = if tokens_ok {
        format!("largest |logit| {:.2}", logits.reference_max_abs)
    } else {
        "token ids or mask differ from transformers'".into()
    };
    let max_abs = if tokens_ok {
        logits.max_abs as f64
    } else {
        f64::INFINITY
    };
    let logits_item = Item::new(name, "logits", max_abs, bound, detail);

    let encoder = SpladeEncoder::new(backbone, Scale::ONE, RescaleMode::Shared)?;
    let dense = encoder
        .encode_dense(texts)?
        .into_data()
        .convert::<f32>()
        .try_into_vec::<f32>()
        .expect("f32 weights");
    let max_abs = if dense.len() == expected.splade.len() {
        dense
            .iter()
            .zip(&expected.splade)
            .map(|(a, b)| (a - b).abs() as f64)
            .fold(0.0, |m, d| if d.is_nan() { f64::NAN } else { m.max(d) })
    } else {
        f64::INFINITY
    };
    let active = expected.splade.iter().filter(|&&w| w > 0.0).count();
    let splade_item = Item::new(
        name,
        "SPLADE weights",
        max_abs,
        bound,
        format!("{active} active terms"),
    );
    Ok([logits_item, splade_item])
}
