//! The routed products' shared parts: operand layouts and batch strides (what any BLAS is told),
//! and the backward's transposes, checked against burn's own matmul.

use burn::prelude::*;

use super::backend::*;
use super::fallback::burn_matmul;
use super::layout::*;

#[test]
fn strides_map_to_a_transpose_flag_and_leading_dimension() {
    // Row-major [4, 3], dense and with rows pitched to 8.
    assert_eq!(operand_layout(4, 3, 3, 1), Some((false, 3)));
    assert_eq!(operand_layout(4, 3, 8, 1), Some((false, 8)));
    // burn's transpose() of a row-major [3, 4]: [4, 3] with strides (1, 4).
    assert_eq!(operand_layout(4, 3, 1, 4), Some((true, 4)));
    // A single row or column is either; it still gets a valid leading dimension.
    assert_eq!(operand_layout(1, 5, 5, 1), Some((false, 5)));
    assert_eq!(operand_layout(5, 1, 1, 1), Some((false, 1)));
    // Every other element of every other row, or overlapping rows: copy first.
    assert_eq!(operand_layout(4, 3, 6, 2), None);
    assert_eq!(operand_layout(4, 3, 2, 1), None);
    // burn's expansions of size-one dimensions (stride 0): `[…, 1, 1]`, and a row vector
    // broadcast from `[n]`, map; a column repeating one element does not.
    assert_eq!(operand_layout(1, 1, 0, 0), Some((false, 1)));
    assert_eq!(operand_layout(1, 5, 0, 1), Some((false, 5)));
    assert_eq!(operand_layout(4, 1, 0, 0), None);
}

#[test]
fn batch_dimensions_fold_into_one_stride_or_are_refused() {
    // Contiguous [2, 3, L·d]: the inner batch stride, with the outer one its multiple.
    assert_eq!(batch_stride(&[2, 3], &[3 * 20, 20]), Some(20));
    assert_eq!(batch_stride(&[2, 1, 3], &[60, 999, 20]), Some(20));
    assert_eq!(batch_stride(&[], &[]), Some(0));
    assert_eq!(batch_stride(&[1], &[7]), Some(0));
    // [B, H, L, d] as swap_dims(1, 2) of a contiguous [B, L, H, d] (L = 5, H = 3, d = 4).
    assert_eq!(batch_stride(&[2, 3], &[5 * 3 * 4, 4]), None);
}

#[test]
fn backward_transpose_flags_give_the_gradients_of_burns_matmul() {
    let device = Device::flex().autodiff();
    let values =
        |len: usize, seed: f32| -> Vec<f32> { (0..len).map(|i| (i as f32 * seed).sin()).collect() };
    let (m, n, k) = (3, 4, 5);
    let upstream =
        Tensor::<3>::from_data(TensorData::new(values(2 * m * n, 0.73), [2, m, n]), &device);
    for (trans_lhs, trans_rhs) in [(false, false), (false, true), (true, false), (true, true)] {
        let shape = |trans: bool, rows: usize, cols: usize| {
            if trans {
                [2, cols, rows]
            } else {
                [2, rows, cols]
            }
        };
        let lhs = Tensor::<3>::from_data(
            TensorData::new(values(2 * m * k, 0.37), shape(trans_lhs, m, k)),
            &device,
        )
        .require_grad();
        let rhs = Tensor::<3>::from_data(
            TensorData::new(values(2 * k * n, 0.91), shape(trans_rhs, k, n)),
            &device,
        )
        .require_grad();
        let op = |t: Tensor<3>, trans: bool| if trans { t.transpose() } else { t };
        let y = op(lhs.clone(), trans_lhs).matmul(op(rhs.clone(), trans_rhs));
        let grads = (y * upstream.clone()).sum().backward();
        let product = |x: Tensor<3>, y: Tensor<3>, tx: bool, ty: bool| op(x, tx).matmul(op(y, ty));
        let (l, r, g) = (
            lhs.clone().inner(),
            rhs.clone().inner(),
            upstream.clone().inner(),
        );
        let d_lhs = lhs_gradient(trans_lhs, trans_rhs).eval(g.clone(), None, Some(r), product);
        let d_rhs = rhs_gradient(trans_lhs, trans_rhs).eval(g, Some(l), None, product);
        d_lhs
            .into_data()
            .assert_approx_eq::<f32>(&lhs.grad(&grads).unwrap().into_data(), Default::default());
        d_rhs
            .into_data()
            .assert_approx_eq::<f32>(&rhs.grad(&grads).unwrap().into_data(), Default::default());
    }
}

/// The CPU BLAS libraries the product tests run through: the one loaded for the process
/// (`LSR_BLAS`) and each file in `LSR_TEST_BLAS` (`:`-separated), or none (the tests are skipped,
/// saying why) where none is installed and none was asked for. `just test` installs oneMKL and
/// oneDNN and names them; under CI a library that does not load fails the test.
fn test_blas() -> Vec<&'static super::blas::Blas> {
    static MORE: std::sync::OnceLock<Vec<super::blas::Blas>> = std::sync::OnceLock::new();
    let required = [super::blas::LIBRARY_VARIABLE, "CI"].map(std::env::var_os);
    let mut libraries = match super::blas::library() {
        Ok(blas) => vec![blas],
        Err(why) if required.iter().any(Option::is_some) => panic!("{why}"),
        Err(why) => {
            eprintln!("skipped, no CPU BLAS: {why}");
            return Vec::new();
        }
    };
    let more = MORE.get_or_init(|| {
        let named = std::env::var("LSR_TEST_BLAS").unwrap_or_default();
        (named.split(':').filter(|name| !name.is_empty()))
            .map(|name| {
                super::blas::load(name).unwrap_or_else(|why| panic!("LSR_TEST_BLAS: {why}"))
            })
            .collect()
    });
    libraries.extend(more);
    libraries
}

fn flex_tensor(shape: &[usize], seed: f32) -> burn_flex::FlexTensor {
    let len = shape.iter().product();
    let values: Vec<f32> = (0..len).map(|i| ((i as f32 + 1.0) * seed).sin()).collect();
    burn_flex::FlexTensor::from_data(TensorData::new(values, shape.to_vec()))
}

/// `op(x)` of shape `[batch.., rows, cols]` stored as `layout` says: dense, as the transpose
/// of a dense matrix, inside a larger one (an offset and a row pitch), or with its batch
/// dimensions permuted so that they fold into no single stride (copied before the BLAS).
fn operand(
    batch: &[usize],
    rows: usize,
    cols: usize,
    layout: usize,
    seed: f32,
) -> burn_flex::FlexTensor {
    let d = batch.len() + 2;
    let dims = |r, c| [batch, &[r, c]].concat();
    match layout {
        0 => flex_tensor(&dims(rows, cols), seed),
        1 => flex_tensor(&dims(cols, rows), seed).transpose(d - 2, d - 1),
        2 => flex_tensor(&dims(rows + 2, cols + 3), seed)
            .narrow(d - 2, 1, rows)
            .narrow(d - 1, 2, cols),
        _ => {
            let mut reversed: Vec<usize> = batch.iter().rev().copied().collect();
            reversed.extend([rows, cols]);
            let mut axes: Vec<usize> = (0..batch.len()).rev().collect();
            axes.extend([d - 2, d - 1]);
            flex_tensor(&reversed, seed).permute(&axes)
        }
    }
}

#[test]
fn cpu_blas_products_equal_burns_for_every_transpose_and_layout() {
    for blas in test_blas() {
        products_equal_burns(blas);
    }
}

fn products_equal_burns(blas: &super::blas::Blas) {
    use burn::backend::Flex;
    // Small; split by rows (m ≥ n); split by columns (n > m); batched, one shape per matrix.
    let cases: [(&[usize], usize, usize, usize); 4] = [
        (&[], 3, 4, 5),
        (&[], 400, 130, 160),
        (&[], 90, 300, 270),
        (&[2, 3], 33, 17, 20),
    ];
    for (batch, m, n, k) in cases {
        for (trans_lhs, trans_rhs, layout) in
            itertools::iproduct!([false, true], [false, true], 0..4)
        {
            if layout == 3 && batch.len() < 2 {
                continue;
            }
            let (lr, lc) = if trans_lhs { (k, m) } else { (m, k) };
            let (rr, rc) = if trans_rhs { (n, k) } else { (k, n) };
            let lhs = operand(batch, lr, lc, layout, 0.37);
            let rhs = operand(batch, rr, rc, (layout + 1) % 3, 0.91);
            let expected = burn_matmul::<Flex>(lhs.clone(), rhs.clone(), trans_lhs, trans_rhs);
            let got = blas
                .product(lhs, rhs, trans_lhs, trans_rhs)
                .unwrap_or_else(|_| panic!("{} refused {batch:?} {m}x{n}x{k}", blas.path()));
            let case = format!(
                "{}: {batch:?} {m}x{n}x{k} trans {trans_lhs}/{trans_rhs} layout {layout}",
                blas.path()
            );
            assert_eq!(got.layout().shape(), expected.layout().shape(), "{case}");
            got.into_data().assert_approx_eq::<f32>(
                &expected.into_data(),
                burn::tensor::Tolerance::rel_abs(1e-5, 1e-4),
            );
        }
    }
}

#[test]
fn cpu_blas_bf16_products_are_f32_products_of_the_rounded_operands() {
    for blas in bf16_blas() {
        bf16_products_are_f32_products_of_the_rounded_operands(blas);
    }
}

/// The test libraries with a bf16 product (each one without it said).
fn bf16_blas() -> Vec<&'static super::blas::Blas> {
    let (with, without): (Vec<_>, Vec<_>) = test_blas()
        .into_iter()
        .partition(|blas| blas.computes(burn::tensor::DType::BF16));
    for blas in without {
        eprintln!("skipped: {} has no bf16 product", blas.path());
    }
    with
}

fn bf16_products_are_f32_products_of_the_rounded_operands(blas: &super::blas::Blas) {
    use burn::backend::Flex;
    use burn::backend::ops::FloatTensorOps;
    use burn::tensor::DType;
    let bf16 = |t| Flex::float_cast(t, DType::BF16.into());
    let f32 = |t| Flex::float_cast(t, DType::F32.into());
    // A batch of small products; products narrowed block by block, by rows and by columns.
    for (batch, m, n, k) in [(2, 70, 50, 96), (1, 1200, 300, 64), (1, 300, 1000, 96)] {
        let lhs = bf16(flex_tensor(&[batch, m, k], 0.37));
        let rhs = bf16(flex_tensor(&[batch, n, k], 0.91));
        let got = (blas.product(lhs.clone(), rhs.clone(), false, true))
            .unwrap_or_else(|_| panic!("{} refused", blas.path()));
        assert_eq!(got.dtype(), DType::BF16);
        let expected = burn_matmul::<Flex>(f32(lhs), f32(rhs), false, true);
        // Accumulated in f32 from exact bf16 inputs; the only rounding that matters is the
        // output's to bf16 (8 bits of mantissa).
        f32(got).into_data().assert_approx_eq::<f32>(
            &expected.into_data(),
            burn::tensor::Tolerance::rel_abs(8e-3, 1e-2),
        );
    }
}

#[test]
fn routed_products_give_the_gradients_of_burns_matmul() {
    use burn::backend::Dispatch;
    let device = Device::flex().autodiff();
    let values =
        |len: usize, seed: f32| -> Vec<f32> { (0..len).map(|i| (i as f32 * seed).sin()).collect() };
    let (m, n, k) = (30, 40, 50);
    let upstream =
        Tensor::<3>::from_data(TensorData::new(values(2 * m * n, 0.73), [2, m, n]), &device);
    let lhs = Tensor::<3>::from_data(TensorData::new(values(2 * m * k, 0.37), [2, m, k]), &device)
        .require_grad();
    let rhs = Tensor::<3>::from_data(TensorData::new(values(2 * n * k, 0.91), [2, n, k]), &device)
        .require_grad();
    let routed = Tensor::<3>::from_dispatch(<Dispatch as RoutedMatmul>::routed_matmul(
        lhs.clone().into_dispatch(),
        rhs.clone().into_dispatch(),
        false,
        true,
    ));
    let grads = (routed * upstream.clone()).sum().backward();
    let (d_lhs, d_rhs) = (lhs.grad(&grads).unwrap(), rhs.grad(&grads).unwrap());
    let reference = lhs.clone().matmul(rhs.clone().transpose());
    let grads = (reference * upstream).sum().backward();
    let tolerance = burn::tensor::Tolerance::rel_abs(1e-5, 1e-4);
    d_lhs
        .into_data()
        .assert_approx_eq::<f32>(&lhs.grad(&grads).unwrap().into_data(), tolerance);
    d_rhs
        .into_data()
        .assert_approx_eq::<f32>(&rhs.grad(&grads).unwrap().into_data(), tolerance);
}

#[test]
fn bf16_operands_give_f32_products_of_the_rounded_operands() {
    for blas in bf16_blas() {
        bf16_operands_give_rounded_products(blas);
    }
}

fn bf16_operands_give_rounded_products(blas: &super::blas::Blas) {
    use burn::backend::Flex;
    use burn::backend::ops::FloatTensorOps;
    use burn::tensor::DType;
    let rounded = |t| Flex::float_cast(Flex::float_cast(t, DType::BF16.into()), DType::F32.into());
    // A dense lhs; a transposed view (a tied decoder) and a view inside a larger matrix as rhs.
    let lhs = flex_tensor(&[300, 96], 0.37);
    for rhs in [
        operand(&[], 96, 700, 1, 0.91),
        operand(&[], 96, 700, 2, 0.91),
    ] {
        let got = super::blas::with_bf16_operands(true, || {
            blas.product(lhs.clone(), rhs.clone(), false, false)
        })
        .unwrap_or_else(|_| panic!("{} refused", blas.path()));
        assert_eq!(got.dtype(), DType::F32);
        let expected = burn_matmul::<Flex>(rounded(lhs.clone()), rounded(rhs), false, false);
        got.into_data().assert_approx_eq::<f32>(
            &expected.into_data(),
            burn::tensor::Tolerance::rel_abs(1e-5, 1e-4),
        );
    }
    // Outside the scope the same product is f32's.
    let exact = blas.product(lhs.clone(), flex_tensor(&[96, 70], 0.91), false, false);
    let expected = burn_matmul::<Flex>(lhs, flex_tensor(&[96, 70], 0.91), false, false);
    (exact.unwrap_or_else(|_| panic!("refused")).into_data()).assert_approx_eq::<f32>(
        &expected.into_data(),
        burn::tensor::Tolerance::rel_abs(1e-5, 1e-4),
    );
}

#[test]
fn bf16_rounding_without_branches_is_halfs() {
    use burn::tensor::bf16;
    // Every 9,973rd bit pattern (both signs, every exponent, NaNs), and each rounding case:
    // below, at and above the half-way point with an even and an odd last kept bit, the largest
    // finite values (which round to infinity), subnormals and infinities.
    let mut patterns: Vec<u32> = (0..=u32::MAX).step_by(9_973).collect();
    for high in [
        0x3f80_0000u32,
        0x3f81_0000,
        0x7f7f_0000,
        0x0000_0000,
        0x7f80_0000,
        0x7fc0_0000,
    ] {
        for low in [0, 1, 0x7fff, 0x8000, 0x8001, 0xffff] {
            patterns.extend([high | low, (high | low) ^ 0x8000_0000]);
        }
    }
    for bits in patterns {
        let x = f32::from_bits(bits);
        assert_eq!(
            super::blas::bf16_bits(x),
            bf16::from_f32(x).to_bits(),
            "{bits:#010x}"
        );
    }
}
