//! flex's element-wise and row operations that every encoder layer runs, split over rayon's
//! threads: the exact GELU and its gradient, LayerNorm, the bias and residual adds, attention's
//! scaled and masked scores and its softmax with their gradients, dropout's mask, the max over
//! a text's tokens that SPLADE's pooling takes, and AdamW's update of the parameters.
//!
//! Why: burn-flex 0.22.1 runs its unary, binary and scalar operations on the calling thread, so
//! while a layer's GELU, norms and bias adds ran the other core sat idle, about a quarter of an
//! encoding batch on two cores (docs/perf-cpu.md). Each kernel here computes what flex's own
//! operations compute, operation for operation in f32 (the sums by flex's own row sum), so its
//! results are flex's bit for bit, which the tests check; a tensor that is not f32 and
//! contiguous is handed back for flex to compute.

use std::mem::MaybeUninit;

use burn::tensor::{Bytes, DType};
use burn_flex::simd::kernels::{max_f32, sum_rows_f32};
use burn_flex::{FlexTensor, Layout};
use rayon::prelude::*;

/// Elements per task: enough that rayon's bookkeeping is noise, few enough that a layer's
/// smallest tensors still give every thread work.
const CHUNK: usize = 1 << 15;

/// Columns per task of [`group_max`]: a block's running maxima (4 KiB) stay in L1.
const COLUMNS: usize = 1024;

/// `x` with `f` applied to its values in place, a chunk at a time (in place in `x` where `x`
/// owns its storage, else in a copy); `Err(x)` where `x` is not contiguous f32. Chunks, not
/// elements, so that `f` can work on many lanes at once ([`crate::erf`]).
pub fn map(
    mut x: FlexTensor,
    f: impl Fn(&mut [f32]) + Send + Sync,
) -> Result<FlexTensor, FlexTensor> {
    let Some((start, end)) = f32_span(&x) else {
        return Err(x);
    };
    if start == 0 && x.is_unique() {
        let values = &mut x.storage_mut::<f32>()[..end];
        values.par_chunks_mut(CHUNK).for_each(f);
        return Ok(x);
    }
    // Each chunk copied into fresh storage and mapped there: written once, not zeroed first.
    let mut out = Vec::with_capacity(end - start);
    (out.spare_capacity_mut().par_chunks_mut(CHUNK))
        .zip(x.storage::<f32>()[start..end].par_chunks(CHUNK))
        .for_each(|(out, values)| f(out.write_copy_of_slice(values)));
    // SAFETY: the chunks cover all `end - start` elements, each written above.
    unsafe { out.set_len(end - start) };
    Ok(contiguous(out, &x))
}

/// `f(a, b)` of each pair of elements of two tensors of one shape; `Err((a, b))` where either
/// is not contiguous f32 or the shapes differ.
pub fn zip(
    a: FlexTensor,
    b: FlexTensor,
    f: impl Fn(f32, f32) -> f32 + Sync,
) -> Result<FlexTensor, (FlexTensor, FlexTensor)> {
    let (Some((a_start, a_end)), Some((b_start, b_end))) = (f32_span(&a), f32_span(&b)) else {
        return Err((a, b));
    };
    if a.layout().shape() != b.layout().shape() {
        return Err((a, b));
    }
    let mut out = Vec::with_capacity(a_end - a_start);
    let (xs, ys) = (
        &a.storage::<f32>()[a_start..a_end],
        &b.storage::<f32>()[b_start..b_end],
    );
    xs.par_iter()
        .zip(ys)
        .with_min_len(CHUNK)
        .map(|(&x, &y)| f(x, y))
        .collect_into_vec(&mut out);
    Ok(contiguous(out, &a))
}

/// `x + row`, the `[width]` (or `[1, width]`) `row` added to each row of `[rows, width]` `x`, as
/// flex's broadcast add computes it; in place where `x` owns its storage.
pub fn add_row(x: FlexTensor, row: FlexTensor) -> Result<FlexTensor, (FlexTensor, FlexTensor)> {
    let width = row.layout().num_elements();
    let (Some([_, x_width]), Some(_)) = (rows_of(&x), f32_span(&row)) else {
        return Err((x, row));
    };
    if x_width != width {
        return Err((x, row));
    }
    let mut x = owned(x);
    let row = values(&row);
    x.storage_mut::<f32>()
        .par_chunks_mut(rows_per_task(width) * width)
        .for_each(|chunk| {
            for values in chunk.chunks_exact_mut(width) {
                values.iter_mut().zip(row).for_each(|(v, b)| *v = *v + b);
            }
        });
    Ok(x)
}

/// LayerNorm of each row of `[rows, width]` `x`: `(x − mean) / √(var + epsilon) · gamma (+
/// beta)`, the operations of `norm::ops::standardize` and `affine` in their order, the two
/// means as flex's `mean_dim` takes them (its row sum, then a division).
pub fn layer_norm(
    x: FlexTensor,
    gamma: &FlexTensor,
    beta: Option<&FlexTensor>,
    epsilon: f64,
) -> Result<FlexTensor, FlexTensor> {
    let Some(width) = norm_width(&x, gamma, beta) else {
        return Err(x);
    };
    let (gamma, beta) = (values(gamma), beta.map(values));
    let mut x = owned(x);
    x.storage_mut::<f32>()
        .par_chunks_mut(rows_per_task(width) * width)
        .for_each(|chunk| {
            let mut squares = vec![0.0f32; width];
            for row in chunk.chunks_exact_mut(width) {
                standardize_row(row, &mut squares, epsilon as f32);
                affine_row(row, gamma, beta);
            }
        });
    Ok(x)
}

/// [`layer_norm`] with what its backward keeps: `(y, normalized, std)`, `std` `[rows, 1]`, the
/// normalized rows `(x − mean) / std` as flex's division gives them.
pub fn layer_norm_kept(
    x: FlexTensor,
    gamma: &FlexTensor,
    beta: Option<&FlexTensor>,
    epsilon: f64,
) -> Result<(FlexTensor, FlexTensor, FlexTensor), FlexTensor> {
    let Some(width) = norm_width(&x, gamma, beta) else {
        return Err(x);
    };
    let rows = x.layout().num_elements() / width;
    let (gamma, beta) = (values(gamma), beta.map(values));
    let mut normalized = owned(x);
    let mut y = vec![0.0f32; rows * width];
    let mut std = vec![0.0f32; rows];
    let per_task = rows_per_task(width);
    normalized
        .storage_mut::<f32>()
        .par_chunks_mut(per_task * width)
        .zip(y.par_chunks_mut(per_task * width))
        .zip(std.par_chunks_mut(per_task))
        .for_each(|((normalized, y), std)| {
            let mut squares = vec![0.0f32; width];
            let rows = normalized
                .chunks_exact_mut(width)
                .zip(y.chunks_exact_mut(width));
            for ((row, y), std) in rows.zip(std) {
                *std = standardize_row(row, &mut squares, epsilon as f32);
                y.copy_from_slice(row);
                affine_row(y, gamma, beta);
            }
        });
    let y = contiguous(y, &normalized);
    let std = FlexTensor::new(
        Bytes::from_elems(std),
        Layout::contiguous([rows, 1].into()),
        DType::F32,
    );
    Ok((y, normalized, std))
}

/// The width of `[rows, width]` contiguous f32 `x` where `gamma` (and `beta`) are `[width]`
/// contiguous f32 vectors.
fn norm_width(x: &FlexTensor, gamma: &FlexTensor, beta: Option<&FlexTensor>) -> Option<usize> {
    let [_, width] = rows_of(x)?;
    let fits = |v: &FlexTensor| f32_span(v).is_some() && v.layout().num_elements() == width;
    (width > 0 && fits(gamma) && beta.is_none_or(fits)).then_some(width)
}

/// One row, in place, `(x − mean) / std` as flex's `mean_dim`, subtraction, square root and
/// division give it; its `std = √(var + epsilon)`. `squares` is scratch of the row's width.
fn standardize_row(row: &mut [f32], squares: &mut [f32], epsilon: f32) -> f32 {
    let n = row.len() as f32;
    let mean = row_sum(row) / n;
    for (v, square) in row.iter_mut().zip(squares.iter_mut()) {
        *v = *v - mean;
        *square = *v * *v;
    }
    let std = (row_sum(squares) / n + epsilon).sqrt();
    row.iter_mut().for_each(|v| *v = *v / std);
    std
}

/// A standardized row times `gamma`, plus `beta` where there is one, in place.
fn affine_row(row: &mut [f32], gamma: &[f32], beta: Option<&[f32]>) {
    row.iter_mut().zip(gamma).for_each(|(v, g)| *v = *v * g);
    if let Some(beta) = beta {
        row.iter_mut().zip(beta).for_each(|(v, b)| *v = *v + b);
    }
}

/// A norm's input gradient `(g − mean(g) − x̂ · mean(g · x̂)) / std`, `g = dy · gamma`, from
/// `[rows, width]` `dy` and `normalized` (x̂), `[rows, 1]` `std` and `[width]` `gamma`, in the
/// operations and order of the composed form (`norm::ops`); `None` where a tensor is not
/// contiguous f32 of those shapes.
pub fn norm_input_gradient(
    dy: &FlexTensor,
    normalized: &FlexTensor,
    std: &FlexTensor,
    gamma: &FlexTensor,
) -> Option<FlexTensor> {
    let [rows, width] = rows_of(dy)?;
    let fits = rows_of(normalized) == Some([rows, width])
        && f32_span(std).is_some()
        && std.layout().num_elements() == rows
        && f32_span(gamma).is_some()
        && gamma.layout().num_elements() == width;
    if !fits || width == 0 {
        return None;
    }
    let (dy_values, x_hat, stds, gamma) =
        (values(dy), values(normalized), values(std), values(gamma));
    let n = width as f32;
    let per_task = rows_per_task(width);
    let mut dx = vec![0.0f32; rows * width];
    dx.par_chunks_mut(per_task * width)
        .enumerate()
        .for_each(|(task, dx)| {
            let mut projected = vec![0.0f32; width];
            for (i, dx) in dx.chunks_exact_mut(width).enumerate() {
                let r = task * per_task + i;
                let (dy, x_hat) = (
                    &dy_values[r * width..][..width],
                    &x_hat[r * width..][..width],
                );
                // g into dx, g · x̂ beside it.
                for (((g, p), (&d, &x)), &gm) in dx
                    .iter_mut()
                    .zip(&mut projected)
                    .zip(dy.iter().zip(x_hat))
                    .zip(gamma)
                {
                    *g = d * gm;
                    *p = *g * x;
                }
                let (mean_g, mean_projected) = (row_sum(dx) / n, row_sum(&projected) / n);
                for (g, &x) in dx.iter_mut().zip(x_hat) {
                    *g = (*g - mean_g - x * mean_projected) / stds[r];
                }
            }
        });
    Some(contiguous(dx, dy))
}

/// The max over each of `groups` consecutive blocks of the `[rows, width]` rows of `x`, each
/// row shifted by its offset (`[rows, 1]`) first, as flex's broadcast add and `max_dim` compute
/// it: `[groups, width]`, the first maximum winning and a NaN winning as in `max_dim`.
pub fn group_max(
    x: FlexTensor,
    offsets: FlexTensor,
    groups: usize,
) -> Result<FlexTensor, (FlexTensor, FlexTensor)> {
    group_max_rows(x, offsets, groups).map(|(maxima, _)| maxima)
}

/// [`group_max`] and, as f32, the row within its group of each maximum, the one
/// `max_dim_with_indices` gives (exact up to 2^24 rows a group).
pub fn group_max_rows(
    x: FlexTensor,
    offsets: FlexTensor,
    groups: usize,
) -> Result<(FlexTensor, FlexTensor), (FlexTensor, FlexTensor)> {
    let (Some([rows, width]), Some(_)) = (rows_of(&x), f32_span(&offsets)) else {
        return Err((x, offsets));
    };
    if rows == 0 || groups == 0 || rows % groups != 0 || offsets.layout().num_elements() != rows {
        return Err((x, offsets));
    }
    let per_group = rows / groups;
    let (xs, shifts) = (values(&x), values(&offsets));
    let mut out = vec![0.0f32; groups * width];
    let mut best_rows = vec![0.0f32; groups * width];
    out.par_chunks_mut(width)
        .zip(best_rows.par_chunks_mut(width))
        .enumerate()
        .for_each(|(group, (maxima, best))| {
            // Columns in blocks, so that both threads share a group's rows while each block's
            // maxima stay in the cache across them.
            maxima
                .par_chunks_mut(COLUMNS)
                .zip(best.par_chunks_mut(COLUMNS))
                .enumerate()
                .for_each(|(block, (maxima, best))| {
                    let first = group * per_group;
                    let column = block * COLUMNS;
                    let len = maxima.len();
                    let row = |r: usize| &xs[r * width + column..][..len];
                    for (m, v) in maxima.iter_mut().zip(row(first)) {
                        *m = v + shifts[first];
                    }
                    for r in first + 1..first + per_group {
                        for (c, (m, v)) in maxima.iter_mut().zip(row(r)).enumerate() {
                            let v = v + shifts[r];
                            if !m.is_nan() && (v.is_nan() || v > *m) {
                                *m = v;
                                best[c] = (r - first) as f32;
                            }
                        }
                    }
                });
        });
    let layout = Layout::contiguous([groups, width].into());
    let tensor =
        |values: Vec<f32>| FlexTensor::new(Bytes::from_elems(values), layout.clone(), DType::F32);
    Ok((tensor(out), tensor(best_rows)))
}

/// The gradient of a group max (`[groups, width]` `dy`) for its `[groups · per_group, width]`
/// input: `0 + dy` in the row `rows` names for each group and column, 0 elsewhere, as
/// `max_dim`'s backward scatter-adds it into zeros; each element written once. A `dy` that is
/// a view (the head's tiles get theirs as slices of the concatenated gradient) is copied first:
/// it is a vocabulary tile's width for each text, the result a tile for each token.
pub fn place_group_max_gradient(
    dy: FlexTensor,
    rows: &FlexTensor,
    per_group: usize,
) -> Result<FlexTensor, FlexTensor> {
    let is_view = dy.dtype() == DType::F32 && f32_span(&dy).is_none();
    let dy = if is_view { dy.to_contiguous() } else { dy };
    let (Some([groups, width]), Some(shape)) = (rows_of(&dy), rows_of(rows)) else {
        return Err(dy);
    };
    if shape != [groups, width] {
        return Err(dy);
    }
    let (dy_values, best) = (values(&dy), values(rows));
    let mut out: Vec<f32> = Vec::with_capacity(groups * per_group * width);
    (out.spare_capacity_mut()[..groups * per_group * width].par_chunks_mut(width))
        .enumerate()
        .for_each(|(row, out)| {
            let (group, within) = (row / per_group, (row % per_group) as f32);
            let (dy, best) = (
                &dy_values[group * width..][..width],
                &best[group * width..][..width],
            );
            for ((o, &g), &b) in out.iter_mut().zip(dy).zip(best) {
                o.write(if b == within { 0.0 + g } else { 0.0 });
            }
        });
    // SAFETY: the tasks above wrote each of the groups · per_group · width elements.
    unsafe { out.set_len(groups * per_group * width) };
    let layout = Layout::contiguous([groups * per_group, width].into());
    Ok(FlexTensor::new(Bytes::from_elems(out), layout, DType::F32))
}

/// `[B, H, Lq, Lk]` attention scores divided by `divisor`, plus the `[B, 1, 1 or Lq, Lk]` mask
/// `bias`, as flex's `div_scalar` and broadcast add compute them; in place where the scores own
/// their storage.
pub fn scaled_scores(
    scores: FlexTensor,
    bias: FlexTensor,
    divisor: f64,
) -> Result<FlexTensor, (FlexTensor, FlexTensor)> {
    let dims = |t: &FlexTensor| <[usize; 4]>::try_from(t.layout().shape().to_vec()).ok();
    let (Some([batch, heads, queries, keys]), Some([bias_batch, 1, bias_queries, bias_keys])) =
        (dims(&scores), dims(&bias))
    else {
        return Err((scores, bias));
    };
    let fits = bias_batch == batch && bias_keys == keys && [1, queries].contains(&bias_queries);
    if !fits || keys == 0 || f32_span(&scores).is_none() || f32_span(&bias).is_none() {
        return Err((scores, bias));
    }
    let divisor = divisor as f32;
    let mut scores = owned(scores);
    let mask = values(&bias);
    scores
        .storage_mut::<f32>()
        .par_chunks_mut(rows_per_task(keys) * keys)
        .enumerate()
        .for_each(|(task, chunk)| {
            let first = task * rows_per_task(keys);
            for (i, row) in chunk.chunks_exact_mut(keys).enumerate() {
                let (r, query) = (first + i, (first + i) % queries);
                let text = r / (heads * queries);
                let mask_row = text * bias_queries + if bias_queries == 1 { 0 } else { query };
                let mask = &mask[mask_row * keys..][..keys];
                row.iter_mut()
                    .zip(mask)
                    .for_each(|(v, b)| *v = *v / divisor + b);
            }
        });
    Ok(scores)
}

/// Softmax over the last axis of `x` as burn composes it (`norm::ops::composed_softmax_kept`):
/// the row's max subtracted, `exp`, the row sum by flex's `sum_dim`, the division; with what
/// its backward keeps: `(p, e, sums)`, `e = exp(x − max)` (in `x`'s storage where `x` owns
/// it) and the row sums `[.., 1]`. `Err(x)` where `x` is not contiguous f32.
pub fn softmax_kept(x: FlexTensor) -> Result<(FlexTensor, FlexTensor, FlexTensor), FlexTensor> {
    let Some(width) = last_width(&x) else {
        return Err(x);
    };
    let rows = x.layout().num_elements() / width;
    let mut e = owned(x);
    let mut p = vec![0.0f32; rows * width];
    let mut sums = vec![0.0f32; rows];
    let per_task = rows_per_task(width);
    e.storage_mut::<f32>()
        .par_chunks_mut(per_task * width)
        .zip(p.par_chunks_mut(per_task * width))
        .zip(sums.par_chunks_mut(per_task))
        .for_each(|((e, p), sums)| {
            let rows = e.chunks_exact_mut(width).zip(p.chunks_exact_mut(width));
            for ((e, p), sum) in rows.zip(sums) {
                // A NaN anywhere makes the max NaN, as flex's `max_dim` does.
                let max = max_f32(e);
                e.iter_mut().for_each(|v| *v = (*v - max).exp());
                *sum = row_sum(e);
                p.iter_mut().zip(e.iter()).for_each(|(p, &e)| *p = e / *sum);
            }
        });
    let mut sums_shape = e.layout().shape().to_vec();
    *sums_shape.last_mut().expect("a softmax axis") = 1;
    let sums = FlexTensor::new(
        Bytes::from_elems(sums),
        Layout::contiguous(sums_shape.into()),
        DType::F32,
    );
    Ok((contiguous(p, &e), e, sums))
}

/// The softmax's input gradient from `dp` and the kept `e` and row `sums`, in the operations
/// and order burn's autodiff takes through the composed softmax
/// (`norm::ops::composed_softmax_gradient`): through the division `dp · (1 / sum)`, through the
/// sum the row sum of `dp · (−e / sum²)`, their sum times `e` for `exp`. `None` where a tensor
/// is not contiguous f32 of those shapes.
pub fn softmax_input_gradient(
    dp: &FlexTensor,
    e: &FlexTensor,
    sums: &FlexTensor,
) -> Option<FlexTensor> {
    let width = last_width(dp)?;
    let rows = dp.layout().num_elements() / width;
    let fits = e.layout().shape() == dp.layout().shape()
        && f32_span(e).is_some()
        && f32_span(sums).is_some()
        && sums.layout().num_elements() == rows;
    if !fits {
        return None;
    }
    let (dp_values, e_values, sums) = (values(dp), values(e), values(sums));
    let per_task = rows_per_task(width);
    let mut dx = vec![0.0f32; rows * width];
    dx.par_chunks_mut(per_task * width)
        .enumerate()
        .for_each(|(task, dx)| {
            for (i, dx) in dx.chunks_exact_mut(width).enumerate() {
                let r = task * per_task + i;
                let (dp, e) = (
                    &dp_values[r * width..][..width],
                    &e_values[r * width..][..width],
                );
                let (recip, square) = (1.0 / sums[r], sums[r] * sums[r]);
                for ((t, &d), &e) in dx.iter_mut().zip(dp).zip(e) {
                    *t = d * (-e / square);
                }
                let through_sum = row_sum(dx);
                for ((t, &d), &e) in dx.iter_mut().zip(dp).zip(e) {
                    *t = (d * recip + through_sum) * e;
                }
            }
        });
    Some(contiguous(dx, dp))
}

/// The matrix of `total` rows (`dim` 0) or columns (`dim` 1): `block` (contiguous f32) from
/// `start` along `dim`, zeros elsewhere, each element written once; `Err(block)` where `block`
/// is not contiguous f32 or does not fit.
pub fn place_block(
    block: FlexTensor,
    dim: usize,
    total: usize,
    start: usize,
) -> Result<FlexTensor, FlexTensor> {
    let Some(mut shape) = rows_of(&block) else {
        return Err(block);
    };
    let len = std::mem::replace(&mut shape[dim], total);
    if dim > 1 || start + len > total {
        return Err(block);
    }
    let [rows, width] = shape;
    // Each output row: its columns before the block, the block's row, the columns after; a
    // row outside a block of rows is all zeros.
    let (lead, run) = if dim == 1 { (start, len) } else { (0, width) };
    let source = values(&block);
    let per_task = rows_per_task(width);
    let mut out: Vec<f32> = Vec::with_capacity(rows * width);
    (out.spare_capacity_mut()[..rows * width].par_chunks_mut(per_task * width))
        .enumerate()
        .for_each(|(task, out)| {
            for (i, out) in out.chunks_exact_mut(width).enumerate() {
                let row = task * per_task + i;
                let from = match dim {
                    0 => (start..start + len)
                        .contains(&row)
                        .then(|| (row - start) * width),
                    _ => Some(row * len),
                };
                let Some(from) = from else {
                    out.fill(MaybeUninit::new(0.0));
                    continue;
                };
                let (before, rest) = out.split_at_mut(lead);
                let (middle, after) = rest.split_at_mut(run);
                before.fill(MaybeUninit::new(0.0));
                let values = &source[from..from + run];
                middle
                    .iter_mut()
                    .zip(values)
                    .for_each(|(o, &v)| _ = o.write(v));
                after.fill(MaybeUninit::new(0.0));
            }
        });
    // SAFETY: the tasks above wrote each of the first rows · width elements.
    unsafe { out.set_len(rows * width) };
    let layout = Layout::contiguous([rows, width].into());
    Ok(FlexTensor::new(Bytes::from_elems(out), layout, DType::F32))
}

/// Whether [`update_with_moments`] takes these: contiguous f32 buffers of one length.
pub fn moments_apply(
    parameters: &FlexTensor,
    gradient: &FlexTensor,
    moments: Option<&(FlexTensor, FlexTensor)>,
) -> bool {
    let len = parameters.layout().num_elements();
    let fits = |x: &FlexTensor| f32_span(x).is_some() && x.layout().num_elements() == len;
    fits(parameters) && fits(gradient) && moments.is_none_or(|(m, v)| fits(m) && fits(v))
}

/// `update(p, m, v, g)` on each element of a parameter buffer, its two moments and its gradient,
/// in one pass split over rayon's threads: AdamW's step (`crate::adamw` says what it computes).
/// Without moments yet, they start as copies of the gradient for `update` to overwrite.
/// Returns `(parameters, first moment, second moment)`, updated in place where they own their
/// storage. Takes what [`moments_apply`] accepts.
pub fn update_with_moments(
    parameters: FlexTensor,
    gradient: &FlexTensor,
    moments: Option<(FlexTensor, FlexTensor)>,
    update: impl Fn(&mut f32, &mut f32, &mut f32, f32) + Sync,
) -> (FlexTensor, FlexTensor, FlexTensor) {
    let (mut m, mut v) = match moments {
        Some((m, v)) => (owned(m), owned(v)),
        None => (owned(gradient.clone()), owned(gradient.clone())),
    };
    let mut p = owned(parameters);
    let g = values(gradient);
    (p.storage_mut::<f32>().par_chunks_mut(CHUNK))
        .zip(m.storage_mut::<f32>().par_chunks_mut(CHUNK))
        .zip(v.storage_mut::<f32>().par_chunks_mut(CHUNK))
        .zip(g.par_chunks(CHUNK))
        .for_each(|(((p, m), v), g)| {
            for (((p, m), v), &g) in p.iter_mut().zip(m).zip(v).zip(g) {
                update(p, m, v, g);
            }
        });
    (p, m, v)
}

/// The span of storage `x`'s elements occupy, where `x` is contiguous f32.
fn f32_span(x: &FlexTensor) -> Option<(usize, usize)> {
    (x.dtype() == DType::F32)
        .then(|| x.layout().contiguous_offsets())
        .flatten()
}

/// The length of the last axis of contiguous f32 `x`, where it has elements.
fn last_width(x: &FlexTensor) -> Option<usize> {
    let width = *x.layout().shape().to_vec().last()?;
    (f32_span(x).is_some() && width > 0).then_some(width)
}

/// `[rows, width]` of a contiguous f32 matrix.
fn rows_of(x: &FlexTensor) -> Option<[usize; 2]> {
    let dims = x.layout().shape().to_vec();
    match (f32_span(x), dims.as_slice()) {
        (Some(_), &[rows, width]) => Some([rows, width]),
        _ => None,
    }
}

/// A contiguous f32 `x` that owns exactly its elements: itself, or a copy of them (made on
/// every thread: AdamW copies each parameter buffer the model's views share).
fn owned(x: FlexTensor) -> FlexTensor {
    match f32_span(&x) {
        Some((0, end)) if x.is_unique() && end == x.storage::<f32>().len() => x,
        _ => {
            let mut copy = Vec::with_capacity(x.layout().num_elements());
            (values(&x).par_iter().with_min_len(CHUNK).copied()).collect_into_vec(&mut copy);
            contiguous(copy, &x)
        }
    }
}

/// A contiguous f32 tensor's elements.
fn values(x: &FlexTensor) -> &[f32] {
    let (start, end) = f32_span(x).expect("a contiguous f32 tensor");
    &x.storage::<f32>()[start..end]
}

/// `values` as a contiguous tensor of `like`'s shape.
fn contiguous(values: Vec<f32>, like: &FlexTensor) -> FlexTensor {
    let layout = Layout::contiguous(like.layout().shape().clone());
    FlexTensor::new(Bytes::from_elems(values), layout, DType::F32)
}

fn rows_per_task(width: usize) -> usize {
    (CHUNK / width.max(1)).max(1)
}

/// A row's sum as flex's `sum_dim` over the last axis takes it.
fn row_sum(row: &[f32]) -> f32 {
    let mut sum = [0.0f32];
    sum_rows_f32(row, &mut sum, 1, row.len());
    sum[0]
}

#[cfg(test)]
mod tests;
