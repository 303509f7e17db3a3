//! The fused attention's kernels: the forward (the output and one logsumexp per query) and the
//! backward's three (dQ with `D = rowsum(dO ∘ O)`, dK, dV). Each unit owns one row (a query, or
//! a key in dK and dV), keeps it and its accumulators in registers, and walks the other side in
//! tiles that the cube stages in shared memory, in f32 whatever the tensors' dtype; the softmax
//! is online (FlashAttention's running max and sum), so no `[B, H, L, L]` tensor exists. The
//! backward recomputes each probability from the saved statistics of its row, and the dropout
//! mask from a hash of its position.
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

/// What the kernels are compiled for: the head dimension, the rows per staged tile, and which
/// of the window and dropout apply.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub struct Shape {
    pub dim: usize,
    pub tile: usize,
    pub windowed: bool,
    pub dropped: bool,
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

/// Rows `start..start + tile` of `[B, H, L, d]` `t` (batch `b`, head `h`) into `stage`, in f32,
/// zeros past the end; every unit of the cube takes part.
#[cube]
fn stage_heads<F: Float>(
    t: &Tensor<F>,
    stage: &mut Shared<[f32]>,
    b: usize,
    h: usize,
    start: usize,
    #[comptime] shape: Shape,
) {
    let len = t.shape(2);
    let base = b * t.stride(0) + h * t.stride(1);
    let mut e = UNIT_POS_X as usize;
    while e < shape.tile * shape.dim {
        let row = start + e / shape.dim;
        let mut value = f32::new(0.0);
        if row < len {
            value = f32::cast_from(t[base + row * t.stride(2) + (e % shape.dim) * t.stride(3)]);
        }
        stage[e] = value;
        e += CUBE_DIM_X as usize;
    }
}

/// Rows `start..start + tile` of `[B, L, H, d]` contiguous `t` (batch `b`, head `h`) into
/// `stage`, in f32, zeros past the end.
#[cube]
fn stage_rows<F: Float>(
    t: &Tensor<F>,
    stage: &mut Shared<[f32]>,
    b: usize,
    h: usize,
    start: usize,
    len: usize,
    heads: usize,
    #[comptime] shape: Shape,
) {
    let mut e = UNIT_POS_X as usize;
    while e < shape.tile * shape.dim {
        let row = start + e / shape.dim;
        let mut value = f32::new(0.0);
        if row < len {
            value = f32::cast_from(t[((b * len + row) * heads + h) * shape.dim + e % shape.dim]);
        }
        stage[e] = value;
        e += CUBE_DIM_X as usize;
    }
}

/// Row `row` of `[B, H, L, d]` `t` into `into`, in f32, times `factor`.
#[cube]
fn load_head_row<F: Float>(
    t: &Tensor<F>,
    into: &mut Array<f32>,
    b: usize,
    h: usize,
    row: usize,
    factor: f32,
    #[comptime] dim: usize,
) {
    let base = b * t.stride(0) + h * t.stride(1) + row * t.stride(2);
    #[unroll]
    for c in 0..dim {
        into[c] = f32::cast_from(t[base + c * t.stride(3)]) * factor;
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

/// The unit's row (its cube's first row plus its position), and whether it is a real one: the
/// units past the end stage tiles and wait at barriers but compute nothing.
#[cube]
fn own_row(len: usize) -> (usize, bool) {
    let row = CUBE_POS_X as usize * CUBE_DIM_X as usize + UNIT_POS_X as usize;
    (row.min(len - 1), row < len)
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
    let (i, active) = own_row(len);
    let dim = shape.dim;
    let mut query = Array::<f32>::new(dim);
    let mut acc = Array::<f32>::new(dim);
    load_head_row::<F>(q, &mut query, b, h, i, params.scale, dim);
    #[unroll]
    for c in 0..dim {
        acc[c] = f32::new(0.0);
    }
    let mut keys = Shared::<[f32]>::new_slice(comptime!(shape.tile * shape.dim));
    let mut values = Shared::<[f32]>::new_slice(comptime!(shape.tile * shape.dim));
    let mut max = f32::new(LOWEST);
    let mut sum = f32::new(0.0);
    let row_id = (b * heads + h) * len + i;
    let mut start = 0usize;
    while start < len {
        stage_heads::<F>(k, &mut keys, b, h, start, shape);
        stage_heads::<F>(v, &mut values, b, h, start, shape);
        sync_cube();
        let end = (len - start).min(shape.tile);
        for j in 0..end {
            let key = start + j;
            let mut dot = f32::new(0.0);
            #[unroll]
            for c in 0..dim {
                dot += query[c] * keys[j * dim + c];
            }
            let bias = key_bias[b * key_bias.stride(0) + key * key_bias.stride(1)];
            let s = score(dot, bias, i, key, &params, shape.windowed);
            if s > max {
                let correction = (max - s).exp();
                sum *= correction;
                #[unroll]
                for c in 0..dim {
                    acc[c] *= correction;
                }
                max = s;
            }
            let p = (s - max).exp();
            sum += p;
            let mut weight = p;
            if shape.dropped {
                weight = p * kept(row_id, key, &params);
            }
            #[unroll]
            for c in 0..dim {
                acc[c] += weight * values[j * dim + c];
            }
        }
        sync_cube();
        start += shape.tile;
    }
    if active {
        let base = ((b * len + i) * heads + h) * dim;
        #[unroll]
        for c in 0..dim {
            out[base + c] = F::cast_from(acc[c] / sum);
        }
        stats[2 * row_id] = max;
        stats[2 * row_id + 1] = sum.ln();
    }
}

/// dQ (part 0 of the gradients) and `delta = rowsum(dO ∘ O)` `[B, H, L]`, which dK needs. Cubes: (query
/// blocks, heads, batch).
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
    let (i, active) = own_row(len);
    let dim = shape.dim;
    let mut query = Array::<f32>::new(dim);
    let mut upstream = Array::<f32>::new(dim);
    let mut grad = Array::<f32>::new(dim);
    load_head_row::<F>(q, &mut query, b, h, i, params.scale, dim);
    let base = ((b * len + i) * heads + h) * dim;
    let mut d = f32::new(0.0);
    #[unroll]
    for c in 0..dim {
        upstream[c] = f32::cast_from(dout[base + c]);
        d += upstream[c] * f32::cast_from(out[base + c]);
        grad[c] = f32::new(0.0);
    }
    let row_id = (b * heads + h) * len + i;
    let (row_max, row_ln_sum) = (stats[2 * row_id], stats[2 * row_id + 1]);
    let mut keys = Shared::<[f32]>::new_slice(comptime!(shape.tile * shape.dim));
    let mut values = Shared::<[f32]>::new_slice(comptime!(shape.tile * shape.dim));
    let mut start = 0usize;
    while start < len {
        stage_heads::<F>(k, &mut keys, b, h, start, shape);
        stage_heads::<F>(v, &mut values, b, h, start, shape);
        sync_cube();
        let end = (len - start).min(shape.tile);
        for j in 0..end {
            let key = start + j;
            let mut dot = f32::new(0.0);
            let mut dp = f32::new(0.0);
            #[unroll]
            for c in 0..dim {
                dot += query[c] * keys[j * dim + c];
                dp += upstream[c] * values[j * dim + c];
            }
            let bias = key_bias[b * key_bias.stride(0) + key * key_bias.stride(1)];
            let s = score(dot, bias, i, key, &params, shape.windowed);
            let p = (s - row_max - row_ln_sum).exp();
            if shape.dropped {
                dp *= kept(row_id, key, &params);
            }
            let ds = p * (dp - d);
            #[unroll]
            for c in 0..dim {
                grad[c] += ds * keys[j * dim + c];
            }
        }
        sync_cube();
        start += shape.tile;
    }
    if active {
        let at = gradient_base(b, i, h, len, heads, 0usize, dim);
        #[unroll]
        for c in 0..dim {
            gradients[at + c] = F::cast_from(grad[c] * params.scale);
        }
        delta[row_id] = d;
    }
}

/// Term `offset` of the `width` per row of `terms` (the statistics, `delta`) for the tile of
/// queries at `start`.
#[cube]
fn stage_row_terms(
    terms: &Tensor<f32>,
    stage: &mut Shared<[f32]>,
    row_base: usize,
    start: usize,
    len: usize,
    #[comptime] width: usize,
    #[comptime] offset: usize,
    #[comptime] tile: usize,
) {
    let mut e = UNIT_POS_X as usize;
    while e < tile {
        let mut value = f32::new(0.0);
        if start + e < len {
            value = terms[(row_base + start + e) * width + offset];
        }
        stage[e] = value;
        e += CUBE_DIM_X as usize;
    }
}

/// dK (`keys`, part 1 of the gradients) or dV (part 2): one body, compiled for each, as two kernels (the two
/// accumulators together would need 256 registers of f32 a unit at head dimension 64). dV needs
/// neither `v` nor `delta`, bound all the same. Cubes: (key blocks, heads, batch).
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
    #[comptime] keys: bool,
    #[define(F)] _dtype: ElemType,
) {
    let (heads, len) = (q.shape(1), q.shape(2));
    let (h, b) = (CUBE_POS_Y as usize, CUBE_POS_Z as usize);
    let (j, active) = own_row(len);
    let dim = shape.dim;
    let mut key = Array::<f32>::new(dim);
    let mut value = Array::<f32>::new(dim);
    let mut acc = Array::<f32>::new(dim);
    load_head_row::<F>(k, &mut key, b, h, j, f32::new(1.0), dim);
    if keys {
        load_head_row::<F>(v, &mut value, b, h, j, f32::new(1.0), dim);
    }
    #[unroll]
    for c in 0..dim {
        acc[c] = f32::new(0.0);
    }
    let bias = key_bias[b * key_bias.stride(0) + j * key_bias.stride(1)];
    let row_base = (b * heads + h) * len;
    let mut queries = Shared::<[f32]>::new_slice(comptime!(shape.tile * shape.dim));
    let mut upstream = Shared::<[f32]>::new_slice(comptime!(shape.tile * shape.dim));
    let mut maxes = Shared::<[f32]>::new_slice(shape.tile);
    let mut ln_sums = Shared::<[f32]>::new_slice(shape.tile);
    let mut deltas = Shared::<[f32]>::new_slice(shape.tile);
    let mut start = 0usize;
    while start < len {
        stage_heads::<F>(q, &mut queries, b, h, start, shape);
        stage_rows::<F>(dout, &mut upstream, b, h, start, len, heads, shape);
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
        if keys {
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
        }
        sync_cube();
        let end = (len - start).min(shape.tile);
        for r in 0..end {
            let i = start + r;
            let mut dot = f32::new(0.0);
            #[unroll]
            for c in 0..dim {
                dot += queries[r * dim + c] * key[c];
            }
            let s = score(dot * params.scale, bias, i, j, &params, shape.windowed);
            let p = (s - maxes[r] - ln_sums[r]).exp();
            let mut factor = f32::new(1.0);
            if shape.dropped {
                factor = kept(row_base + i, j, &params);
            }
            if keys {
                let mut dp = f32::new(0.0);
                #[unroll]
                for c in 0..dim {
                    dp += upstream[r * dim + c] * value[c];
                }
                let ds = p * (dp * factor - deltas[r]);
                #[unroll]
                for c in 0..dim {
                    acc[c] += ds * queries[r * dim + c];
                }
            } else {
                let weight = p * factor;
                #[unroll]
                for c in 0..dim {
                    acc[c] += weight * upstream[r * dim + c];
                }
            }
        }
        sync_cube();
        start += shape.tile;
    }
    if active {
        let part = comptime!(if keys { 1usize } else { 2usize });
        let at = gradient_base(b, j, h, len, heads, part, dim);
        let scale = if keys { params.scale } else { f32::new(1.0) };
        #[unroll]
        for c in 0..dim {
            gradients[at + c] = F::cast_from(acc[c] * scale);
        }
    }
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
