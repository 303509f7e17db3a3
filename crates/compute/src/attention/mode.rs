//! `LSR_ATTENTION`: whether attention runs as the fused kernels where a device has them, read
//! once per process.

use crate::setting::Setting;

/// How attention is computed, from `LSR_ATTENTION`: `composed` (the default: burn's operations,
/// the scores as a `[B, H, L, L]` tensor, on every device) or `fused` (lsr's kernels on the cube
/// backends, for the shapes and dtypes they serve, else composed). Fused is not the default
/// until a GPU has measured it faster: on an H200 (2026-12-04, `docs/gpu/2026-12-04.md`) its
/// values and gradients were right, but the recipe's train step with it did not finish twelve
/// steps in 90 s, where composed took 0.31 s a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum AttentionMode {
    Composed,
    Fused,
}

impl Setting for AttentionMode {
    const VARIABLE: &'static str = "LSR_ATTENTION";
    const NAMES: &'static [&'static str] = &["composed", "fused"];

    fn from_index(index: usize) -> Self {
        [Self::Composed, Self::Fused][index]
    }
}

impl AttentionMode {
    pub fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }
}

/// `LSR_ATTENTION`, read once per process.
pub fn attention_mode() -> std::result::Result<AttentionMode, String> {
    static MODE: std::sync::OnceLock<std::result::Result<AttentionMode, String>> =
        std::sync::OnceLock::new();
    MODE.get_or_init(AttentionMode::from_environment).clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lsr_attention_values_parse_and_a_bad_one_names_the_choices() {
        assert_eq!(AttentionMode::parse(None), Ok(AttentionMode::Composed));
        assert_eq!(
            AttentionMode::parse(Some("fused")),
            Ok(AttentionMode::Fused)
        );
        let error = AttentionMode::parse(Some("flash")).unwrap_err();
        assert!(
            error.contains("LSR_ATTENTION=`flash`") && error.contains("composed, fused"),
            "{error}"
        );
    }
}
