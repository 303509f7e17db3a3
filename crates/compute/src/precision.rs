//! Mixed precision: the dtype a model computes its matrix products and activations in, while its
//! parameters, the residual stream, LayerNorm, softmax and everything after SPLADE pooling stay
//! f32 (as PyTorch's bf16 autocast leaves them). burn has no autocast and a matmul of mismatched
//! dtypes panics, so every layer runs its linear maps and residual additions through the helpers
//! here (attention widens its own scores: `layers::attend`), which cast operands to the compute
//! dtype; in f32 each cast is a no-op and the f32 path is the one the parity tests check.
//! Within [`casting_once`] a parameter is cast once, however often it is used (PyTorch's autocast
//! keeps the same cache of cast weights); within [`casting_from`] its copy is taken from
//! [`Copies`] made in one piece beforehand (a training step casts its flat master once).

use std::cell::RefCell;
use std::collections::HashMap;

use burn::module::{Param, ParamId};
use burn::nn::Linear;
use burn::prelude::*;
use burn::tensor::{DType, Gradients};

use crate::ComputeError;
use crate::matmul::matmul;
use crate::norm::{add_rows, add_same, row_vector};

/// A model's arithmetic: `f32`, `bf16-mixed` (bf16 matrix products and activations with f32
/// master weights, optimizer state, statistics, softmax and loss), or `bf16` (encoding on a CPU
/// with bf16 units: every product's operands, in linear maps, attention and the head, rounded to
/// bf16 inside a CPU BLAS product that accumulates and returns f32, everything else f32: flex's
/// element-wise bf16 arithmetic widens every element, which took more time than AMX saved).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Precision {
    #[default]
    F32,
    Bf16Mixed,
    Bf16,
}

impl Precision {
    pub const NAMES: [&'static str; 3] = ["f32", "bf16-mixed", "bf16"];

    /// The dtype of matrix products and the activations between them (`bf16` narrows inside
    /// the product alone: its activations are f32).
    pub fn compute(self) -> DType {
        match self {
            Self::F32 | Self::Bf16 => DType::F32,
            Self::Bf16Mixed => DType::BF16,
        }
    }

    pub fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }

    /// Whether a model in this precision computes on `device`: `bf16` needs the flex CPU
    /// device, its products through a CPU BLAS with a bf16 product (`LSR_MATMUL=blas|auto`),
    /// and a CPU with AVX512_BF16 or AMX, which that product is fast on.
    pub fn usable_on(self, device: &Device) -> crate::Result<()> {
        if self != Self::Bf16 {
            return Ok(());
        }
        let refuse = |why: String| Err(ComputeError::Setting(format!("--precision bf16: {why}")));
        if !has_bf16_units() {
            return refuse(
                "this CPU lacks AVX512_BF16 (and AMX), which make bf16 products pay; use f32"
                    .into(),
            );
        }
        match crate::matmul::products_route(device).map_err(ComputeError::Setting)? {
            crate::MatmulMode::Blas => {}
            _ => {
                return refuse(format!(
                    "{device:?}'s products do not go through a CPU BLAS; on the flex device set \
                     LSR_MATMUL=blas and LSR_BLAS (scripts/cpu/blas.sh onednn installs oneDNN), or use \
                     bf16-mixed on a GPU"
                ));
            }
        }
        let blas = crate::matmul::blas::library().map_err(ComputeError::Setting)?;
        match blas.computes(DType::BF16) {
            true => Ok(()),
            false => refuse(format!(
                "{} has no bf16 product; oneDNN and oneMKL have (scripts/cpu/blas.sh onednn|onemkl)",
                blas.path()
            )),
        }
    }
}

/// AVX512_BF16, detected at run time (every CPU with AMX has it too; AMX's own detection is not
/// stable Rust).
fn has_bf16_units() -> bool {
    #[cfg(target_arch = "x86_64")]
    return std::arch::is_x86_feature_detected!("avx512bf16");
    #[cfg(not(target_arch = "x86_64"))]
    false
}

impl std::str::FromStr for Precision {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match Self::NAMES.iter().position(|name| *name == s) {
            Some(index) => Ok([Self::F32, Self::Bf16Mixed, Self::Bf16][index]),
            None => Err(format!(
                "unknown precision `{s}`; expected {}",
                Self::NAMES.join(", ")
            )),
        }
    }
}

impl std::fmt::Display for Precision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

thread_local! {
    /// The parameters cast inside the outermost [`casting_once`] (flattened), by id and dtype.
    static CASTS: RefCell<Option<HashMap<(ParamId, DType), Tensor<1>>>> = const { RefCell::new(None) };
}

/// Runs `f` with each parameter cast to a compute dtype at its first use and that copy reused:
/// a training step encodes queries and documents with the same weights, and without the cache
/// each use cast every weight again (and the backward pass cast each use's gradient back). The
/// gradients of a parameter's uses add up in the compute dtype and are cast to f32 once, as
/// under PyTorch's autocast. A scope inside another shares the outer one's copies; they are
/// dropped when the outermost returns: they hold the graph, and are stale once the optimiser
/// steps.
pub fn casting_once<R>(f: impl FnOnce() -> R) -> R {
    struct Clear;
    impl Drop for Clear {
        fn drop(&mut self) {
            CASTS.with(|casts| casts.borrow_mut().take());
        }
    }
    let outermost = CASTS.with(|casts| {
        let mut casts = casts.borrow_mut();
        let outermost = casts.is_none();
        casts.get_or_insert_with(HashMap::new);
        outermost
    });
    let _clear = outermost.then(|| Clear);
    f()
}

/// Compute-dtype copies of parameters made in one piece (on a training step, one cast of the
/// optimiser's flat master), which [`casting_from`] uses in place of a cast at each parameter's
/// first use. A copy is a leaf of the graph of its own: the backward pass sums its uses'
/// gradient there, and [`Copies::take_gradients`] hands it to whoever adds it to the
/// parameter's.
#[derive(Clone)]
pub struct Copies {
    dtype: DType,
    copies: Vec<(ParamId, Tensor<1>)>,
}

impl Copies {
    /// `copies`: each parameter's values flattened, in `dtype`, untracked.
    pub fn new(dtype: DType, copies: Vec<(ParamId, Tensor<1>)>) -> Self {
        Self { dtype, copies }
    }

    /// The dtype the copies are in.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The same values as leaves whose gradients a backward pass keeps: for a pass with the
    /// graph.
    pub fn tracked(&self) -> Self {
        let copies = (self.copies.iter())
            .map(|(id, copy)| (*id, copy.clone().require_grad()))
            .collect();
        Self::new(self.dtype, copies)
    }

    /// Each copy's gradient, taken out of `gradients`: the sum of its uses', in the compute
    /// dtype, flattened, by parameter. What it adds to its parameter's (the gradient of the
    /// parameter's f32 uses, if any) is the cast to the parameter's dtype, as the backward pass
    /// of [`casting_once`]'s cast would give; a training step casts them gathered, at once.
    pub fn take_gradients(&self, gradients: &mut Gradients) -> HashMap<ParamId, Tensor<1>> {
        (self.copies.iter())
            .filter_map(|(id, copy)| Some((*id, copy.grad_remove(gradients)?)))
            .collect()
    }
}

/// Runs `f` as [`casting_once`] does, with `copies` standing in for the casts of their
/// parameters.
pub fn casting_from<R>(copies: &Copies, f: impl FnOnce() -> R) -> R {
    casting_once(|| {
        CASTS.with(|casts| {
            let mut casts = casts.borrow_mut();
            let casts = casts.as_mut().expect("casting_once's scope");
            for (id, copy) in &copies.copies {
                casts.insert((*id, copies.dtype), copy.clone());
            }
        });
        f()
    })
}

/// `param`'s value in `dtype`; inside [`casting_once`], the copy made at its first use.
pub fn param_in<const D: usize>(param: &Param<Tensor<D>>, dtype: DType) -> Tensor<D> {
    let value = param.val();
    if value.dtype() == dtype {
        return value;
    }
    let dims = value.dims();
    let cached = CASTS.with(|casts| {
        let mut casts = casts.borrow_mut();
        let casts = casts.as_mut()?;
        let len = value.shape().num_elements();
        let flat = (casts.entry((param.id, dtype)))
            .or_insert_with(|| value.clone().cast(dtype).reshape([len]));
        Some(flat.clone())
    });
    match cached {
        Some(flat) => flat.reshape(dims),
        None => value.cast(dtype),
    }
}

/// `x · W + b` in `dtype`: `x` and the f32 parameters cast to it. The result stays in `dtype`.
/// The leading dimensions fold into rows, so the product is one `[rows, d_in]` matrix times the
/// weight: burn keeps `[batch, len, d_in]` as a batched product, which on flex runs one
/// single-threaded GEMM per text, each packing the whole weight again. The bias is added with
/// [`add_rows`], whose gradient reduces in two short passes; its row is made before the product,
/// so that fusion adds it in the product's kernel.
pub fn linear<const D: usize>(layer: &Linear, x: Tensor<D>, dtype: DType) -> Tensor<D> {
    let mut dims = x.dims();
    let d_in = dims[D - 1];
    let rows = dims[..D - 1].iter().product::<usize>();
    let bias = (layer.bias.as_ref()).map(|bias| row_vector(param_in(bias, dtype), dtype));
    let y = matmul(
        x.cast(dtype).reshape([rows, d_in]),
        param_in(&layer.weight, dtype),
    );
    let y = match bias {
        Some(bias) => add_rows(y, bias),
        None => y,
    };
    dims[D - 1] = y.dims()[1];
    y.reshape(dims)
}

/// `x · Wᵀ` for a `[rows, dim]` matrix `w` held in PyTorch's layout, in `dtype`.
pub fn matmul_transposed(x: Tensor<2>, w: Tensor<2>, dtype: DType) -> Tensor<2> {
    matmul(x.cast(dtype), w.cast(dtype).transpose())
}

/// `residual + update` in f32: the residual stream keeps full precision between layers.
pub fn residual<const D: usize>(residual: Tensor<D>, update: Tensor<D>) -> Tensor<D> {
    add_same(residual, update.cast(DType::F32))
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::nn::LinearConfig;
    use itertools::Itertools;

    /// A 4 → 3 linear map on an autodiff flex device, and two rows for it.
    fn layer_and_input() -> (Linear, Tensor<2>) {
        let device = Device::flex().autodiff();
        let layer = LinearConfig::new(4, 3).init(&device);
        let x = Tensor::<2>::from_data(
            TensorData::new(vec![0.5f32, -1.0, 2.0, 0.25, 1.5, 0.0, -0.5, 1.0], [2, 4]),
            &device,
        );
        (layer, x)
    }

    #[test]
    fn linear_runs_in_the_compute_dtype_and_its_gradient_reaches_the_f32_weight() {
        let (layer, x) = layer_and_input();
        let exact = linear(&layer, x.clone(), DType::F32);
        let mixed = linear(&layer, x, DType::BF16);
        assert_eq!(mixed.dtype(), DType::BF16);
        let exact_values: Vec<f32> = exact.into_data().convert::<f32>().try_into_vec().unwrap();
        let mixed_values: Vec<f32> = mixed
            .clone()
            .into_data()
            .convert::<f32>()
            .try_into_vec()
            .unwrap();
        for (a, b) in exact_values.iter().zip_eq(&mixed_values) {
            // bf16 keeps 8 significant bits: operands and result each round by ≤ 2^-9.
            assert!((a - b).abs() <= 2e-2 * a.abs().max(1.0), "{a} vs {b}");
        }
        let gradients = mixed.cast(DType::F32).sum().backward();
        let gradient = layer.weight.grad(&gradients).expect("weight gradient");
        assert_eq!(gradient.dtype(), DType::F32);
        assert_eq!(layer.weight.val().dtype(), DType::F32);
    }

    fn cached() -> Option<usize> {
        CASTS.with(|casts| casts.borrow().as_ref().map(HashMap::len))
    }

    #[test]
    fn a_scope_casts_each_parameter_once_and_its_uses_gradients_reach_the_f32_parameter() {
        let device = Device::flex().autodiff();
        let layer = LinearConfig::new(4, 3).init(&device);
        let x = || {
            Tensor::<2>::from_data(
                TensorData::new(vec![0.5f32, -1.0, 2.0, 0.25, 1.5, 0.0, -0.5, 1.0], [2, 4]),
                &device,
            )
        };
        let twice = || {
            let first = linear(&layer, x(), DType::BF16);
            let second = linear(&layer, x().mul_scalar(2.0), DType::BF16);
            (first + second).cast(DType::F32).sum()
        };
        let apart = layer.weight.grad(&twice().backward()).unwrap();
        let (shared, entries, nested) = casting_once(|| {
            let loss = twice();
            // An inner scope shares the outer one's copies and leaves them in place.
            let nested = casting_once(|| (twice(), cached()));
            (loss.backward(), cached(), nested.1)
        });
        // One copy each of the weight and the bias, however many uses.
        assert_eq!((entries, nested), (Some(2), Some(2)));
        assert_eq!(
            cached(),
            None,
            "the copies are dropped with the outermost scope"
        );
        let shared = layer.weight.grad(&shared).unwrap();
        assert_eq!(shared.dtype(), DType::F32);
        // The uses' gradients add up in bf16 before the cast to f32: within bf16's rounding.
        let (apart, shared): (Vec<f32>, Vec<f32>) = (
            apart.into_data().try_into_vec().unwrap(),
            shared.into_data().try_into_vec().unwrap(),
        );
        for (a, b) in apart.iter().zip_eq(&shared) {
            assert!((a - b).abs() <= 1e-2 * a.abs().max(1.0), "{a} vs {b}");
        }
    }

    #[test]
    fn copies_made_beforehand_stand_in_for_the_casts_with_the_same_gradients() {
        let (layer, x) = layer_and_input();
        let bias = layer.bias.as_ref().unwrap();
        // Twice in bf16, and the bias once more in f32, as a tied embedding is used.
        let loss = || {
            let y = linear(&layer, x.clone(), DType::BF16) + linear(&layer, x.clone(), DType::BF16);
            (y.cast(DType::F32) * bias.val().unsqueeze::<2>()).sum()
        };
        let cast = casting_once(|| loss().backward());
        let copy = |value: Tensor<1>| Tensor::from_inner(value.inner().cast(DType::BF16));
        let copies = Copies::new(
            DType::BF16,
            vec![
                (layer.weight.id, copy(layer.weight.val().reshape([12]))),
                (bias.id, copy(bias.val())),
            ],
        );
        let tracked = copies.tracked();
        let (mut grads, entries) = casting_from(&tracked, || (loss().backward(), cached()));
        assert_eq!(entries, Some(2), "the copies, and nothing cast beside them");
        let mut copied = tracked.take_gradients(&mut grads);
        assert!(tracked.take_gradients(&mut grads).is_empty(), "taken out");
        // What the copy adds to its parameter's own gradient (the bias's f32 use).
        let mut folded = |id: ParamId, own: Option<Tensor<1>>| {
            let copy = copied.remove(&id).expect("the copy's gradient");
            assert_eq!(copy.dtype(), DType::BF16);
            let copy = copy.cast(DType::F32);
            match own {
                Some(own) => own + copy,
                None => copy,
            }
            .into_data()
        };
        let weight = |grads: &Gradients| layer.weight.grad(grads).map(|g| g.reshape([12]));
        assert!(
            weight(&grads).is_none(),
            "the weight is used through its copy alone"
        );
        let folded_weight = folded(layer.weight.id, None);
        assert_eq!(weight(&cast).unwrap().into_data(), folded_weight);
        let folded_bias = folded(bias.id, bias.grad(&grads));
        assert_eq!(bias.grad(&cast).unwrap().into_data(), folded_bias);
    }

    #[test]
    fn precision_names_round_trip() {
        for name in Precision::NAMES {
            assert_eq!(name.parse::<Precision>().unwrap().name(), name);
        }
        assert!("fp16".parse::<Precision>().is_err());
    }
}
