//! The benches of single operations: a matrix product at the model's shapes (`matmul`) and
//! the reductions over tokens (`reduce`).

use super::*;

#[derive(Args)]
pub struct ReduceBench {
    /// Rows of the column sum (tokens of a micro-batch: 64 documents × 256).
    #[arg(long, default_value_t = 16384, value_parser = crate::values::at_least_one)]
    rows: usize,
    /// Columns of the column sum (BERT-base's FFN width).
    #[arg(long, default_value_t = 3072, value_parser = crate::values::at_least_one)]
    width: usize,
    /// Texts of the SPLADE max.
    #[arg(long, default_value_t = 64, value_parser = crate::values::at_least_one)]
    batch: usize,
    /// Tokens per text of the SPLADE max.
    #[arg(long, default_value_t = 256, value_parser = crate::values::at_least_one)]
    seq_len: usize,
    /// Vocabulary terms of the SPLADE max (one head tile at the recipe's 128 × 256 document
    /// tokens, `lsr_splade::head_tile`).
    #[arg(long, default_value_t = 8192, value_parser = crate::values::at_least_one)]
    terms: usize,
    #[command(flatten)]
    repeat: Repeat<2, 10>,
}

#[derive(Serialize)]
struct ReduceReport {
    device: String,
    rows: usize,
    width: usize,
    /// The rows per block of the two-pass sum.
    block: usize,
    column_sum_one_pass_ms: f64,
    column_sum_two_pass_ms: f64,
    batch: usize,
    seq_len: usize,
    terms: usize,
    token_max_ms: f64,
}

#[derive(Args)]
pub struct MatmulBench {
    /// A product `[M, K]·[K, N]` as `NAME=MxKxN`, with a trailing `t` where the right operand is
    /// the transpose of an `[N, K]` matrix, as lsr's linear and decoder weights are (PyTorch's
    /// layout); repeat for several, measured one after the other in this process. Default: the
    /// MLM head at the encoding shape, `head=32768x768x30522t`.
    #[arg(long = "shape", value_parser = crate::values::product_shape)]
    shapes: Vec<ProductShape>,
    /// f32 (cubecl may use TF32 tensor cores) or bf16-mixed (bf16 operands and result).
    #[arg(long, default_value = "f32")]
    precision: Precision,
    #[command(flatten)]
    repeat: Repeat<2, 10>,
}

#[derive(Serialize)]
struct MatmulReport {
    /// The shape's name on the command line.
    shape: String,
    device: String,
    precision: Precision,
    /// How the products ran (`LSR_MATMUL` on this device): `cube`, `cublas` or `blas`.
    matmul: MatmulMode,
    /// The CPU BLAS library file, where products went there.
    #[serde(skip_serializing_if = "Option::is_none")]
    blas: Option<String>,
    m: usize,
    k: usize,
    n: usize,
    transposed_rhs: bool,
    seconds: f64,
    tflops: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    cublas: Option<CublasReport>,
}

pub(super) fn matmul(args: MatmulBench) -> Result<()> {
    let (device, harness) = args.repeat.start()?;
    let shapes = match args.shapes.is_empty() {
        true => vec![crate::values::product_shape("head=32768x768x30522t").expect("a shape")],
        false => args.shapes,
    };
    for shape in shapes {
        let report = product(&shape, args.precision, &device, &harness)?;
        print(&report, args.repeat.json, |report| {
            format!(
                "matmul {} [{}, {}]·[{}, {}]{} in {} on {} ({}): {:.3} ms, {:.1} TFLOP/s",
                report.shape,
                report.m,
                report.k,
                report.k,
                report.n,
                if report.transposed_rhs {
                    " (rhs transposed)"
                } else {
                    ""
                },
                report.precision,
                report.device,
                report.matmul.name(),
                report.seconds * 1e3,
                report.tflops
            )
        })?;
    }
    Ok(())
}

/// One shape of `lsr bench matmul`, timed where the model's products go.
fn product(
    shape: &ProductShape,
    precision: Precision,
    device: &Device,
    harness: &Harness,
) -> Result<MatmulReport> {
    use burn::tensor::Distribution;
    let dtype = precision.compute();
    let random = |dims: [usize; 2]| {
        Tensor::<2>::random(dims, Distribution::Normal(0.0, 1.0), device).cast(dtype)
    };
    let (m, k, n) = (shape.m, shape.k, shape.n);
    let lhs = random([m, k]);
    let rhs = match shape.transposed_rhs {
        true => random([n, k]).transpose(),
        false => random([k, n]),
    };
    // Each product dropped at once: ten `[m, n]` results would not fit together.
    let seconds = harness.seconds(|| drop(matmul::matmul(lhs.clone(), rhs.clone())))?;
    Ok(MatmulReport {
        shape: shape.name.clone(),
        device: format!("{device:?}"),
        precision,
        matmul: products_on(device),
        blas: harness.blas(),
        m,
        k,
        n,
        transposed_rhs: shape.transposed_rhs,
        seconds,
        tflops: 2.0 * (m * k * n) as f64 / seconds / 1e12,
        cublas: harness.cublas(),
    })
}

pub(super) fn reduce(args: ReduceBench) -> Result<()> {
    use burn::tensor::Distribution;
    let (device, harness) = args.repeat.start()?;
    let block = lsr_compute::norm::row_block(args.rows);
    let columns = Tensor::<2>::random([args.rows, args.width], Distribution::Default, &device);
    let logits = Tensor::<3>::random(
        [args.batch, args.seq_len, args.terms],
        Distribution::Default,
        &device,
    );
    let ms = |work: &dyn Fn() -> Tensor<1>| harness.seconds(work).map(|s| s * 1e3);
    let [rows, width] = [args.rows, args.width];
    let report = ReduceReport {
        device: format!("{device:?}"),
        rows,
        width,
        block,
        column_sum_one_pass_ms: ms(&|| columns.clone().sum_dim(0).flatten(0, 1))?,
        column_sum_two_pass_ms: ms(&|| {
            columns
                .clone()
                .reshape([rows / block, block, width])
                .sum_dim(0)
                .sum_dim(1)
                .flatten(0, 2)
        })?,
        batch: args.batch,
        seq_len: args.seq_len,
        terms: args.terms,
        token_max_ms: ms(&|| logits.clone().max_dim(1).flatten(0, 2))?,
    };
    print(&report, args.repeat.json, |report| {
        format!(
            "on {}: column sum [{rows}, {width}] {:.3} ms in one pass, {:.3} ms in two (blocks \
             of {block}); max over {} tokens of [{}, {}, {}] {:.3} ms",
            report.device,
            report.column_sum_one_pass_ms,
            report.column_sum_two_pass_ms,
            args.seq_len,
            args.batch,
            args.seq_len,
            args.terms,
            report.token_max_ms
        )
    })
}
