//! One training step against PyTorch's: `scripts/fixtures/train_step.py` took the same step
//! (rescale by k, SPLADE pooling, InfoNCE + FLOPS with λ warm-up, global-norm clipping, AdamW)
//! on the tiny BERT and ModernBERT fixtures, with lsr's former options, with naver/splade's
//! (variant `naver`) and with distillation (`margin-mse`, `kl-div`), and saved the loss terms
//! and every updated weight. `scripts/fixtures/distillation.py` computed the distillation losses
//! and their gradients alone ([`distillation_deviations`]).
//! [`step_deviation`] takes that step on any device and says how far it lands; the parity test
//! and `lsr check` read it.

use std::path::Path;

use burn::prelude::*;
use lsr_backbone::{Backbone, RescaleMode, Scale, TokenBatch, parameter_values};
use lsr_compute::Precision;
use safetensors::SafeTensors;

use crate::data::TrainBatch;
use crate::error::{Result, TrainError};
use crate::{Recipe, Trainer};

/// A fixture tensor: its shape and its values as f64.
type FixtureTensor = (Vec<usize>, Vec<f64>);

/// The logged values of the step, in the order the fixture's `scalars` holds them.
pub const STEP_SCALARS: [&str; 5] = ["loss", "ranking", "flops_q", "flops_d", "grad_norm"];

#[derive(Clone, Debug, serde::Serialize)]
pub struct StepDeviation {
    /// `(name, ours, PyTorch's)` for each of [`STEP_SCALARS`].
    pub scalars: Vec<(String, f64, f64)>,
    /// Largest |Δ| of any updated weight, over every parameter of the model.
    pub max_param_abs: f64,
    /// The parameter where it is.
    pub worst_param: String,
    pub params_compared: usize,
    /// Parameters the checkpoint names: every one must have been compared.
    pub params_named: usize,
    /// `‖θ_ours − θ_PyTorch‖ / ‖θ_PyTorch − θ_0‖` over every weight: how far our update is from
    /// PyTorch's, relative to the update itself. Scale-free, where a single weight whose tiny
    /// gradient changed sign can dominate `max_param_abs` under reduced precision.
    pub update_rel_l2: f64,
}

impl StepDeviation {
    /// Largest |Δ| of a logged value relative to `max(1, |PyTorch's|)`.
    pub fn max_scalar_rel(&self) -> f64 {
        self.scalars
            .iter()
            .map(|(_, ours, theirs)| (ours - theirs).abs() / theirs.abs().max(1.0))
            .fold(0.0, |m, d| if d.is_nan() { f64::NAN } else { m.max(d) })
    }
}

/// Takes the fixture's step for `family` (`bert` or `modernbert`) and `variant` (`None`, or
/// `naver`, `margin-mse`, `kl-div`) from the fixtures under `root` on `device` (an autodiff device), computing in
/// `precision` (PyTorch's step is f32, in eval mode: without dropout).
pub fn step_deviation(
    root: &Path,
    family: &str,
    variant: Option<&str>,
    device: &Device,
    precision: Precision,
) -> Result<StepDeviation> {
    let dir = root.join("train-step");
    let (k, recipe) = fixture_recipe(&dir.join("recipe.json"), variant)?;
    let name = variant.map_or(family.to_string(), |v| format!("{family}-{v}"));
    let fixture = dir.join(format!("{name}.safetensors"));
    let bytes = std::fs::read(&fixture).map_err(|e| TrainError::io(&fixture, e))?;
    let expected = SafeTensors::deserialize(&bytes)
        .map_err(|e| TrainError::data(&fixture, None, e.to_string()))?;
    let tensor =
        |name: &str| values(&expected, name).map_err(|m| TrainError::data(&fixture, None, m));

    let spec = root.join(family);
    let backbone = Backbone::load_with_dropout(spec.to_str().unwrap_or(family), device, 64, false)?;
    let model = backbone.model.rescale_mlm_head(k, RescaleMode::Shared)?;
    let recipe = Recipe {
        precision,
        ..recipe
    };
    let initial: std::collections::HashMap<String, Vec<f32>> =
        hf_parameters(&model, &backbone.tensor_names)
            .map(|(name, data)| (name, f32_values(data)))
            .collect();
    let mut trainer = Trainer::new(model, recipe);
    let teacher = match expected.names().contains(&"teacher") {
        true => Some(tensor("teacher")?.1.iter().map(|&v| v as f32).collect()),
        false => None,
    };
    let batch = TrainBatch {
        index: 0,
        queries: token_batch(&tensor, "query")?,
        documents: token_batch(&tensor, "document")?,
        teacher,
    };
    let metrics = trainer.step(&[batch], true);

    let (_, theirs) = tensor("scalars")?;
    let ours = [
        metrics.loss,
        metrics.ranking_loss,
        metrics.flops_q,
        metrics.flops_d,
        metrics.grad_norm,
    ];
    let scalars = STEP_SCALARS
        .iter()
        .zip(ours)
        .zip(theirs)
        .map(|((name, ours), theirs)| (name.to_string(), ours, theirs))
        .collect();

    let mut deviation = StepDeviation {
        scalars,
        max_param_abs: 0.0,
        worst_param: String::new(),
        params_compared: 0,
        params_named: initial.len(),
        update_rel_l2: f64::NAN,
    };
    let trained = hf_parameters(&trainer.model, &backbone.tensor_names).map(|(name, data)| {
        let before = &initial[&name];
        (name, data, before)
    });
    compare_parameters(&mut deviation, trained, &tensor)?;
    Ok(deviation)
}

/// `model`'s parameters under their Hugging Face names, as PyTorch holds them (a fused
/// projection in its parts).
fn hf_parameters(
    model: &lsr_backbone::MaskedLm,
    names: &lsr_backbone::TensorNames,
) -> impl Iterator<Item = (String, burn::tensor::TensorData)> {
    (parameter_values(model, names).into_iter()).flat_map(|(path, data)| {
        names
            .get(&path)
            .expect("every parameter is named")
            .split(data)
    })
}

/// Each trained parameter `(HF name, values, values before the step)` against PyTorch's: the
/// largest |Δ| and where, and how far off the update is (relative L2).
fn compare_parameters<'a>(
    deviation: &mut StepDeviation,
    trained: impl Iterator<Item = (String, burn::tensor::TensorData, &'a Vec<f32>)>,
    tensor: &dyn Fn(&str) -> Result<FixtureTensor>,
) -> Result<()> {
    let (mut off, mut update) = (0.0f64, 0.0f64);
    for (name, data, initial) in trained {
        let (shape, want) = tensor(&format!("param.{name}"))?;
        let same_shape = data.shape().to_vec() == shape;
        let got = f32_values(data);
        for ((ours, theirs), before) in got.iter().zip(&want).zip(initial) {
            off += (*ours as f64 - theirs).powi(2);
            update += (theirs - *before as f64).powi(2);
        }
        let diff = if !same_shape {
            f64::INFINITY
        } else {
            got.iter()
                .zip(&want)
                .map(|(a, b)| (*a as f64 - b).abs())
                .fold(0.0, |m, d| if d.is_nan() { f64::NAN } else { m.max(d) })
        };
        if diff.is_nan() || diff > deviation.max_param_abs {
            deviation.max_param_abs = diff;
            deviation.worst_param = name;
        }
        deviation.params_compared += 1;
    }
    deviation.update_rel_l2 = off.sqrt() / update.sqrt();
    Ok(())
}

fn f32_values(data: burn::tensor::TensorData) -> Vec<f32> {
    data.convert::<f32>().try_into_vec().expect("f32 parameter")
}

/// Bounds for a bf16-mixed step, `(loss terms relative, update relative L2)`: twice the
/// larger of the two families' deviations of PyTorch's own bf16 autocast step from its f32 step
/// (`train-step/bf16-autocast.json`, `scripts/fixtures/train_step.py --bf16-yardstick`). Single
/// numbers from one step are noisy, so the larger family's stands for both.
pub fn bf16_step_bounds(root: &Path) -> Result<(f64, f64)> {
    #[derive(serde::Deserialize)]
    struct Deviation {
        scalars_rel: f64,
        update_rel_l2: f64,
    }
    #[derive(serde::Deserialize)]
    struct Yardstick {
        families: std::collections::HashMap<String, Deviation>,
    }
    let path = root.join("train-step").join("bf16-autocast.json");
    let text = std::fs::read(&path).map_err(|e| TrainError::io(&path, e))?;
    let yardstick: Yardstick =
        serde_json::from_slice(&text).map_err(|e| TrainError::data(&path, None, e.to_string()))?;
    let largest = |f: fn(&Deviation) -> f64| yardstick.families.values().map(f).fold(0.0, f64::max);
    Ok((
        2.0 * largest(|d| d.scalars_rel),
        2.0 * largest(|d| d.update_rel_l2),
    ))
}

/// The fixture's k and recipe (a batch of 3 queries, one hard negative each unless the variant
/// says, no dropout):
/// `recipe.json`'s fields, which carry the recipe's names, with the variant's on top.
fn fixture_recipe(path: &Path, variant: Option<&str>) -> Result<(Scale, Recipe)> {
    let text = std::fs::read(path).map_err(|e| TrainError::io(path, e))?;
    let invalid = |message: String| TrainError::data(path, None, message);
    let mut fields: serde_json::Map<String, serde_json::Value> =
        serde_json::from_slice(&text).map_err(|e| invalid(e.to_string()))?;
    let k = fields.remove("k").unwrap_or_default();
    let k = serde_json::from_value(k).map_err(|e| invalid(format!("`k`: {e}")))?;
    let variants = fields.remove("variants").unwrap_or_default();
    if let Some(name) = variant {
        let overrides = variants[name].as_object().cloned();
        fields.extend(overrides.ok_or_else(|| invalid(format!("no variant `{name}`")))?);
    }
    fields.insert("batch_size".into(), 3.into());
    fields.entry("negatives").or_insert(1.into());
    fields.insert("dropout".into(), false.into());
    let recipe = serde_json::from_value(fields.into()).map_err(|e| invalid(e.to_string()))?;
    Ok((k, recipe))
}

fn token_batch(tensor: &dyn Fn(&str) -> Result<FixtureTensor>, prefix: &str) -> Result<TokenBatch> {
    let (shape, ids) = tensor(&format!("{prefix}_ids"))?;
    let (_, mask) = tensor(&format!("{prefix}_mask"))?;
    Ok(TokenBatch {
        ids: ids.iter().map(|&v| v as u32).collect(),
        mask: mask.iter().map(|&v| v as u32).collect(),
        batch: shape[0],
        len: shape[1],
    })
}

/// A fixture tensor as f64 values with its shape.
fn values(tensors: &SafeTensors, name: &str) -> std::result::Result<FixtureTensor, String> {
    let view = tensors
        .tensor(name)
        .map_err(|_| format!("no tensor `{name}`"))?;
    let bytes = view.data();
    let values = match view.dtype() {
        safetensors::Dtype::F32 => bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap()) as f64)
            .collect(),
        safetensors::Dtype::F64 => bytes
            .chunks_exact(8)
            .map(|b| f64::from_le_bytes(b.try_into().unwrap()))
            .collect(),
        safetensors::Dtype::I64 => bytes
            .chunks_exact(8)
            .map(|b| i64::from_le_bytes(b.try_into().unwrap()) as f64)
            .collect(),
        other => {
            return Err(format!(
                "`{name}` has dtype {other:?}, expected F32, F64 or I64"
            ));
        }
    };
    Ok((view.shape().to_vec(), values))
}

/// One distillation case of `distillation/` (`scripts/fixtures/distillation.py`): our loss and
/// its gradients against the anchors' (naver/splade's formulas, sentence-transformers' losses).
#[derive(Clone, Debug, serde::Serialize)]
pub struct LossDeviation {
    pub case: String,
    /// Ours, and the anchors'.
    pub loss: (f64, f64),
    /// Largest |Δ| of the gradient with respect to any query or document weight.
    pub max_grad_abs: f64,
    /// Largest |gradient| of the anchors', to put it in scale.
    pub max_grad: f64,
}

/// Every case of the distillation fixture, computed on `device` (an autodiff device).
pub fn distillation_deviations(root: &Path, device: &Device) -> Result<Vec<LossDeviation>> {
    let dir = root.join("distillation");
    let fixture = dir.join("losses.safetensors");
    let bytes = std::fs::read(&fixture).map_err(|e| TrainError::io(&fixture, e))?;
    let expected = SafeTensors::deserialize(&bytes)
        .map_err(|e| TrainError::data(&fixture, None, e.to_string()))?;
    let tensor =
        |name: &str| values(&expected, name).map_err(|m| TrainError::data(&fixture, None, m));
    let on_device = |(shape, values): FixtureTensor| -> Tensor<2> {
        let values: Vec<f32> = values.iter().map(|&v| v as f32).collect();
        Tensor::from_data(TensorData::new(values, [shape[0], shape[1]]), device)
    };
    let (queries, documents) = (tensor("queries")?, tensor("documents")?);
    let teacher = on_device(tensor("teacher")?);
    let cases_path = dir.join("cases.json");
    let text = std::fs::read(&cases_path).map_err(|e| TrainError::io(&cases_path, e))?;
    let cases: std::collections::BTreeMap<String, serde_json::Map<String, serde_json::Value>> =
        serde_json::from_slice(&text)
            .map_err(|e| TrainError::data(&cases_path, None, e.to_string()))?;
    let mut deviations = Vec::new();
    for (case, fields) in cases {
        let recipe: Recipe = serde_json::from_value(fields.into())
            .map_err(|e| TrainError::data(&cases_path, None, format!("{case}: {e}")))?;
        let q = on_device(queries.clone()).require_grad();
        let d = on_device(documents.clone()).require_grad();
        let [batch, width] = teacher.dims();
        let n = recipe.negatives;
        let used = own_negatives(d.clone(), batch, width - 1, n);
        let terms = crate::splade_loss(
            q.clone(),
            used,
            Some(teacher.clone().slice_dim(1, 0..1 + n)),
            &recipe,
            (0.0, 0.0),
        );
        let ours = terms.total.clone().into_scalar::<f32>().to_f64();
        let gradients = terms.total.backward();
        let (_, theirs) = tensor(&format!("{case}.loss"))?;
        let (mut max_grad_abs, mut max_grad) = (0.0f64, 0.0f64);
        for (leaf, name) in [(&q, "grad_queries"), (&d, "grad_documents")] {
            let got: Vec<f32> = leaf
                .grad(&gradients)
                .map(|g| g.into_data().convert::<f32>().try_into_vec().expect("f32"))
                .unwrap_or_default();
            let (_, want) = tensor(&format!("{case}.{name}"))?;
            if got.len() != want.len() {
                max_grad_abs = f64::INFINITY;
            }
            for (a, b) in got.iter().zip(&want) {
                max_grad_abs = max_grad_abs.max((*a as f64 - b).abs());
                max_grad = max_grad.max(b.abs());
            }
        }
        deviations.push(LossDeviation {
            case,
            loss: (ours, theirs[0]),
            max_grad_abs,
            max_grad,
        });
    }
    Ok(deviations)
}

/// The documents a recipe with `n` negatives sees of a fixture laid out with `all` per query:
/// the positives, then each query's first `n` negatives.
fn own_negatives(documents: Tensor<2>, batch: usize, all: usize, n: usize) -> Tensor<2> {
    let vocab = documents.dims()[1];
    let positives = documents.clone().slice_dim(0, 0..batch);
    let negatives = documents
        .slice_dim(0, batch..batch * (1 + all))
        .reshape([batch, all, vocab])
        .slice_dim(1, 0..n)
        .reshape([batch * n, vocab]);
    Tensor::cat(vec![positives, negatives], 0)
}
