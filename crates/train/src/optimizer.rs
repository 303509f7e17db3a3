//! AdamW over flat buffers: the model's parameters are slices of f32 tensors (the masters; one on
//! a GPU, buffers of a few MiB on the host), a step gathers the gradients into as many more, and
//! burn's AdamW (as `lsr_compute::adamw` computes it: one pass on flex) updates each, where a
//! per-parameter optimiser launched a few kernels for each of ~200 tensors.
//! The checkpoint record stays burn's per-parameter one (`ModuleOptimizer`'s burnpack: tensors
//! `{id}.momentum.moment_1|2`, scalars `{id}.__rank`, `{id}.momentum.time`, metadata `{id}` →
//! module path), so checkpoints written before the flat buffer resume, and the other way round.

use std::collections::BTreeMap;
use std::path::Path;

use burn::module::{Module, ModuleMapper, ModuleVisitor, Param, ParamId};
use burn::optim::{AdamWState, AdaptiveMomentumState};
use burn::prelude::*;
use burn::tensor::{DType, Gradients, TensorData};
use burn_pack::{Reader, Scalar, Writer};
use lsr_backbone::MaskedLm;
use lsr_compute::adamw::{AdamWStep, adamw};
use lsr_compute::launches::DeviceLimits;
use lsr_compute::precision::Copies;

use crate::config::Recipe;
use crate::error::{Result, TrainError};
use crate::legacy::{self, Joined};

/// On the host, the elements each parameter's slice starts on, and the master's length a
/// multiple of (1 KiB of f32). On a GPU it is the device's buffer-offset alignment (512 bytes on
/// CUDA, 256 or less on Vulkan) in elements of the compute dtype: burn's cube backends copy a
/// slice whose start or end is not aligned, where an aligned one is a view of the master (or, in
/// bf16-mixed, of its cast); no more, since each parameter whose length is not a multiple is
/// followed by zeros that gathering its gradient concatenates too.
const HOST_ALIGN: usize = 256;

/// Pieces (a gradient, or the zeros that pad it) per concatenation: with its output and its
/// metadata within the 31 storage buffers a kernel may bind on Mesa's software Vulkan, the fewest
/// of the devices lsr runs on. Counted there: 29 pieces still fuse, 30 send the concatenation to
/// a slice-assign per piece (240 launches); 28 keep a buffer spare and give the same count (the
/// gradient norm 15 launches in the bench's step, 17 with 24).
const GROUP: usize = 28;

/// On the host, a buffer holds at most this many elements (16 MiB of f32; a larger parameter has
/// one of its own). AdamW's temporaries then stay under glibc's mmap threshold (32 MiB), reused
/// rather than faulted in fresh, and in cache: one buffer of the whole model (110M elements for
/// BERT-base) made each of its dozen operations fault in and stream 440 MB, and the flex step
/// 1.1-1.3x slower than per parameter. On a GPU one buffer, each operation one launch.
const HOST_BUFFER: usize = 4 << 20;

/// AdamW's step `time` at learning rate `lr`, every hyperparameter from the recipe (burn's own
/// defaults differ from PyTorch's: eps 1e-5, weight decay 1e-4). Decay applies to every
/// parameter, as in naver/splade; no AMSGrad, no cautious decay, no clipping here (the trainer
/// clips the flat gradient).
fn adamw_step(recipe: &Recipe, lr: f64, time: usize) -> AdamWStep {
    AdamWStep {
        beta_1: recipe.beta1 as f32,
        beta_2: recipe.beta2 as f32,
        epsilon: recipe.eps as f32,
        time: i32::try_from(time).expect("fewer than 2^31 steps"),
        lr,
        weight_decay: recipe.weight_decay as f32,
    }
}

/// One parameter's place in the flat buffer.
#[derive(Clone, Debug)]
struct Slot {
    id: ParamId,
    /// The module path, as burn's `ModuleOptimizer` records it (`encoder.Bert.layers.0.key.weight`).
    path: String,
    shape: Vec<usize>,
    /// Its buffer, and where it starts in it.
    buffer: usize,
    offset: usize,
    len: usize,
    /// Zeros after it, up to the next aligned offset.
    padding: usize,
}

/// The trainable parameters of a model in module order, each at an aligned offset of its buffer.
#[derive(Clone, Debug)]
struct Layout {
    slots: Vec<Slot>,
    /// Each buffer's length.
    buffers: Vec<usize>,
}

impl Layout {
    /// Buffers of at most `cap` elements (but for a larger parameter, alone in its own), each
    /// parameter starting on a multiple of `align` elements.
    fn of(model: &MaskedLm, cap: usize, align: usize) -> Self {
        struct Walk {
            path: Vec<String>,
            slots: Vec<Slot>,
            buffers: Vec<usize>,
            cap: usize,
            align: usize,
        }
        impl ModuleVisitor for Walk {
            fn enter_module(&mut self, name: &str, _: &str) {
                self.path.push(name.to_string());
            }
            fn exit_module(&mut self, _: &str, _: &str) {
                self.path.pop();
            }
            fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
                if !param.is_require_grad() {
                    return;
                }
                let shape = param.shape().to_vec();
                let len: usize = shape.iter().product();
                let room = len.next_multiple_of(self.align);
                match self.buffers.last_mut() {
                    Some(total) if *total + room <= self.cap => {}
                    _ => self.buffers.push(0),
                }
                let buffer = self.buffers.len() - 1;
                self.slots.push(Slot {
                    id: param.id,
                    path: self.path.join("."),
                    shape,
                    buffer,
                    offset: self.buffers[buffer],
                    len,
                    padding: room - len,
                });
                self.buffers[buffer] += room;
            }
        }
        let mut walk = Walk {
            path: Vec::new(),
            slots: Vec::new(),
            buffers: Vec::new(),
            cap,
            align,
        };
        model.visit(&mut walk);
        Self {
            slots: walk.slots,
            buffers: walk.buffers,
        }
    }

    /// The slots of buffer `buffer`.
    fn slots_of(&self, buffer: usize) -> impl Iterator<Item = &Slot> {
        self.slots.iter().filter(move |slot| slot.buffer == buffer)
    }

    /// One flat tensor per buffer of `parts` (one per slot, in slot order, flattened), zero
    /// between them.
    fn gather(&self, parts: Vec<Tensor<1>>, device: &Device) -> Vec<Tensor<1>> {
        let parts = parts.into_iter().map(Some).collect();
        let gathered = self.gather_some(parts, DType::F32, device);
        gathered
            .into_iter()
            .map(|b| b.expect("every slot"))
            .collect()
    }

    /// [`Self::gather`] of the parts that are there, in `dtype`, zeros in the place of the rest;
    /// `None` for a buffer none of whose parts is there.
    fn gather_some(
        &self,
        parts: Vec<Option<Tensor<1>>>,
        dtype: DType,
        device: &Device,
    ) -> Vec<Option<Tensor<1>>> {
        // Each run of missing parts (with their padding) is one view of the start of one tensor
        // of zeros, a multiple of the alignment long: no kernel of its own, one piece to join.
        let mut runs: Vec<Vec<Result<Tensor<1>, usize>>> = vec![Vec::new(); self.buffers.len()];
        for (slot, part) in self.slots.iter().zip(parts) {
            let buffer = &mut runs[slot.buffer];
            match (part, buffer.last_mut()) {
                (Some(part), _) => {
                    buffer.push(Ok(part));
                    if slot.padding > 0 {
                        buffer.push(Ok(Tensor::zeros([slot.padding], (device, dtype))));
                    }
                }
                (None, Some(Err(run))) => *run += slot.len + slot.padding,
                (None, _) => buffer.push(Err(slot.len + slot.padding)),
            }
        }
        // A buffer none of whose parts is there is left out whole.
        let runs: Vec<Option<_>> = (runs.into_iter())
            .map(|buffer| buffer.iter().any(Result::is_ok).then_some(buffer))
            .collect();
        let longest = (runs.iter().flatten().flatten())
            .filter_map(|piece| piece.as_ref().err())
            .max();
        let zero = longest.map(|&len| Tensor::<1>::zeros([len], (device, dtype)));
        let concatenate = |buffer: Vec<Result<Tensor<1>, usize>>| {
            let pieces: Vec<Tensor<1>> = (buffer.into_iter())
                .map(|piece| {
                    piece.unwrap_or_else(|len| zero.clone().expect("sized above").slice([0..len]))
                })
                .collect();
            let groups: Vec<Tensor<1>> = pieces
                .chunks(GROUP)
                .map(|group| Tensor::cat(group.to_vec(), 0))
                .collect();
            Tensor::cat(groups, 0)
        };
        runs.into_iter()
            .map(|buffer| buffer.map(concatenate))
            .collect()
    }

    /// Each slot's gradient taken out of `gradients`, flattened, in slot order; `None` for a
    /// parameter the loss did not use.
    fn gradients(&self, model: &MaskedLm, gradients: &mut Gradients) -> Vec<Option<Tensor<1>>> {
        struct Take<'a> {
            gradients: &'a mut Gradients,
            found: BTreeMap<ParamId, Tensor<1>>,
        }
        impl ModuleVisitor for Take<'_> {
            fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
                if let Some(gradient) = param.val().grad_remove(self.gradients) {
                    let len = gradient.shape().num_elements();
                    self.found.insert(param.id, gradient.reshape([len]));
                }
            }
        }
        let mut take = Take {
            gradients,
            found: BTreeMap::new(),
        };
        model.visit(&mut take);
        (self.slots.iter())
            .map(|slot| take.found.remove(&slot.id))
            .collect()
    }

    /// The model's trainable parameters, flattened, in slot order, without autodiff.
    fn parameters(&self, model: &MaskedLm) -> Vec<Tensor<1>> {
        struct Values(BTreeMap<ParamId, Tensor<1>>);
        impl ModuleVisitor for Values {
            fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
                let value = param.val().inner();
                let len = value.shape().num_elements();
                self.0.insert(param.id, value.reshape([len]));
            }
        }
        let mut values = Values(BTreeMap::new());
        model.visit(&mut values);
        let take = |slot: &Slot| values.0.remove(&slot.id).expect("a slot of this model");
        self.slots.iter().map(take).collect()
    }
}

/// Makes each trainable parameter of a model the view of its slice of its buffer's master,
/// keeping its autodiff settings.
struct Views<'a> {
    masters: &'a [Tensor<1>],
    slots: BTreeMap<ParamId, &'a Slot>,
}

impl ModuleMapper for Views<'_> {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        let Some(slot) = self.slots.get(&param.id) else {
            return param;
        };
        let (id, tensor, mapper) = param.consume();
        let shape: [usize; D] = slot.shape.clone().try_into().expect("the slot's rank");
        let view = (self.masters[slot.buffer].clone())
            .slice([slot.offset..slot.offset + slot.len])
            .reshape(shape);
        let mut value = Tensor::from_inner(view);
        if let Some(strategy) = tensor.gradient_checkpointing_strategy() {
            value = value.with_gradient_checkpointing_strategy(strategy);
        }
        if tensor.is_require_grad() {
            value = value.require_grad();
        }
        Param::from_mapped_value(id, value, mapper)
    }
}

/// The gradients of a model's trainable parameters, laid out as the optimiser's buffers.
pub struct FlatGradient {
    pub(crate) buffers: Vec<Tensor<1>>,
}

impl FlatGradient {
    /// The sum of two gradients of one model: a kernel per buffer, where adding them parameter
    /// by parameter launched one per parameter.
    pub fn add(self, other: Self) -> Self {
        let buffers = (self.buffers.into_iter().zip(other.buffers))
            .map(|(a, b)| a + b)
            .collect();
        Self { buffers }
    }

    /// The sum of the squares of every element, as a one-element tensor.
    pub fn square_sum(&self) -> Tensor<1> {
        let mut sums: Vec<Tensor<1>> = self
            .buffers
            .iter()
            .map(|b| b.clone().square().sum())
            .collect();
        match sums.len() {
            1 => sums.remove(0),
            _ => Tensor::cat(sums, 0).sum(),
        }
    }

    /// Every element times `factor`.
    pub fn mul_scalar(self, factor: f64) -> Self {
        let buffers = self
            .buffers
            .into_iter()
            .map(|b| b.mul_scalar(factor))
            .collect();
        Self { buffers }
    }
}

/// AdamW whose parameters, gradients and moments are flat buffers.
pub struct FlatAdamW {
    recipe: Recipe,
    layout: Layout,
    /// The parameters, whose slices the model's parameters are: one tensor per buffer.
    masters: Vec<Tensor<1>>,
    /// Each buffer's moments; none before the first step.
    states: Vec<Option<AdamWState<1>>>,
}

impl FlatAdamW {
    /// Takes over `model`'s trainable parameters: returns the optimiser and the model with each
    /// of them a view of its buffer's master.
    pub fn adopt(model: MaskedLm, recipe: &Recipe) -> (Self, MaskedLm) {
        let device = model.device();
        // Aligned for the compute dtype too: the slices of the master's cast ([`Self::copies`]).
        let unit = recipe.precision.compute().size();
        let (cap, align) = match DeviceLimits::of(&device) {
            Some(gpu) => (usize::MAX, (gpu.buffer_alignment as usize / unit).max(1)),
            None => (HOST_BUFFER, HOST_ALIGN),
        };
        let layout = Layout::of(&model, cap, align);
        let masters = layout.gather(layout.parameters(&model), &device.inner());
        let optimizer = Self {
            recipe: recipe.clone(),
            states: masters.iter().map(|_| None).collect(),
            layout,
            masters,
        };
        let model = optimizer.views(model);
        (optimizer, model)
    }

    fn views(&self, model: MaskedLm) -> MaskedLm {
        model.map(&mut Views {
            masters: &self.masters,
            slots: self.layout.slots.iter().map(|s| (s.id, s)).collect(),
        })
    }

    /// The gradients of `model`'s trainable parameters taken out of `gradients`, laid out as the
    /// masters. With `copies` (the compute-dtype copies the pass used, tracked), a parameter's
    /// gradient adds its copy's, cast to f32: the copies' gradients gathered in their dtype and
    /// each buffer cast once, where a cast per parameter launched a kernel each.
    pub fn flat_gradient(
        &self,
        model: &MaskedLm,
        mut gradients: Gradients,
        copies: Option<&Copies>,
    ) -> FlatGradient {
        let own = self.layout.gradients(model, &mut gradients);
        let mut copied = copies.map(|copies| copies.take_gradients(&mut gradients));
        let dtype = copies.map_or(DType::F32, Copies::dtype);
        let copied: Vec<Option<Tensor<1>>> = (self.layout.slots.iter())
            .map(|slot| copied.as_mut().and_then(|c| c.remove(&slot.id)))
            .collect();
        for ((slot, own), copied) in self.layout.slots.iter().zip(&own).zip(&copied) {
            assert!(
                own.is_some() || copied.is_some(),
                "parameter {} has no gradient: every trainable parameter must take part in the \
                 loss for the flat AdamW",
                slot.path
            );
        }
        let Some(device) = self.masters.first().map(Tensor::device) else {
            return FlatGradient {
                buffers: Vec::new(),
            };
        };
        let own = self.layout.gather_some(own, DType::F32, &device);
        let copied = self.layout.gather_some(copied, dtype, &device);
        let buffers = (own.into_iter().zip(copied))
            .map(|pair| match pair {
                (Some(own), Some(copied)) => own + copied.cast(DType::F32),
                (Some(own), None) => own,
                (None, Some(copied)) => copied.cast(DType::F32),
                (None, None) => unreachable!("every parameter has a gradient"),
            })
            .collect();
        FlatGradient { buffers }
    }

    /// The trainable parameters in `dtype`: each master cast once, each parameter its slice (a
    /// view where the device's alignment allows, as [`Self::adopt`] lays them out). A step
    /// makes them once for all its micro-batches, where a cast at each parameter's first use
    /// launched one kernel per parameter and micro-batch.
    pub fn copies(&self, dtype: DType) -> Copies {
        let cast: Vec<Tensor<1>> = (self.masters.iter())
            .map(|master| master.clone().cast(dtype))
            .collect();
        let copies = (self.layout.slots.iter())
            .map(|slot| {
                let slice =
                    (cast[slot.buffer].clone()).slice([slot.offset..slot.offset + slot.len]);
                (slot.id, Tensor::from_inner(slice))
            })
            .collect();
        Copies::new(dtype, copies)
    }

    /// One AdamW step with learning rate `lr` and `gradient`; returns the model with its
    /// parameters the views of the new masters.
    pub fn step(&mut self, lr: f64, model: MaskedLm, gradient: FlatGradient) -> MaskedLm {
        let buffers = self
            .masters
            .drain(..)
            .zip(gradient.buffers)
            .zip(&mut self.states);
        let stepped: Vec<Tensor<1>> = buffers
            .map(|((master, gradient), state)| {
                let moments = state.take().map(|s| s.momentum);
                let time = moments.as_ref().map_or(1, |m| m.time + 1);
                let moments = moments.map(|m| (m.moment_1, m.moment_2));
                let step = adamw_step(&self.recipe, lr, time);
                let (master, moment_1, moment_2) = adamw(master, gradient, moments, step);
                let momentum = AdaptiveMomentumState::new(time, moment_1, moment_2);
                *state = Some(AdamWState::new(momentum));
                master
            })
            .collect();
        self.masters = stepped;
        self.views(model)
    }

    /// Writes the moments as burn's `ModuleOptimizer` records them, one entry per parameter.
    pub fn save(&self, path: &Path) -> Result<()> {
        let error = |e: burn_pack::Error| TrainError::checkpoint(path, e.to_string());
        let mut tensors = Vec::new();
        let mut writer_scalars = Vec::new();
        for (buffer, state) in self.states.iter().enumerate() {
            let Some(state) = state else { continue };
            let moments = [&state.momentum.moment_1, &state.momentum.moment_2]
                .map(|m| m.to_data().try_into_vec::<f32>().expect("f32 moments"));
            for slot in self.layout.slots_of(buffer) {
                let id = slot.id.val();
                for (field, moment) in ["moment_1", "moment_2"].iter().zip(&moments) {
                    let values = &moment[slot.offset..slot.offset + slot.len];
                    let data = TensorData::new(values.to_vec(), slot.shape.clone());
                    let (bytes, shape, dtype) = data.into_parts();
                    let name = format!("{id}.momentum.{field}");
                    tensors.push(burn_pack::Tensor::new(name, dtype, shape, Some(id), bytes));
                }
                writer_scalars.push((format!("{id}.__rank"), Scalar::from(slot.shape.len())));
                writer_scalars.push((
                    format!("{id}.momentum.time"),
                    Scalar::from(state.momentum.time),
                ));
            }
        }
        let mut writer = Writer::new(tensors).auto_extension(false);
        for (key, value) in &writer_scalars {
            writer = writer.with_scalar(key, *value);
        }
        if self.states.iter().any(Option::is_some) {
            for slot in &self.layout.slots {
                writer = writer.with_metadata(&slot.id.val().to_string(), &slot.path);
            }
        }
        writer.write_to_file(path).map_err(error)
    }

    /// Restores the moments written by [`save`](Self::save) (or by burn's `ModuleOptimizer`, as
    /// checkpoints before the flat buffer were) for `model` as loaded from the same checkpoint,
    /// whose parameters carry the ids the record names; returns the model with its parameters
    /// views of the master.
    /// `joined`: the parameters the model's record held in parts (`legacy`), whose moments are
    /// joined the same way.
    pub fn load(
        path: &Path,
        model: MaskedLm,
        recipe: &Recipe,
        joined: &[Joined],
    ) -> Result<(Self, MaskedLm)> {
        let (mut optimizer, model) = Self::adopt(model, recipe);
        let mut record = Record::read(path)?;
        record.join(joined, path)?;
        optimizer.states = record.states(&optimizer.layout, &model.device().inner(), path)?;
        Ok((optimizer, model))
    }
}

/// A per-parameter AdamW record as read from its file.
struct Record {
    /// Per parameter id: its first and second moments.
    moments: BTreeMap<u64, [Option<TensorData>; 2]>,
    /// Per parameter id: its step count.
    times: BTreeMap<u64, usize>,
}

impl Record {
    fn read(path: &Path) -> Result<Self> {
        let error = |e: String| TrainError::checkpoint(path, e);
        let reader = Reader::from_file(path).map_err(|e| error(e.to_string()))?;
        let mut times = BTreeMap::new();
        for (key, value) in reader.scalars() {
            if let Some(id) = key.strip_suffix(".momentum.time") {
                let id = id
                    .parse()
                    .map_err(|_| error(format!("scalar {key}: no id")))?;
                let time = usize::try_from(*value)
                    .map_err(|_| error(format!("scalar {key}: not a step count")))?;
                times.insert(id, time);
            }
        }
        let mut moments: BTreeMap<u64, [Option<TensorData>; 2]> = BTreeMap::new();
        for tensor in reader.into_tensors().map_err(|e| error(e.to_string()))? {
            let (name, dtype, shape, id, bytes) =
                tensor.into_parts().map_err(|e| error(e.to_string()))?;
            let index = match name.rsplit_once(".momentum.") {
                Some((_, "moment_1")) => 0,
                Some((_, "moment_2")) => 1,
                _ => return Err(error(format!("tensor {name}: not an AdamW moment"))),
            };
            let id = id.ok_or_else(|| error(format!("tensor {name}: no parameter id")))?;
            if dtype != DType::F32 {
                return Err(error(format!("tensor {name}: {dtype:?}, expected F32")));
            }
            moments.entry(id).or_default()[index] =
                Some(TensorData::from_bytes(bytes, shape, dtype));
        }
        Ok(Self { moments, times })
    }

    /// Each of `joined`'s parts' moments and step counts as the fused parameter's.
    fn join(&mut self, joined: &[Joined], path: &Path) -> Result<()> {
        let error = |message: String| TrainError::checkpoint(path, message);
        for fused in joined {
            if !fused.parts.iter().all(|id| self.moments.contains_key(id)) {
                continue;
            }
            let parts = fused
                .parts
                .map(|id| self.moments.remove(&id).expect("checked"));
            let mut moments: [Option<TensorData>; 2] = [None, None];
            for (index, moment) in moments.iter_mut().enumerate() {
                let pieces: Option<Vec<TensorData>> =
                    parts.iter().map(|part| part[index].clone()).collect();
                if let Some(pieces) = pieces {
                    let whole = legacy::concat(&pieces, fused.dim).map_err(|e| {
                        error(format!("AdamW state of parameter {}: {e}", fused.id))
                    })?;
                    *moment = Some(whole);
                }
            }
            self.moments.insert(fused.id, moments);
            let times: Vec<Option<usize>> =
                fused.parts.iter().map(|id| self.times.remove(id)).collect();
            if let Some(Some(time)) = times.first()
                && times.iter().all(|t| *t == Some(*time))
            {
                self.times.insert(fused.id, *time);
            }
        }
        Ok(())
    }

    /// The state of each of `layout`'s buffers: every slot must have both moments, of its
    /// shape, and all the same step count (a record of no step at all is no state).
    fn states(
        mut self,
        layout: &Layout,
        device: &Device,
        path: &Path,
    ) -> Result<Vec<Option<AdamWState<1>>>> {
        if self.moments.is_empty() && self.times.is_empty() {
            return Ok(layout.buffers.iter().map(|_| None).collect());
        }
        let error = |message: String| TrainError::checkpoint(path, message);
        let mut flat: Vec<[Vec<f32>; 2]> = (layout.buffers.iter())
            .map(|&len| [vec![0f32; len], vec![0f32; len]])
            .collect();
        let mut time = None;
        for slot in &layout.slots {
            let id = slot.id.val();
            let missing = || {
                error(format!(
                    "no AdamW state for parameter {} (id {id})",
                    slot.path
                ))
            };
            let moments = self.moments.remove(&id).ok_or_else(missing)?;
            for (target, moment) in flat[slot.buffer].iter_mut().zip(moments) {
                let moment = moment.ok_or_else(missing)?;
                if moment.shape().as_slice() != slot.shape.as_slice() {
                    return Err(error(format!(
                        "AdamW state of {} has shape {:?}, the parameter {:?}",
                        slot.path,
                        moment.shape(),
                        slot.shape
                    )));
                }
                let values = moment.as_slice::<f32>().expect("checked F32");
                target[slot.offset..slot.offset + slot.len].copy_from_slice(values);
            }
            let this = self.times.get(&id).copied().ok_or_else(missing)?;
            if time.is_some_and(|t| t != this) {
                return Err(error(format!(
                    "parameter {} has taken {this} AdamW steps, others {}",
                    slot.path,
                    time.unwrap_or_default()
                )));
            }
            time = Some(this);
        }
        if let Some(id) = self.moments.keys().next() {
            return Err(error(format!(
                "AdamW state for parameter id {id}, which the model does not have"
            )));
        }
        let state = |[moment_1, moment_2]: [Vec<f32>; 2]| {
            let tensor = |values: Vec<f32>| {
                let len = values.len();
                Tensor::from_data(TensorData::new(values, [len]), device)
            };
            Some(AdamWState::new(AdaptiveMomentumState {
                time: time.unwrap_or_default(),
                moment_1: tensor(moment_1),
                moment_2: tensor(moment_2),
                max_moment_2: None,
            }))
        };
        Ok(flat.into_iter().map(state).collect())
    }
}
