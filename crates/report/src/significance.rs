//! Paired significance tests between two systems scored on the same queries: the paired
//! Student t-test with the confidence interval of the mean difference, the paired randomisation
//! test (random sign flips of the differences), and Holm–Bonferroni's adjustment of a family of
//! p-values. Each computes what scipy does (`ttest_rel`, `permutation_test` with
//! `permutation_type='samples'`), checked against it on `data/fixtures/significance/`. `lsr
//! compare` runs all of them on TREC runs ([`against_baseline`]); Table 1's marks use the t-test
//! and Holm only (`marks.rs`), which need no random numbers.

use std::collections::BTreeMap;

use rand::{Rng, SeedableRng, rngs::StdRng};
use serde::Serialize;
use statrs::distribution::{ContinuousCDF, StudentsT};

use crate::error::{ReportError, Result};

/// The confidence of the interval around a mean difference.
pub const CONFIDENCE: f64 = 0.95;

/// Two systems' values on the same queries, at least two of them: `a`, the baseline's, and
/// `b`; the differences are b − a.
#[derive(Clone, Debug)]
pub struct Paired {
    pairs: Vec<(f64, f64)>,
}

/// The paired two-sided Student t-test of the differences (`scipy.stats.ttest_rel(b, a)`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct TTest {
    pub queries: usize,
    pub mean_a: f64,
    pub mean_b: f64,
    /// The mean of b − a.
    pub difference: f64,
    /// The [`CONFIDENCE`] interval of `difference` (Student t).
    pub interval: [f64; 2],
    /// ±∞ when every difference is the same value but 0 (JSON writes it as null); 0 when every
    /// difference is 0, where scipy's 0/0 gives nan.
    pub t: f64,
    /// 1 when every difference is 0.
    pub p: f64,
}

/// The paired randomisation test of the mean difference: two-sided, over the sign patterns of
/// the differences.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Permutation {
    pub p: f64,
    /// The sign patterns the p-value is over: all 2^n when `exact`, else the random ones drawn.
    pub resamples: usize,
    pub exact: bool,
}

impl Paired {
    /// `pairs` as (baseline, other); fewer than 2 is an error naming `comparison`.
    pub fn new(comparison: &str, pairs: Vec<(f64, f64)>) -> Result<Self> {
        if pairs.len() < 2 {
            let message = format!(
                "{} paired value(s); a paired test needs at least 2",
                pairs.len()
            );
            return Err(ReportError::test(comparison, message));
        }
        Ok(Self { pairs })
    }

    /// The two systems' values paired by key (query, or data set); keys on one side only are an
    /// error naming the comparison and a key: the systems were not scored on the same queries.
    pub fn by_key(
        comparison: &str,
        a: &BTreeMap<String, f64>,
        b: &BTreeMap<String, f64>,
    ) -> Result<Self> {
        let only = |x: &BTreeMap<String, f64>, y: &BTreeMap<String, f64>| {
            x.keys().find(|key| !y.contains_key(*key)).cloned()
        };
        if let Some(key) = only(a, b).or_else(|| only(b, a)) {
            let message = format!(
                "`{key}` has a value on one side only ({} against {}); a paired test needs the \
                 same queries on both",
                a.len(),
                b.len()
            );
            return Err(ReportError::test(comparison, message));
        }
        let pairs = a.iter().map(|(key, value)| (*value, b[key])).collect();
        Self::new(comparison, pairs)
    }

    fn differences(&self) -> Vec<f64> {
        self.pairs.iter().map(|(a, b)| b - a).collect()
    }

    pub fn t_test(&self) -> TTest {
        let n = self.pairs.len() as f64;
        let differences = self.differences();
        let difference = mean(differences.iter().copied());
        let variance = differences
            .iter()
            .map(|d| (d - difference).powi(2))
            .sum::<f64>()
            / (n - 1.0);
        let standard_error = (variance / n).sqrt();
        let student = StudentsT::new(0.0, 1.0, n - 1.0).expect("n ≥ 2: at least 1 freedom");
        let half_width = student.inverse_cdf(0.5 + CONFIDENCE / 2.0) * standard_error;
        let (t, p) = if standard_error == 0.0 && difference == 0.0 {
            (0.0, 1.0)
        } else {
            let t = difference / standard_error;
            (t, 2.0 * student.sf(t.abs()))
        };
        TTest {
            queries: self.pairs.len(),
            mean_a: mean(self.pairs.iter().map(|(a, _)| *a)),
            mean_b: mean(self.pairs.iter().map(|(_, b)| *b)),
            difference,
            interval: [difference - half_width, difference + half_width],
            t,
            p,
        }
    }

    /// The two-sided p of the mean difference under sign flips, as scipy's `permutation_test`
    /// computes it: over every sign pattern when 2^n ≤ `permutations` (exact), else over
    /// `permutations` random ones from a `StdRng` seeded with `seed`, the observed pattern
    /// counted in ((count + 1) / (permutations + 1)). A mean within scipy's tolerance of the
    /// observed one (100 ε relative) counts as equal to it; p = min(1, 2 · the smaller tail).
    pub fn permutation(&self, permutations: usize, seed: u64) -> Permutation {
        let differences = self.differences();
        let observed = signed_mean(&differences, || u64::MAX);
        let tolerance = (observed * 100.0 * f64::EPSILON).abs();
        let (mut less, mut greater) = (0, 0);
        let mut count = |null: f64| {
            less += usize::from(null <= observed + tolerance);
            greater += usize::from(null >= observed - tolerance);
        };
        let n = differences.len();
        let exact = n < 64 && 1u64 << n <= permutations as u64;
        let (resamples, adjustment) = if exact {
            for pattern in 0..1u64 << n {
                count(signed_mean(&differences, || pattern));
            }
            (1 << n, 0)
        } else {
            let mut rng = StdRng::seed_from_u64(seed);
            for _ in 0..permutations {
                count(signed_mean(&differences, || rng.random()));
            }
            (permutations, 1)
        };
        let tail = |hits: usize| (hits + adjustment) as f64 / (resamples + adjustment) as f64;
        Permutation {
            p: (2.0 * tail(less).min(tail(greater))).min(1.0),
            resamples,
            exact,
        }
    }
}

fn mean(values: impl ExactSizeIterator<Item = f64>) -> f64 {
    let n = values.len() as f64;
    values.sum::<f64>() / n
}

/// The mean of `differences` with signs from the bits `words` yields, 64 differences a word:
/// difference i keeps its sign where bit i % 64 of word i / 64 is set.
fn signed_mean(differences: &[f64], mut words: impl FnMut() -> u64) -> f64 {
    let mut sum = 0.0;
    for chunk in differences.chunks(64) {
        let bits = words();
        for (i, d) in chunk.iter().enumerate() {
            sum += if bits >> i & 1 == 1 { *d } else { -d };
        }
    }
    sum / differences.len() as f64
}

/// Holm–Bonferroni adjusted p-values of a family, in its order: the i-th smallest (from 0)
/// times m − i, capped at 1, and never below the adjusted value of a smaller one.
pub fn holm(p: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..p.len()).collect();
    order.sort_by(|&i, &j| p[i].total_cmp(&p[j]));
    let mut adjusted = vec![0.0; p.len()];
    let mut running = 0.0f64;
    for (rank, &i) in order.iter().enumerate() {
        running = running.max(((p.len() - rank) as f64 * p[i]).min(1.0));
        adjusted[i] = running;
    }
    adjusted
}

/// How a family of comparisons is tested.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Settings {
    /// Random sign patterns of the permutation test (all of them where 2^n is not more).
    pub permutations: usize,
    /// The seed of each comparison's permutations (each starts from it, so that a comparison's
    /// p does not depend on the others).
    pub seed: u64,
    /// The level the Holm-adjusted p-values are judged at.
    pub alpha: f64,
}

/// One system against the baseline.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Comparison {
    pub baseline: String,
    pub system: String,
    pub t_test: TTest,
    pub permutation: Permutation,
    /// The p-values adjusted over the family (Holm; the same for a single comparison).
    pub t_test_p_holm: f64,
    pub permutation_p_holm: f64,
    /// Whether each adjusted p-value is below alpha.
    pub t_test_significant: bool,
    pub permutation_significant: bool,
}

/// Every system against one baseline, on one measure.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Family {
    pub measure: String,
    pub confidence: f64,
    #[serde(flatten)]
    pub settings: Settings,
    pub comparisons: Vec<Comparison>,
}

/// Each of `systems` (name, value per query) against `baseline`, on the same queries, with both
/// tests and Holm over the family.
pub fn against_baseline(
    measure: &str,
    baseline: (&str, &BTreeMap<String, f64>),
    systems: &[(String, BTreeMap<String, f64>)],
    settings: Settings,
) -> Result<Family> {
    let mut tests = Vec::new();
    for (system, values) in systems {
        let comparison = format!("{system} against {} on {measure}", baseline.0);
        let paired = Paired::by_key(&comparison, baseline.1, values)?;
        tests.push((
            paired.t_test(),
            paired.permutation(settings.permutations, settings.seed),
        ));
    }
    let t_holm = holm(&tests.iter().map(|(t, _)| t.p).collect::<Vec<_>>());
    let permutation_holm = holm(&tests.iter().map(|(_, p)| p.p).collect::<Vec<_>>());
    let comparisons = (systems.iter().zip(tests))
        .zip(t_holm.into_iter().zip(permutation_holm))
        .map(
            |(((system, _), (t_test, permutation)), (t_holm, p_holm))| Comparison {
                baseline: baseline.0.to_string(),
                system: system.clone(),
                t_test,
                permutation,
                t_test_p_holm: t_holm,
                permutation_p_holm: p_holm,
                t_test_significant: t_holm < settings.alpha,
                permutation_significant: p_holm < settings.alpha,
            },
        )
        .collect();
    Ok(Family {
        measure: measure.to_string(),
        confidence: CONFIDENCE,
        settings,
        comparisons,
    })
}

impl Family {
    /// What was tested and how, then a Markdown table, a row per comparison (the Holm columns
    /// only where there are several).
    pub fn text(&self) -> String {
        let several = self.comparisons.len() > 1;
        let confidence = self.confidence * 100.0;
        let mut text = format!(
            "{}\n\n| baseline | run | queries | mean baseline | mean run | difference | \
             {confidence:.0}% CI | t | p (t-test) | p (permutation) |",
            self.description()
        );
        if several {
            text.push_str(" p (t-test, Holm) | p (permutation, Holm) |");
        }
        text.push_str(" significant (t-test / permutation) |\n");
        text.push_str(&"|---".repeat(if several { 13 } else { 11 }));
        text.push_str("|\n");
        for c in &self.comparisons {
            text.push_str(&c.row(several));
        }
        text
    }

    /// What was tested, and how, in a sentence.
    fn description(&self) -> String {
        let Settings {
            permutations,
            seed,
            alpha,
        } = self.settings;
        let m = self.comparisons.len();
        let (holm, adjusted) = match m {
            1 => (String::new(), ""),
            _ => (
                format!("; Holm–Bonferroni over the {m} comparisons"),
                "Holm-adjusted ",
            ),
        };
        format!(
            "{}: paired two-sided t-test (Student t); paired two-sided randomisation test: \
             {permutations} random sign flips of the per-query differences (seed {seed}), or all \
             2^n sign patterns where 2^n ≤ {permutations} (exact); {:.0}% confidence interval of \
             the mean difference (Student t){holm}; significant: {adjusted}p < α = {alpha}.",
            self.measure,
            self.confidence * 100.0
        )
    }
}

impl Comparison {
    fn row(&self, holm: bool) -> String {
        let t = &self.t_test;
        let [low, high] = t.interval;
        let exact = if self.permutation.exact {
            " (exact)"
        } else {
            ""
        };
        let mut row = format!(
            "| {} | {} | {} | {:.4} | {:.4} | {:+.4} | [{low:+.4}, {high:+.4}] | {:.3} | {} | {}{exact} |",
            self.baseline,
            self.system,
            t.queries,
            t.mean_a,
            t.mean_b,
            t.difference,
            t.t,
            p_text(t.p),
            p_text(self.permutation.p),
        );
        if holm {
            let (t_holm, p_holm) = (p_text(self.t_test_p_holm), p_text(self.permutation_p_holm));
            row.push_str(&format!(" {t_holm} | {p_holm} |"));
        }
        let yes = |significant: bool| if significant { "yes" } else { "no" };
        row.push_str(&format!(
            " {} / {} |\n",
            yes(self.t_test_significant),
            yes(self.permutation_significant)
        ));
        row
    }
}

/// A p-value in four decimals, or in scientific notation where those would show 0.
fn p_text(p: f64) -> String {
    if p == 0.0 || p >= 1e-4 {
        format!("{p:.4}")
    } else {
        format!("{p:.1e}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paired(a: &[f64], b: &[f64]) -> Paired {
        Paired::new("a test", a.iter().copied().zip(b.iter().copied()).collect()).unwrap()
    }

    #[test]
    fn all_differences_zero_give_p_one_in_both_tests() {
        let test = paired(&[0.1, 0.5, 0.0], &[0.1, 0.5, 0.0]);
        let t = test.t_test();
        assert_eq!(
            (t.t, t.p, t.difference, t.interval),
            (0.0, 1.0, 0.0, [0.0; 2])
        );
        assert_eq!(test.permutation(100, 1).p, 1.0);
        assert_eq!(test.permutation(2, 1).p, 1.0, "randomized");
    }

    #[test]
    fn differences_without_variance_give_an_infinite_t_and_p_zero() {
        let up = paired(&[0.0, 0.25, 0.5], &[0.5, 0.75, 1.0]).t_test();
        assert_eq!((up.t, up.p, up.interval), (f64::INFINITY, 0.0, [0.5, 0.5]));
        let down = paired(&[0.5, 0.75], &[0.0, 0.25]).t_test();
        assert_eq!((down.t, down.p), (f64::NEG_INFINITY, 0.0));
    }

    #[test]
    fn fewer_than_two_pairs_or_different_queries_are_errors_naming_the_comparison() {
        let error = Paired::new("b against a on ndcg@10", vec![(0.5, 1.0)]).unwrap_err();
        let error = error.to_string();
        assert!(
            error.starts_with("b against a on ndcg@10: 1 paired value(s)"),
            "{error}"
        );
        let a = BTreeMap::from([("q1".to_string(), 0.5), ("q2".to_string(), 0.25)]);
        let b = BTreeMap::from([("q1".to_string(), 0.5), ("q3".to_string(), 0.25)]);
        let error = Paired::by_key("b against a", &a, &b)
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("b against a: `q2` has a value on one side only"),
            "{error}"
        );
    }

    /// Exact where 2^n fits in the permutations asked: with 3 differences of one sign, the
    /// observed pattern is 1 of 8 in each tail's extreme, p = 2/8; one more than 2^n
    /// permutations asked changes nothing, one fewer draws them at random (seeded).
    #[test]
    fn small_samples_enumerate_every_sign_pattern_and_large_ones_draw_them_by_seed() {
        let test = paired(&[0.0, 0.0, 0.0], &[0.1, 0.2, 0.4]);
        let exact = test.permutation(8, 7);
        assert_eq!(
            exact,
            Permutation {
                p: 0.25,
                resamples: 8,
                exact: true
            }
        );
        assert_eq!(test.permutation(9, 3), exact);
        let drawn = test.permutation(7, 7);
        assert!(!drawn.exact && drawn.resamples == 7);
        assert_eq!(drawn, test.permutation(7, 7), "the same seed, the same p");
        // (count + 1) / 8 for each tail: a multiple of 1/8, at least 2/8.
        assert!(
            drawn.p >= 0.25 && (drawn.p * 8.0).fract() == 0.0,
            "{drawn:?}"
        );
    }

    #[test]
    fn holm_multiplies_by_the_rank_from_the_top_and_keeps_the_order() {
        let adjusted = holm(&[0.04, 0.01, 0.03, 0.5]);
        assert_eq!(adjusted, [0.09, 0.04, 0.09, 0.5]);
        assert_eq!(holm(&[0.3, 0.4]), [0.6, 0.6], "never below a smaller one's");
        assert_eq!(holm(&[0.02]), [0.02]);
        assert!(holm(&[]).is_empty());
    }

    /// `data/fixtures/significance/cases.json` (`scripts/fixtures/significance.py`): scipy's
    /// t-test and interval to 1e-9 (relative where large), its exact permutation p exactly, its
    /// randomized one within 4 standard errors of the two draws' Monte Carlo error, and Holm
    /// exactly. Where scipy's t is 0/0 (every difference 0), lsr's is 0 with p = 1.
    #[test]
    fn the_tests_give_what_scipy_gives_on_the_committed_fixture() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../data/fixtures/significance/cases.json"
        );
        let text = std::fs::read_to_string(path).unwrap();
        let fixture: serde_json::Value = serde_json::from_str(&text).unwrap();
        let resamples = fixture["resamples"].as_u64().unwrap() as usize;
        let number = |v: &serde_json::Value| match v.as_str() {
            Some(text) => text.parse::<f64>().unwrap(),
            None => v.as_f64().unwrap(),
        };
        let numbers = |v: &serde_json::Value| -> Vec<f64> {
            v.as_array().unwrap().iter().map(number).collect()
        };
        let close = |ours: f64, theirs: f64| {
            ours == theirs || (ours - theirs).abs() <= 1e-9 * theirs.abs().max(1.0)
        };
        for case in fixture["cases"].as_array().unwrap() {
            let name = case["name"].as_str().unwrap();
            let (a, b) = (numbers(&case["a"]), numbers(&case["b"]));
            let test = paired(&a, &b);
            let t = test.t_test();
            let (scipy_t, scipy_p) = match (number(&case["t"]), number(&case["p"])) {
                (t, p) if t.is_nan() && p.is_nan() => (0.0, 1.0),
                other => other,
            };
            assert!(close(t.t, scipy_t), "{name}: t {} != {scipy_t}", t.t);
            assert!(close(t.p, scipy_p), "{name}: p {} != {scipy_p}", t.p);
            assert!(close(t.difference, number(&case["difference"])), "{name}");
            for (ours, theirs) in t.interval.iter().zip(numbers(&case["interval"])) {
                assert!(close(*ours, theirs), "{name}: interval {:?}", t.interval);
            }
            let scipy = &case["permutation"];
            let theirs = number(&scipy["p"]);
            let ours = test.permutation(resamples, 1);
            assert_eq!(ours.exact, scipy["exact"].as_bool().unwrap(), "{name}");
            assert_eq!(
                ours.resamples as u64,
                scipy["n_resamples"].as_u64().unwrap()
            );
            if ours.exact {
                assert_eq!(ours.p, theirs, "{name}: exact permutation p");
            } else {
                // Each p is twice a tail's frequency q over `resamples` draws.
                let q = (theirs / 2.0).clamp(1.0 / resamples as f64, 0.5);
                let error = (2.0 * 4.0 * q * (1.0 - q) / resamples as f64).sqrt();
                assert!(
                    (ours.p - theirs).abs() <= 4.0 * error,
                    "{name}: permutation p {} against scipy's {theirs} (±{error})",
                    ours.p
                );
            }
        }
        let family = &fixture["holm"];
        assert_eq!(holm(&numbers(&family["p"])), numbers(&family["adjusted"]));
    }

    #[test]
    fn a_family_adjusts_both_tests_and_judges_them_at_alpha() {
        let values = |v: &[f64]| -> BTreeMap<String, f64> {
            v.iter()
                .enumerate()
                .map(|(i, x)| (format!("q{i}"), *x))
                .collect()
        };
        let base = values(&[0.1, 0.2, 0.3, 0.4, 0.5, 0.6]);
        let systems = vec![
            ("up".to_string(), values(&[0.3, 0.5, 0.5, 0.7, 0.8, 0.9])),
            ("same".to_string(), values(&[0.2, 0.1, 0.4, 0.3, 0.6, 0.5])),
        ];
        let settings = Settings {
            permutations: 1000,
            seed: 1,
            alpha: 0.05,
        };
        let family = against_baseline("ndcg@10", ("base", &base), &systems, settings).unwrap();
        let [up, same] = &family.comparisons[..] else {
            panic!()
        };
        assert!(up.t_test_significant && up.permutation.exact);
        assert!(!same.t_test_significant && !same.permutation_significant);
        assert_eq!(up.t_test_p_holm, holm(&[up.t_test.p, same.t_test.p])[0]);
        let text = family.text();
        assert!(
            text.contains("Holm–Bonferroni over the 2 comparisons"),
            "{text}"
        );
        assert!(
            text.contains("| base | up | 6 | 0.3500 | 0.6167 | +0.2667 |"),
            "{text}"
        );
    }
}
