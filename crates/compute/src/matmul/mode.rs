//! `LSR_MATMUL`: how the model's products are computed, read once per process.

use crate::setting::Setting;

/// How products are computed, from `LSR_MATMUL`: `cube` (burn's matmul: cubecl's kernels on a
/// GPU, gemm on the CPU; the default), `cublas` (cuBLASLt on CUDA devices), `blas` (a CPU BLAS
/// loaded at run time, `LSR_BLAS`, for products on flex) or `auto` (cuBLASLt on CUDA devices and
/// the BLAS on flex, each where its library loads, else cube). `cublas` leaves flex to cube and
/// `blas` leaves GPUs to cube; in builds without the `cuda` feature, `cublas` is `cube`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum MatmulMode {
    Cube,
    Cublas,
    Blas,
    Auto,
}

impl Setting for MatmulMode {
    const VARIABLE: &'static str = "LSR_MATMUL";
    const NAMES: &'static [&'static str] = &["cube", "cublas", "blas", "auto"];

    fn from_index(index: usize) -> Self {
        [Self::Cube, Self::Cublas, Self::Blas, Self::Auto][index]
    }
}

impl MatmulMode {
    pub fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }
}

/// `LSR_MATMUL`, read once per process.
pub fn matmul_mode() -> std::result::Result<MatmulMode, String> {
    static MODE: std::sync::OnceLock<std::result::Result<MatmulMode, String>> =
        std::sync::OnceLock::new();
    MODE.get_or_init(MatmulMode::from_environment).clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lsr_matmul_values_parse_and_a_bad_one_names_the_variable_and_the_choices() {
        assert_eq!(MatmulMode::parse(None), Ok(MatmulMode::Cube));
        assert_eq!(MatmulMode::parse(Some("")), Ok(MatmulMode::Cube));
        for name in MatmulMode::NAMES {
            assert_eq!(MatmulMode::parse(Some(name)).unwrap().name(), *name);
        }
        let error = MatmulMode::parse(Some("cuBLAS")).unwrap_err();
        assert!(
            error.contains("LSR_MATMUL=`cuBLAS`") && error.contains("cube, cublas, blas, auto"),
            "{error}"
        );
    }
}
