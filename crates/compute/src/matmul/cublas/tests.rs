//! The cuBLASLt route's tests: layouts, plans and refusals, the backward's transposes, the choice
//! of devices (what runs without a GPU).

use super::gemm::*;
use super::plans::*;
use super::*;
use cudarc::cublaslt::result::CublasError;
use itertools::Itertools;

fn gemm(m: u64, n: u64, k: u64) -> Gemm {
    let dense = |ld| Operand {
        trans: false,
        ld,
        batch_stride: 0,
    };
    Gemm {
        dtype: GemmDtype::Bf16,
        m,
        n,
        k,
        a: dense(k as i64),
        b: dense(n as i64),
        batch: 1,
    }
}

#[test]
fn a_refused_product_is_planned_once_and_the_fault_switch_refuses_without_asking() {
    let refuse_none = Refusals::default();
    let mut plans = Plans::<u32>::new();
    let key = |g| (g, [256, 256, 256]);
    let not_supported = || {
        Err(CublasError(
            sys::cublasStatus_t::CUBLAS_STATUS_NOT_SUPPORTED,
        ))
    };
    let refusal = plans.get(key(gemm(8, 4, 2)), &refuse_none, not_supported);
    assert!(refusal.unwrap_err().contains("NOT_SUPPORTED"));
    // Asked again: the refusal is remembered, the heuristic is not run a second time.
    let again = plans.get(key(gemm(8, 4, 2)), &refuse_none, || unreachable!());
    assert!(again.unwrap_err().contains("NOT_SUPPORTED"));
    assert_eq!(
        plans.get(key(gemm(8, 4, 3)), &refuse_none, || Ok(7)),
        Ok(&7)
    );
    assert_eq!(
        plans.get(key(gemm(8, 4, 3)), &refuse_none, || unreachable!()),
        Ok(&7)
    );

    let refuse = Refusals::parse(Some("8x4x9, 16x16x16")).unwrap();
    let refused = plans.get(key(gemm(8, 4, 9)), &refuse, || unreachable!());
    assert_eq!(refused, Err(format!("refused by {REFUSE_VARIABLE}")));
    assert!(Refusals::parse(Some("all")).unwrap().names(&gemm(1, 2, 3)));
    assert!(!Refusals::parse(None).unwrap().names(&gemm(1, 2, 3)));
    let error = Refusals::parse(Some("8x4")).unwrap_err();
    assert!(
        error.contains(REFUSE_VARIABLE) && error.contains("`8x4`"),
        "{error}"
    );
}

#[test]
fn a_product_names_its_shape_in_warnings_and_panics() {
    let text = gemm(32768, 30522, 768).to_string();
    assert_eq!(
        text,
        "1 × [32768, 768]·[768, 30522] Bf16 (M×N×K 32768x30522x768)"
    );
}

/// cuBLAS's semantics on the host: column-major `D = op(first)·op(second)`.
fn column_major_product(call: &ColumnMajor, k: usize, first: &[f32], second: &[f32]) -> Vec<f32> {
    let (rows, cols) = (call.out.rows as usize, call.out.cols as usize);
    let at = |matrix: &Matrix, data: &[f32], trans: bool, i: usize, j: usize| {
        let (r, c) = if trans { (j, i) } else { (i, j) };
        data[r + c * matrix.ld as usize]
    };
    let mut out = vec![0.0; call.out.ld as usize * cols];
    for i in 0..rows {
        for j in 0..cols {
            out[i + j * call.out.ld as usize] = (0..k)
                .map(|p| {
                    at(&call.first, first, call.trans_first, i, p)
                        * at(&call.second, second, call.trans_second, p, j)
                })
                .sum();
        }
    }
    out
}

/// Row-major storage of `x[rows, cols]` (or of its transpose) with rows `ld` apart.
fn store(x: &[Vec<f32>], trans: bool, ld: usize) -> Vec<f32> {
    let (rows, cols) = (x.len(), x[0].len());
    let (sr, sc) = if trans { (cols, rows) } else { (rows, cols) };
    let mut data = vec![f32::NAN; sr * ld];
    for r in 0..sr {
        for c in 0..sc {
            data[r * ld + c] = if trans { x[c][r] } else { x[r][c] };
        }
    }
    data
}

#[test]
fn row_major_products_map_onto_column_major_calls_for_every_transpose_pair() {
    let (m, n, k) = (3usize, 5, 4);
    let matrix = |rows: usize, cols: usize, seed: f32| -> Vec<Vec<f32>> {
        (0..rows)
            .map(|i| {
                (0..cols)
                    .map(|j| ((i * 7 + j * 3) as f32 * seed).sin())
                    .collect()
            })
            .collect()
    };
    let (a, b) = (matrix(m, k, 0.37), matrix(k, n, 0.91));
    let expected: Vec<f32> = (0..m)
        .flat_map(|i| {
            (0..n)
                .map(|j| (0..k).map(|p| a[i][p] * b[p][j]).sum::<f32>())
                .collect::<Vec<_>>()
        })
        .collect();
    // NN, NT (y = x·Wᵀ), TN (dW = dyᵀ·x) and TT, with pitched rows (ld = width + 2).
    for (trans_a, trans_b) in [(false, false), (false, true), (true, false), (true, true)] {
        let width = |trans: bool, rows: usize, cols: usize| if trans { rows } else { cols };
        let (lda, ldb) = (width(trans_a, m, k) + 2, width(trans_b, k, n) + 2);
        let gemm = Gemm {
            dtype: GemmDtype::F32Tf32,
            m: m as u64,
            n: n as u64,
            k: k as u64,
            a: Operand {
                trans: trans_a,
                ld: lda as i64,
                batch_stride: 0,
            },
            b: Operand {
                trans: trans_b,
                ld: ldb as i64,
                batch_stride: 0,
            },
            batch: 1,
        };
        let call = gemm.column_major();
        let (a_data, b_data) = (store(&a, trans_a, lda), store(&b, trans_b, ldb));
        let got = column_major_product(&call, k, &b_data, &a_data);
        assert_eq!(got.len(), m * n);
        for (g, e) in got.iter().zip_eq(&expected) {
            assert!(
                (g - e).abs() < 1e-5,
                "trans {trans_a}/{trans_b}: {got:?} vs {expected:?}"
            );
        }
    }
}

#[test]
fn only_cuda_devices_take_cublas() {
    for mode in [
        MatmulMode::Cube,
        MatmulMode::Cublas,
        MatmulMode::Blas,
        MatmulMode::Auto,
    ] {
        assert_eq!(serves(mode, &Device::flex()), Ok(false));
        assert_eq!(serves(mode, &Device::flex().autodiff()), Ok(false));
    }
}
