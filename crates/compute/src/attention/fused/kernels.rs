//! The fused attention's kernels: the forward (the output and two statistics per query) and the
//! backward's two (dQ with `D = rowsum(dO ∘ O)`; dK and dV together), FlashAttention-2's way. A
//! cube owns a block of rows (queries; keys in dK and dV) and walks the other side in tiles,
//! both staged in shared memory in f32 whatever the tensors' dtype; each product of two tiles is
//! split over the cube's units in register blocks ([`Shape`]); the softmax is online (a running
//! max and sum per row), so no `[B, H, L, L]` tensor exists. The backward recomputes each
//! probability from the saved statistics of its row, and the dropout mask from a hash of its
//! position.
//!
//! The statistics are the row's largest score and the log of its sum, not their sum the
//! logsumexp: a padded query whose keys are all masked has scores near −1e9, where f32 cannot
//! hold the logsumexp's `ln(sum)` part, and its probabilities (uniform, as the composed softmax
//! gives them) would come back wrong.
//!
//! Layouts: `q`, `k`, `v` are `[B, H, L, d]` read through their strides (the heads' views of
//! the projections, never copied); `out` and `dout` are `[B, L, H, d]` contiguous, which the
//! model's rows are without a copy, and the gradients one `[B, L, 3, H, d]` (dQ, dK, dV: the
//! layout of a q | k | v projection's rows); `key_bias` is `[B, L]`, `stats`
//! `[B, H, L, 2]` (max, ln sum) and `delta` `[B, H, L]`, all f32.

use burn_cubecl::cubecl;
use cubecl::prelude::*;

/// Added to a score outside the window, as the composed attention adds it.
const OUTSIDE: f32 = -1.0e9;
/// Below every score: the running maximum before the first key.
const LOWEST: f32 = -1.0e30;

/// The scalars every kernel takes: the score's scale, the window, and dropout's threshold
/// (a probability is dropped where its hash is below it), seed and the scale of kept values.
#[derive(CubeLaunch, CubeType, Clone, Copy)]
pub struct Params {
    pub scale: f32,
    pub half_window: u32,
    pub threshold: u32,
    pub seed_lo: u32,
    pub seed_hi: u32,
    pub keep_scale: f32,
}

/// What the kernels are compiled for: the head dimension; the rows a cube owns (queries, or keys
/// in dK and dV) and the rows of the other side it stages at a time; its units as an `ny × nx`
/// grid; and which of the window and dropout apply. Every product of two tiles is split over
/// the grid in register blocks: unit `(ty, tx)` computes rows `ty + i·ny` (`i <` [`Self::m`])
/// and columns `tx + j·nx` of it, so it holds a few dozen accumulators where a unit owning a
/// whole row held hundreds (and spilled: docs/perf-gpu.md).
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub struct Shape {
    pub dim: usize,
    pub rows: usize,
    pub tile: usize,
    pub ny: usize,
    pub nx: usize,
    pub windowed: bool,
    pub dropped: bool,
}

impl Shape {
    /// Units a cube runs.
    pub fn units(&self) -> usize {
        self.ny * self.nx
    }

    /// Rows of a product a unit computes.
    fn m(&self) -> usize {
        self.rows / self.ny
    }

    /// Columns a unit computes of a `rows × tile` product (scores) and of a `rows × dim` one.
    fn score_columns(&self) -> usize {
        self.tile / self.nx
    }

    fn dim_columns(&self) -> usize {
        self.dim / self.nx
    }

    /// Strides of staged rows and of staged scores, one past their width: the units of a plane
    /// read one term of different rows, which would otherwise share a shared-memory bank.
    fn row_stride(&self) -> usize {
        self.dim + 1
    }

    fn score_stride(&self) -> usize {
        self.tile + 1
    }

    /// The f32 terms of shared memory the largest kernel stages (dQ and dK/dV: two tiles of
    /// `rows` and two of `tile` rows, the scores, three terms per row).
    pub fn shared_terms(&self) -> usize {
        2 * (self.rows + self.tile) * self.row_stride()
            + self.rows * self.score_stride()
            + 3 * self.rows.max(self.tile)
    }
}

/// murmur3's finaliser: each input bit flips each output bit with probability ½.
#[cube]
fn mix(x: u32) -> u32 {
    let mut h = x;
    h ^= h >> 16u32;
    h *= 0x85eb_ca6bu32;
    h ^= h >> 13u32;
    h *= 0xc2b2_ae35u32;
    h ^ (h >> 16u32)
}

/// The factor dropout leaves on the probability of `key` in attention row `row` (batch, head and
/// query flattened): 0 where the hash of the position and the call's seed falls below the
/// threshold, else `keep_scale`.
#[cube]
pub fn kept(row: usize, key: usize, params: &Params) -> f32 {
    let h = mix(u32::cast_from(row) * 0x9e37_79b9u32 ^ params.seed_lo);
    let h = mix(h ^ (u32::cast_from(key) * 0x85eb_ca77u32 + params.seed_hi));
    let mut factor = params.keep_scale;
    if h < params.threshold {
        factor = f32::new(0.0);
    }
    factor
}

/// The score of `query` against `key` from their dot product: the key's bias, and outside the
/// window [`OUTSIDE`], added.
#[cube]
fn score(
    dot: f32,
    bias: f32,
    query: usize,
    key: usize,
    params: &Params,
    #[comptime] windowed: bool,
) -> f32 {
    let mut s = dot + bias;
    if windowed {
        let distance = if query > key {
            query - key
        } else {
            key - query
        };
        if distance > params.half_window as usize {
            s += f32::new(OUTSIDE);
        }
    }
    s
}

/// Shared memory for `count` staged rows of the head dimension, at [`Shape::row_stride`].
#[cube]
fn row_tile(#[comptime] count: usize, #[comptime] shape: Shape) -> Shared<[f32]> {
    Shared::<[f32]>::new_slice(comptime!(count * shape.row_stride()))
}

/// Shared memory for the block's scores of a tile, at [`Shape::score_stride`].
#[cube]
fn score_tile(#[comptime] shape: Shape) -> Shared<[f32]> {
    Shared::<[f32]>::new_slice(comptime!(shape.rows * shape.score_stride()))
}

/// Rows `start..start + count` of `[B, H, L, d]` `t` (batch `b`, head `h`) into `stage` at
/// [`Shape::row_stride`], in f32, zeros past the end; every unit of the cube takes part.
#[cube]
fn stage_heads<F: Float>(
    t: &Tensor<F>,
    stage: &mut Shared<[f32]>,
    b: usize,
    h: usize,
    start: usize,
    #[comptime] count: usize,
    #[comptime] shape: Shape,
) {
    let len = t.shape(2);
    let base = b * t.stride(0) + h * t.stride(1);
    let (dim, stride) = (shape.dim, comptime!(shape.row_stride()));
    let mut e = UNIT_POS_X as usize;
    while e < count * dim {
        let (r, c) = (e / dim, e % dim);
        let mut value = f32::new(0.0);
        if start + r < len {
            value = f32::cast_from(t[base + (start + r) * t.stride(2) + c * t.stride(3)]);
        }
        stage[r * stride + c] = value;
        e += CUBE_DIM_X as usize;
    }
}

/// Rows `start..start + count` of `[B, L, H, d]` contiguous `t` (batch `b`, head `h`) into
/// `stage` as [`stage_heads`] does.
#[cube]
fn stage_rows<F: Float>(
    t: &Tensor<F>,
    stage: &mut Shared<[f32]>,
    b: usize,
    h: usize,
    start: usize,
    len: usize,
    heads: usize,
    #[comptime] count: usize,
    #[comptime] shape: Shape,
) {
    let (dim, stride) = (shape.dim, comptime!(shape.row_stride()));
    let mut e = UNIT_POS_X as usize;
    while e < count * dim {
        let (r, c) = (e / dim, e % dim);
        let mut value = f32::new(0.0);
        if start + r < len {
            value = f32::cast_from(t[((b * len + start + r) * heads + h) * dim + c]);
        }
        stage[r * stride + c] = value;
        e += CUBE_DIM_X as usize;
    }
}

/// Term `offset` of the `width` per row of `terms` (the statistics, `delta`) for `count` rows
/// from `start` (of the head's rows at `row_base`), zeros past the end.
#[cube]
fn stage_row_terms(
    terms: &Tensor<f32>,
    stage: &mut Shared<[f32]>,
    row_base: usize,
    start: usize,
    len: usize,
    #[comptime] width: usize,
    #[comptime] offset: usize,
    #[comptime] count: usize,
) {
    let mut e = UNIT_POS_X as usize;
    while e < count {
        let mut value = f32::new(0.0);
        if start + e < len {
            value = terms[(row_base + start + e) * width + offset];
        }
        stage[e] = value;
        e += CUBE_DIM_X as usize;
    }
}

/// This unit's block of a product of staged tiles, added to `acc` (`m` rows, `columns` a row):
/// with `transposed`, scores `a · bᵀ` of two tiles of rows (`rows × tile`, summed over the head
/// dimension); without, `a · b` of scores and a tile of rows (`rows × dim`, summed over the tile).
#[cube]
fn accumulate(
    a: &Shared<[f32]>,
    b: &Shared<[f32]>,
    acc: &mut Array<f32>,
    ty: usize,
    tx: usize,
    #[comptime] shape: Shape,
    #[comptime] transposed: bool,
) {
    let m = comptime!(shape.m());
    let (columns, depth, a_stride) = if transposed {
        comptime!((shape.score_columns(), shape.dim, shape.row_stride()))
    } else {
        comptime!((shape.dim_columns(), shape.tile, shape.score_stride()))
    };
    let b_stride = comptime!(shape.row_stride());
    let mut left = Array::<f32>::new(m);
    let mut right = Array::<f32>::new(columns);
    for c in 0..depth {
        #[unroll]
        for i in 0..m {
            left[i] = a[(ty + i * shape.ny) * a_stride + c];
        }
        #[unroll]
        for j in 0..columns {
            let column = tx + j * shape.nx;
            right[j] = if transposed {
                b[column * b_stride + c]
            } else {
                b[c * b_stride + column]
            };
        }
        #[unroll]
        for i in 0..m {
            #[unroll]
            for j in 0..columns {
                acc[i * columns + j] += left[i] * right[j];
            }
        }
    }
}

/// `count` zeros in registers.
#[cube]
fn zeros(#[comptime] count: usize) -> Array<f32> {
    let mut a = Array::<f32>::new(count);
    #[unroll]
    for i in 0..count {
        a[i] = f32::new(0.0);
    }
    a
}

/// The unit's place in the cube's grid, `(ty, tx)`.
#[cube]
fn grid_position(#[comptime] shape: Shape) -> (usize, usize) {
    let unit = UNIT_POS_X as usize;
    (unit / shape.nx, unit % shape.nx)
}

/// One row's step of the online softmax over a tile of its scores (the tile's from `at`):
/// the max of the running max and the tile's, and the sum of the tile's probabilities against
/// it, which replace the scores (times dropout's factor: what `P·V` weighs the values by).
#[cube]
fn softmax_tile(
    scores: &mut Shared<[f32]>,
    at: usize,
    running_max: f32,
    row_id: usize,
    start: usize,
    params: &Params,
    #[comptime] shape: Shape,
) -> (f32, f32) {
    let mut tile_max = running_max;
    for c in 0..shape.tile {
        let s = scores[at + c];
        if s > tile_max {
            tile_max = s;
        }
    }
    let mut sum = f32::new(0.0);
    for c in 0..shape.tile {
        let p = (scores[at + c] - tile_max).exp();
        sum += p;
        let mut weight = p;
        if shape.dropped {
            weight = p * kept(row_id, start + c, params);
        }
        scores[at + c] = weight;
    }
    (tile_max, sum)
}

/// The output `[B, L, H, d]` and statistics `[B, H, L, 2]` of every query. Cubes: (query
/// blocks, heads, batch).
#[cube(launch)]
pub fn forward<F: Float>(
    q: &Tensor<F>,
    k: &Tensor<F>,
    v: &Tensor<F>,
    key_bias: &Tensor<f32>,
    out: &mut Tensor<F>,
    stats: &mut Tensor<f32>,
    params: Params,
    #[comptime] shape: Shape,
    #[define(F)] _dtype: ElemType,
) {
    let (heads, len) = (q.shape(1), q.shape(2));
    let (h, b) = (CUBE_POS_Y as usize, CUBE_POS_Z as usize);
    let first = CUBE_POS_X as usize * shape.rows;
    let unit = UNIT_POS_X as usize;
    let (ty, tx) = grid_position(shape);
    let (m, n, nd) = comptime!((shape.m(), shape.score_columns(), shape.dim_columns()));
    let score_stride = comptime!(shape.score_stride());
    let mut queries = row_tile(shape.rows, shape);
    let mut keys = row_tile(shape.tile, shape);
    let mut values = row_tile(shape.tile, shape);
    let mut scores = score_tile(shape);
    // Each row's correction of the tile, and at the end its sum.
    let mut row_terms = Shared::<[f32]>::new_slice(shape.rows);
    stage_heads::<F>(q, &mut queries, b, h, first, shape.rows, shape);
    let mut acc = zeros(comptime!(m * nd));
    // The running max and sum of row `unit` (units past the block's rows keep none).
    let mut running_max = f32::new(LOWEST);
    let mut sum = f32::new(0.0);
    let row_id = (b * heads + h) * len + first + unit;
    let mut start = 0usize;
    while start < len {
        stage_heads::<F>(k, &mut keys, b, h, start, shape.tile, shape);
        stage_heads::<F>(v, &mut values, b, h, start, shape.tile, shape);
        sync_cube();
        let mut dots = zeros(comptime!(m * n));
        accumulate(&queries, &keys, &mut dots, ty, tx, shape, true);
        #[unroll]
        for j in 0..n {
            let c = tx + j * shape.nx;
            let key = start + c;
            let bias = key_bias[b * key_bias.stride(0) + key.min(len - 1) * key_bias.stride(1)];
            #[unroll]
            for i in 0..m {
                let r = ty + i * shape.ny;
                let mut s = f32::new(LOWEST);
                if key < len {
                    let dot = dots[i * n + j] * params.scale;
                    s = score(dot, bias, first + r, key, &params, shape.windowed);
                }
                scores[r * score_stride + c] = s;
            }
        }
        sync_cube();
        if unit < shape.rows {
            let at = unit * score_stride;
            let (tile_max, tile_sum) =
                softmax_tile(&mut scores, at, running_max, row_id, start, &params, shape);
            let correction = (running_max - tile_max).exp();
            sum = sum * correction + tile_sum;
            running_max = tile_max;
            row_terms[unit] = correction;
        }
        sync_cube();
        #[unroll]
        for i in 0..m {
            let correction = row_terms[ty + i * shape.ny];
            #[unroll]
            for j in 0..nd {
                acc[i * nd + j] *= correction;
            }
        }
        accumulate(&scores, &values, &mut acc, ty, tx, shape, false);
        sync_cube();
        start += shape.tile;
    }
    if unit < shape.rows {
        row_terms[unit] = sum;
        if first + unit < len {
            stats[2 * row_id] = running_max;
            stats[2 * row_id + 1] = sum.ln();
        }
    }
    sync_cube();
    #[unroll]
    for i in 0..m {
        let r = ty + i * shape.ny;
        if first + r < len {
            let total = row_terms[r];
            let base = ((b * len + first + r) * heads + h) * shape.dim;
            #[unroll]
            for j in 0..nd {
                out[base + tx + j * shape.nx] = F::cast_from(acc[i * nd + j] / total);
            }
        }
    }
}

/// dQ (part 0 of the gradients) and `delta = rowsum(dO ∘ O)` `[B, H, L]`, which dK needs.
/// Cubes: (query blocks, heads, batch).
#[cube(launch)]
pub fn query_gradient<F: Float>(
    q: &Tensor<F>,
    k: &Tensor<F>,
    v: &Tensor<F>,
    key_bias: &Tensor<f32>,
    out: &Tensor<F>,
    dout: &Tensor<F>,
    stats: &Tensor<f32>,
    gradients: &mut Tensor<F>,
    delta: &mut Tensor<f32>,
    params: Params,
    #[comptime] shape: Shape,
    #[define(F)] _dtype: ElemType,
) {
    let (heads, len) = (q.shape(1), q.shape(2));
    let (h, b) = (CUBE_POS_Y as usize, CUBE_POS_Z as usize);
    let first = CUBE_POS_X as usize * shape.rows;
    let unit = UNIT_POS_X as usize;
    let (ty, tx) = grid_position(shape);
    let (m, n, nd) = comptime!((shape.m(), shape.score_columns(), shape.dim_columns()));
    let score_stride = comptime!(shape.score_stride());
    let mut queries = row_tile(shape.rows, shape);
    let mut upstream = row_tile(shape.rows, shape);
    let mut keys = row_tile(shape.tile, shape);
    let mut values = row_tile(shape.tile, shape);
    let mut scores = score_tile(shape);
    let mut maxes = Shared::<[f32]>::new_slice(shape.rows);
    let mut ln_sums = Shared::<[f32]>::new_slice(shape.rows);
    let mut deltas = Shared::<[f32]>::new_slice(shape.rows);
    stage_heads::<F>(q, &mut queries, b, h, first, shape.rows, shape);
    stage_rows::<F>(
        dout,
        &mut upstream,
        b,
        h,
        first,
        len,
        heads,
        shape.rows,
        shape,
    );
    let row_base = (b * heads + h) * len;
    if unit < shape.rows {
        let mut d = f32::new(0.0);
        let (mut row_max, mut row_ln_sum) = (f32::new(0.0), f32::new(0.0));
        let row = first + unit;
        if row < len {
            let base = ((b * len + row) * heads + h) * shape.dim;
            for c in 0..shape.dim {
                d += f32::cast_from(dout[base + c]) * f32::cast_from(out[base + c]);
            }
            row_max = stats[2 * (row_base + row)];
            row_ln_sum = stats[2 * (row_base + row) + 1];
            delta[row_base + row] = d;
        }
        deltas[unit] = d;
        maxes[unit] = row_max;
        ln_sums[unit] = row_ln_sum;
    }
    let mut acc = zeros(comptime!(m * nd));
    let mut start = 0usize;
    while start < len {
        stage_heads::<F>(k, &mut keys, b, h, start, shape.tile, shape);
        stage_heads::<F>(v, &mut values, b, h, start, shape.tile, shape);
        sync_cube();
        let mut dots = zeros(comptime!(m * n));
        let mut dp = zeros(comptime!(m * n));
        accumulate(&queries, &keys, &mut dots, ty, tx, shape, true);
        accumulate(&upstream, &values, &mut dp, ty, tx, shape, true);
        #[unroll]
        for j in 0..n {
            let c = tx + j * shape.nx;
            let key = start + c;
            let bias = key_bias[b * key_bias.stride(0) + key.min(len - 1) * key_bias.stride(1)];
            #[unroll]
            for i in 0..m {
                let r = ty + i * shape.ny;
                let mut ds = f32::new(0.0);
                if key < len {
                    let dot = dots[i * n + j] * params.scale;
                    let s = score(dot, bias, first + r, key, &params, shape.windowed);
                    let p = (s - maxes[r] - ln_sums[r]).exp();
                    let mut g = dp[i * n + j];
                    if shape.dropped {
                        g *= kept(row_base + first + r, key, &params);
                    }
                    ds = p * (g - deltas[r]);
                }
                scores[r * score_stride + c] = ds;
            }
        }
        sync_cube();
        accumulate(&scores, &keys, &mut acc, ty, tx, shape, false);
        sync_cube();
        start += shape.tile;
    }
    #[unroll]
    for i in 0..m {
        let row = first + ty + i * shape.ny;
        if row < len {
            let at = gradient_base(b, row, h, len, heads, 0usize, shape.dim);
            #[unroll]
            for j in 0..nd {
                gradients[at + tx + j * shape.nx] = F::cast_from(acc[i * nd + j] * params.scale);
            }
        }
    }
}

/// dK and dV (parts 1 and 2 of the gradients) of a block of keys. Cubes: (key blocks, heads,
/// batch).
#[cube(launch)]
pub fn key_value_gradient<F: Float>(
    q: &Tensor<F>,
    k: &Tensor<F>,
    v: &Tensor<F>,
    key_bias: &Tensor<f32>,
    dout: &Tensor<F>,
    stats: &Tensor<f32>,
    delta: &Tensor<f32>,
    gradients: &mut Tensor<F>,
    params: Params,
    #[comptime] shape: Shape,
    #[define(F)] _dtype: ElemType,
) {
    let (heads, len) = (q.shape(1), q.shape(2));
    let (h, b) = (CUBE_POS_Y as usize, CUBE_POS_Z as usize);
    let first = CUBE_POS_X as usize * shape.rows;
    let (ty, tx) = grid_position(shape);
    let (m, n, nd) = comptime!((shape.m(), shape.score_columns(), shape.dim_columns()));
    let score_stride = comptime!(shape.score_stride());
    let mut keys = row_tile(shape.rows, shape);
    let mut values = row_tile(shape.rows, shape);
    let mut queries = row_tile(shape.tile, shape);
    let mut upstream = row_tile(shape.tile, shape);
    let mut scores = score_tile(shape);
    let mut maxes = Shared::<[f32]>::new_slice(shape.tile);
    let mut ln_sums = Shared::<[f32]>::new_slice(shape.tile);
    let mut deltas = Shared::<[f32]>::new_slice(shape.tile);
    stage_heads::<F>(k, &mut keys, b, h, first, shape.rows, shape);
    stage_heads::<F>(v, &mut values, b, h, first, shape.rows, shape);
    let mut biases = Array::<f32>::new(m);
    #[unroll]
    for i in 0..m {
        let key = (first + ty + i * shape.ny).min(len - 1);
        biases[i] = key_bias[b * key_bias.stride(0) + key * key_bias.stride(1)];
    }
    let mut key_acc = zeros(comptime!(m * nd));
    let mut value_acc = zeros(comptime!(m * nd));
    let row_base = (b * heads + h) * len;
    let mut start = 0usize;
    while start < len {
        stage_heads::<F>(q, &mut queries, b, h, start, shape.tile, shape);
        stage_rows::<F>(
            dout,
            &mut upstream,
            b,
            h,
            start,
            len,
            heads,
            shape.tile,
            shape,
        );
        stage_row_terms(
            stats, &mut maxes, row_base, start, len, 2usize, 0usize, shape.tile,
        );
        stage_row_terms(
            stats,
            &mut ln_sums,
            row_base,
            start,
            len,
            2usize,
            1usize,
            shape.tile,
        );
        stage_row_terms(
            delta,
            &mut deltas,
            row_base,
            start,
            len,
            1usize,
            0usize,
            shape.tile,
        );
        sync_cube();
        // The probabilities (keys × queries), kept for dS; the scores take them with dropout.
        let mut p = zeros(comptime!(m * n));
        accumulate(&keys, &queries, &mut p, ty, tx, shape, true);
        #[unroll]
        for j in 0..n {
            let c = tx + j * shape.nx;
            let query = start + c;
            #[unroll]
            for i in 0..m {
                let key = first + ty + i * shape.ny;
                let mut prob = f32::new(0.0);
                let mut weight = f32::new(0.0);
                if query < len {
                    let dot = p[i * n + j] * params.scale;
                    let s = score(dot, biases[i], query, key, &params, shape.windowed);
                    prob = (s - maxes[c] - ln_sums[c]).exp();
                    weight = prob;
                    if shape.dropped {
                        weight = prob * kept(row_base + query, key, &params);
                    }
                }
                p[i * n + j] = prob;
                scores[(ty + i * shape.ny) * score_stride + c] = weight;
            }
        }
        sync_cube();
        accumulate(&scores, &upstream, &mut value_acc, ty, tx, shape, false);
        let mut dp = zeros(comptime!(m * n));
        accumulate(&values, &upstream, &mut dp, ty, tx, shape, true);
        sync_cube();
        // dS = p·(dP·kept − D), with p·kept the scores hold.
        #[unroll]
        for i in 0..m {
            #[unroll]
            for j in 0..n {
                let c = tx + j * shape.nx;
                let at = (ty + i * shape.ny) * score_stride + c;
                scores[at] = scores[at] * dp[i * n + j] - p[i * n + j] * deltas[c];
            }
        }
        sync_cube();
        accumulate(&scores, &queries, &mut key_acc, ty, tx, shape, false);
        sync_cube();
        start += shape.tile;
    }
    #[unroll]
    for i in 0..m {
        let key = first + ty + i * shape.ny;
        if key < len {
            let at_key = gradient_base(b, key, h, len, heads, 1usize, shape.dim);
            let at_value = gradient_base(b, key, h, len, heads, 2usize, shape.dim);
            #[unroll]
            for j in 0..nd {
                let c = tx + j * shape.nx;
                gradients[at_key + c] = F::cast_from(key_acc[i * nd + j] * params.scale);
                gradients[at_value + c] = F::cast_from(value_acc[i * nd + j]);
            }
        }
    }
}

/// Where term 0 of row `row` of head `h` of `part` (0: q, 1: k, 2: v) starts in the
/// `[B, L, 3, H, d]` gradients.
#[cube]
fn gradient_base(
    b: usize,
    row: usize,
    h: usize,
    len: usize,
    heads: usize,
    part: usize,
    #[comptime] dim: usize,
) -> usize {
    (((b * len + row) * 3 + part) * heads + h) * dim
}

/// The dropout factor of every position `[B, H, L, L]` as the kernels draw it: what a test
/// rebuilds the mask from. One unit per position.
#[cube(launch)]
pub fn dropout_factors(factors: &mut Tensor<f32>, params: Params) {
    let position = ABSOLUTE_POS;
    if position < factors.len() {
        let len = factors.shape(3);
        factors[position] = kept(position / len, position % len, &params);
    }
}
