//! Learning-rate and regulariser-weight schedules, as functions of the optimiser step `t`
//! (counted from 1, the step being taken).

/// Linear warm-up to `peak` over `warmup` steps, then linear decay towards 0 over the
/// remaining steps. HF's `get_linear_schedule_with_warmup` gives the first step a rate of 0 and
/// reaches 0 after the last; here every step learns: step 1 uses `peak / warmup` and step
/// `total` uses `peak / (total − warmup)`.
pub fn learning_rate(peak: f64, t: usize, warmup: usize, total: usize) -> f64 {
    if t <= warmup {
        peak * t as f64 / warmup as f64
    } else {
        peak * (total + 1 - t) as f64 / (total - warmup) as f64
    }
}

/// naver/splade's `RegWeightScheduler`: `λ·(t/T)²` until `t ≥ T`, then `λ`; T = 0 gives λ at
/// once.
pub fn regularizer_weight(lambda: f64, t: usize, warmup: usize) -> f64 {
    if t >= warmup {
        lambda
    } else {
        lambda * (t as f64 / warmup as f64).powi(2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn learning_rate_rises_linearly_then_decays_to_zero_after_the_last_step() {
        assert_eq!(learning_rate(1.0, 1, 4, 10), 0.25);
        assert_eq!(learning_rate(1.0, 4, 4, 10), 1.0);
        assert_eq!(learning_rate(1.0, 5, 4, 10), 1.0);
        assert!((learning_rate(1.0, 6, 4, 10) - 5.0 / 6.0).abs() < 1e-12);
        assert!((learning_rate(1.0, 10, 4, 10) - 1.0 / 6.0).abs() < 1e-12);
        assert_eq!(learning_rate(2.0, 1, 0, 1), 2.0);
    }

    #[test]
    fn regularizer_weight_is_quadratic_from_step_one() {
        assert_eq!(regularizer_weight(8.0, 1, 4), 0.5);
        assert_eq!(regularizer_weight(8.0, 2, 4), 2.0);
        assert_eq!(regularizer_weight(8.0, 4, 4), 8.0);
        assert_eq!(regularizer_weight(8.0, 9, 4), 8.0);
        assert_eq!(regularizer_weight(8.0, 1, 0), 8.0);
    }
}
