//! Learning-rate and regulariser-weight schedules, as functions of the optimiser step `t`
//! (counted from 1, the step being taken).

use serde::{Deserialize, Serialize};

/// Where the linear learning-rate warm-up starts.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Warmup {
    /// transformers' `get_linear_schedule_with_warmup`, which naver/splade uses: the scheduler
    /// is stepped after the optimiser, so step `t` takes the rate of index `t − 1`: the first
    /// step learns nothing (rate 0) and the peak is reached at step `warmup + 1`.
    #[default]
    FromZero,
    /// Every step learns: step 1 takes `peak / warmup`, step `warmup` the peak.
    FromFirstStep,
}

/// Linear warm-up to `peak` over `warmup` steps, then linear decay: step `total` takes
/// `peak / (total − warmup)`, as transformers' schedule does under either warm-up.
pub fn learning_rate(peak: f64, t: usize, warmup: usize, total: usize, start: Warmup) -> f64 {
    let (ramp, warming) = match start {
        Warmup::FromZero => (t - 1, t - 1 < warmup),
        Warmup::FromFirstStep => (t, t <= warmup),
    };
    if warming {
        peak * ramp as f64 / warmup as f64
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

    /// transformers' `get_linear_schedule_with_warmup` multiplier at scheduler index `s`.
    fn transformers_lambda(s: usize, warmup: usize, total: usize) -> f64 {
        if s < warmup {
            s as f64 / warmup.max(1) as f64
        } else {
            0f64.max((total - s) as f64 / 1usize.max(total - warmup) as f64)
        }
    }

    #[test]
    fn from_zero_is_transformers_schedule_stepped_after_the_optimiser() {
        for (warmup, total) in [(4, 10), (0, 5), (3, 3), (1, 2)] {
            for t in 1..=total {
                let ours = learning_rate(2.0, t, warmup, total, Warmup::FromZero);
                let theirs = 2.0 * transformers_lambda(t - 1, warmup, total);
                assert!((ours - theirs).abs() < 1e-12, "w {warmup} T {total} t {t}");
            }
        }
        assert_eq!(learning_rate(1.0, 1, 4, 10, Warmup::FromZero), 0.0);
        assert_eq!(learning_rate(1.0, 5, 4, 10, Warmup::FromZero), 1.0);
    }

    #[test]
    fn from_first_step_rises_linearly_then_decays_to_zero_after_the_last_step() {
        let lr = |t, w, total| learning_rate(1.0, t, w, total, Warmup::FromFirstStep);
        assert_eq!(lr(1, 4, 10), 0.25);
        assert_eq!(lr(4, 4, 10), 1.0);
        assert_eq!(lr(5, 4, 10), 1.0);
        assert!((lr(6, 4, 10) - 5.0 / 6.0).abs() < 1e-12);
        assert!((lr(10, 4, 10) - 1.0 / 6.0).abs() < 1e-12);
        assert_eq!(learning_rate(2.0, 1, 0, 1, Warmup::FromFirstStep), 2.0);
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
