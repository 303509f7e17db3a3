//! The fused attention on the cube backends: which dtypes and blocks a device takes, and the
//! launches of `kernels.rs` (one for the forward, two for the backward: dQ, then dK and dV
//! together, into one gradient tensor).

use burn::backend::TensorMetadata;
use burn::backend::cubecl::dtype_to_storage_type;
use burn::backend::ops::FloatTensorOps;
use burn::backend::tensor::FloatTensor;
use burn::tensor::{DType, Shape as Dims};
use burn_cubecl::CubeBackend;
use burn_cubecl::cubecl;
use burn_cubecl::kernel::{into_contiguous, untile};
use burn_cubecl::ops::numeric::empty_device_contiguous_dtype;
use burn_cubecl::tensor::CubeTensor;
use cubecl::client::Client;
use cubecl::ir::{ElemType, FloatKind, HardwareProperties};
use cubecl::prelude::*;

use super::kernels::{self, ParamsLaunch, Shape};
use super::{FusedAttention, Options, heads_of};

/// The tensors the largest kernel binds (dQ: nine), with cubecl's metadata buffer.
const BINDINGS: u32 = 10;
/// Rows of each product a unit computes: its accumulators are this many times the columns.
const UNIT_ROWS: usize = 4;

/// Whether the device computes in `dtype`: f32 everywhere, bf16 where the device has the type
/// (CUDA; WGSL has none).
pub fn supports(client: &Client, dtype: DType) -> bool {
    match dtype {
        DType::F32 => true,
        DType::BF16 => client
            .properties()
            .supports_type(ElemType::Float(FloatKind::BF16)),
        _ => false,
    }
}

/// The blocks for head dimension `dim` (window and dropout left to the caller): the largest
/// (rows a cube owns, rows staged at a time) whose shared memory fits the device, with a grid of
/// units `nx` wide (the largest of 16, 8, 4 dividing `dim` and the tile); `None` where none fits,
/// `dim` has no such divisor, or the bindings do not fit.
pub fn blocks(hardware: &HardwareProperties, dim: usize) -> Option<Shape> {
    if hardware.max_bindings < BINDINGS {
        return None;
    }
    let candidates = [
        (64, 64),
        (64, 32),
        (32, 32),
        (32, 16),
        (16, 16),
        (16, 8),
        (8, 8),
    ];
    candidates.into_iter().find_map(|(rows, tile)| {
        let nx = [16, 8, 4]
            .into_iter()
            .find(|nx| dim % nx == 0 && tile % nx == 0)?;
        let shape = Shape {
            dim,
            rows,
            tile,
            ny: rows / UNIT_ROWS,
            nx,
            windowed: false,
            dropped: false,
        };
        let fits = shape.shared_terms() * 4 <= hardware.max_shared_memory_size
            && shape.units() <= hardware.max_units_per_cube as usize;
        fits.then_some(shape)
    })
}

/// The launch plan of one call: the kernels' compile-time shape, the scalars, and the grid.
struct Plan {
    shape: Shape,
    options: Options,
    batch: usize,
    heads: usize,
    len: usize,
}

impl Plan {
    fn of(q: &CubeTensor, options: Options) -> Self {
        let [batch, heads, len, dim] = q.shape().dims::<4>();
        let hardware = &q.client.properties().hardware;
        let blocks = blocks(hardware, dim).expect("`serves` checked that a block fits");
        Self {
            shape: Shape {
                windowed: options.half_window.is_some(),
                dropped: options.dropout.is_some(),
                ..blocks
            },
            options,
            batch,
            heads,
            len,
        }
    }

    /// Cubes over (row blocks, heads, batch), each the shape's grid of units.
    fn grid(&self) -> (CubeCount, CubeDim) {
        let blocks = self.len.div_ceil(self.shape.rows);
        (
            CubeCount::Static(blocks as u32, self.heads as u32, self.batch as u32),
            CubeDim::new_1d(self.shape.units() as u32),
        )
    }

    fn params(&self) -> ParamsLaunch {
        let (threshold, seed, keep_scale) = match self.options.dropout {
            // A position is dropped where its 32-bit hash is below rate · 2³².
            Some(d) => (
                (d.rate * 4_294_967_296.0).min(u32::MAX as f64) as u32,
                d.seed,
                (1.0 / (1.0 - d.rate)) as f32,
            ),
            None => (0, [0, 0], 1.0),
        };
        let half_window = self
            .options
            .half_window
            .map_or(0, |w| w.min(u32::MAX as usize)) as u32;
        ParamsLaunch::new(
            self.options.scale,
            half_window,
            threshold,
            seed[0],
            seed[1],
            keep_scale,
        )
    }

    /// A new `[B, L, H, d]` tensor (the output) in `dtype`, or with `parts`, `[B, L, parts,
    /// H, d]` (the gradients of q, k and v).
    fn rows(&self, like: &CubeTensor, dtype: DType, parts: Option<usize>) -> CubeTensor {
        let (batch, len, heads, dim) = (self.batch, self.len, self.heads, self.shape.dim);
        let dims = match parts {
            None => Dims::from([batch, len, heads, dim]),
            Some(parts) => Dims::from([batch, len, parts, heads, dim]),
        };
        empty_device_contiguous_dtype(like.client.clone(), like.device.clone(), dims, dtype)
    }

    /// A new f32 tensor of `width` terms per row, `[B, H, L, width]` (the statistics: max and
    /// ln sum) or `[B, H, L]` (`delta`).
    fn row_terms(&self, like: &CubeTensor, width: usize) -> CubeTensor {
        let dims = match width {
            1 => Dims::from([self.batch, self.heads, self.len]),
            _ => Dims::from([self.batch, self.heads, self.len, width]),
        };
        empty_device_contiguous_dtype(like.client.clone(), like.device.clone(), dims, DType::F32)
    }
}

impl FusedAttention for CubeBackend {
    fn fused_attention(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        key_bias: FloatTensor<Self>,
        options: Options,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        let (q, k, v, key_bias) = (untile(q), untile(k), untile(v), untile(key_bias));
        let plan = Plan::of(&q, options);
        let (out, stats) = (plan.rows(&q, q.dtype, None), plan.row_terms(&q, 2));
        let (count, dim) = plan.grid();
        let dtype = dtype_to_storage_type(q.dtype);
        kernels::forward::launch(
            &q.client.clone(),
            count,
            dim,
            q.into_tensor_arg(),
            k.into_tensor_arg(),
            v.into_tensor_arg(),
            key_bias.into_tensor_arg(),
            out.clone().into_tensor_arg(),
            stats.clone().into_tensor_arg(),
            plan.params(),
            plan.shape,
            dtype,
        );
        (out, stats)
    }

    fn fused_attention_packed(
        qkv: FloatTensor<Self>,
        key_bias: FloatTensor<Self>,
        options: Options,
    ) -> (FloatTensor<Self>, FloatTensor<Self>) {
        let [q, k, v] = heads_of::<Self>(qkv);
        Self::fused_attention(q, k, v, key_bias, options)
    }

    fn fused_attention_backward(
        q: FloatTensor<Self>,
        k: FloatTensor<Self>,
        v: FloatTensor<Self>,
        key_bias: FloatTensor<Self>,
        out: FloatTensor<Self>,
        dout: FloatTensor<Self>,
        stats: FloatTensor<Self>,
        options: Options,
    ) -> FloatTensor<Self> {
        let (q, k, v, key_bias) = (untile(q), untile(k), untile(v), untile(key_bias));
        // The kernels index these as dense `[B, L, H, d]` and `[B, H, L]` rows.
        let (out, stats) = (into_contiguous(out), into_contiguous(stats));
        let dout = into_contiguous(Self::float_cast(dout, q.dtype.into()));
        let plan = Plan::of(&q, options);
        let client = q.client.clone();
        let dtype = dtype_to_storage_type(q.dtype);
        let (count, dim) = plan.grid();
        // dQ, dK and dV in one tensor, each kernel writing its part.
        let gradients = plan.rows(&q, q.dtype, Some(3));
        let delta = plan.row_terms(&q, 1);
        kernels::query_gradient::launch(
            &client,
            count.clone(),
            dim,
            q.clone().into_tensor_arg(),
            k.clone().into_tensor_arg(),
            v.clone().into_tensor_arg(),
            key_bias.clone().into_tensor_arg(),
            out.into_tensor_arg(),
            dout.clone().into_tensor_arg(),
            stats.clone().into_tensor_arg(),
            gradients.clone().into_tensor_arg(),
            delta.clone().into_tensor_arg(),
            plan.params(),
            plan.shape,
            dtype,
        );
        kernels::key_value_gradient::launch(
            &client,
            count,
            dim,
            q.into_tensor_arg(),
            k.into_tensor_arg(),
            v.into_tensor_arg(),
            key_bias.into_tensor_arg(),
            dout.into_tensor_arg(),
            stats.into_tensor_arg(),
            delta.into_tensor_arg(),
            gradients.clone().into_tensor_arg(),
            plan.params(),
            plan.shape,
            dtype,
        );
        gradients
    }

    fn fused_attention_dropout(q: FloatTensor<Self>, options: Options) -> FloatTensor<Self> {
        let plan = Plan::of(&q, options);
        let dims = [plan.batch, plan.heads, plan.len, plan.len];
        let factors = empty_device_contiguous_dtype(
            q.client.clone(),
            q.device.clone(),
            Dims::from(dims),
            DType::F32,
        );
        let positions = dims.iter().product::<usize>();
        let dim = CubeDim::new(&q.client, positions);
        let count = cubecl::calculate_cube_count_elemwise(&q.client, positions, dim);
        kernels::dropout_factors::launch(
            &q.client,
            count,
            dim,
            factors.clone().into_tensor_arg(),
            plan.params(),
        );
        factors
    }
}
