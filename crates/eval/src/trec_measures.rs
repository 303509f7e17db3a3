//! The per-query measures of trec_eval's own sets beyond the common ones: `official`'s bpref
//! and interpolated precision, and `all_trec`'s infAP, Rprec_mult, utility, 11pt_avg, binG, G,
//! ndcg_rel, Rndcg, map_cut, relative_P, success, the set measures, relstring and
//! num_nonrel_judged_ret; each as trec_eval 9.0.8's `m_<name>.c` computes it, step for step
//! where floating-point order could show in the fourth decimal.

use std::collections::HashMap;

use lsr_data::trec::ranked;

/// trec_eval's `INFAP_EPSILON`.
const INFAP_EPSILON: f64 = 0.00001;

/// One query's ranking against its judgements, as trec_eval's measures see it.
pub(crate) struct Ranking<'a> {
    /// Each ranked document's grade, None where it is not judged. A negative grade is a
    /// document pooled but not judged (trec_eval's "unjudged in pool").
    pub judged: &'a [Option<i32>],
    pub judgements: &'a HashMap<String, i32>,
    /// The grade from which a document is relevant.
    pub level: i32,
    /// Judged documents at or above `level` (trec_eval's `num_rel`).
    pub num_relevant: usize,
}

impl Ranking<'_> {
    fn relevant(&self, grade: Option<i32>) -> bool {
        grade.is_some_and(|g| g >= self.level)
    }

    fn num_ret(&self) -> usize {
        self.judged.len()
    }

    /// Relevant documents among the first `k`.
    fn found_in(&self, k: usize) -> usize {
        self.judged
            .iter()
            .take(k)
            .filter(|&&g| self.relevant(g))
            .count()
    }

    fn num_rel_ret(&self) -> usize {
        self.found_in(self.num_ret())
    }

    /// A document's gain for the gain-based measures: its grade, 0 unless judged ≥ 0.
    fn gain(grade: Option<i32>) -> f64 {
        grade.filter(|&g| g >= 0).map_or(0.0, f64::from)
    }

    /// The ideal ranking's gains: the positive grades, highest first (then 0 forever).
    fn ideal(&self) -> Vec<f64> {
        let mut ideal: Vec<i32> = self
            .judgements
            .values()
            .copied()
            .filter(|&g| g > 0)
            .collect();
        ideal.sort_unstable_by(|a, b| b.cmp(a));
        ideal.into_iter().map(f64::from).collect()
    }

    /// Judged non-relevant documents retrieved (`num_nonrel_judged_ret`).
    pub fn nonrelevant_judged_retrieved(&self) -> usize {
        let judged_below = |g: &&Option<i32>| g.is_some_and(|g| (0..self.level).contains(&g));
        self.judged.iter().filter(judged_below).count()
    }

    /// The first 10 documents' grades as characters (`relstring`): the grade, `>` above 9, `-`
    /// not judged, `.` pooled but not judged.
    pub fn relstring(&self) -> String {
        let char_of = |grade: &Option<i32>| match *grade {
            None => '-',
            Some(g) if g < 0 => '.',
            Some(g) if g > 9 => '>',
            Some(g) => char::from(b'0' + g as u8),
        };
        self.judged.iter().take(10).map(char_of).collect()
    }
}

/// Each document of a query's ranking (trec_eval's order: score descending, ties by id
/// descending) with its grade, None where it is not judged.
pub(crate) fn judged_ranking(
    docs: &[(String, f64)],
    judgements: &HashMap<String, i32>,
) -> Vec<Option<i32>> {
    ranked(docs)
        .iter()
        .map(|(doc, _)| judgements.get(*doc).copied())
        .collect()
}

/// `part / whole`, 0 when `whole` is 0 (a query without relevant documents scores 0).
pub(crate) fn ratio(part: impl Into<f64>, whole: usize) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part.into() / whole as f64
    }
}

/// `bpref`: for each judged relevant document, 1 less the share of the judged non-relevant ones
/// (at most R of them) ranked above it, over R; unjudged documents are skipped.
pub(crate) fn bpref(r: &Ranking) -> f64 {
    let num_nonrelevant = r
        .judgements
        .values()
        .filter(|&&g| (0..r.level).contains(&g))
        .count();
    let mut nonrelevant_above = 0usize;
    let mut sum = 0.0;
    for &grade in r.judged.iter().flatten().filter(|&&g| g >= 0) {
        if grade < r.level {
            nonrelevant_above += 1;
        } else if nonrelevant_above > 0 {
            let worse = nonrelevant_above.min(r.num_relevant) as f64;
            sum += 1.0 - worse / num_nonrelevant.min(r.num_relevant) as f64;
        } else {
            sum += 1.0;
        }
    }
    ratio(sum, r.num_relevant)
}

/// `infAP`: average precision inferred from a judged sample of the pool, where pooled but
/// unjudged documents count as relevant in the judged ones' proportion.
pub(crate) fn inferred_ap(r: &Ranking) -> f64 {
    let (mut relevant, mut nonrelevant, mut unjudged) = (0usize, 0usize, 0usize);
    let mut sum = 0.0;
    for (j, grade) in r.judged.iter().enumerate() {
        match *grade {
            None => continue,
            Some(g) if g < 0 => unjudged += 1,
            Some(g) if g < r.level => nonrelevant += 1,
            Some(_) => {
                relevant += 1;
                if j == 0 {
                    sum += 1.0;
                    continue;
                }
                let fj = j as f64;
                let above = (relevant - 1 + nonrelevant + unjudged) as f64;
                let relevant_above = (relevant - 1) as f64;
                sum += 1.0 / (fj + 1.0)
                    + (fj / (fj + 1.0))
                        * (above / fj)
                        * ((relevant_above + INFAP_EPSILON)
                            / (relevant_above + nonrelevant as f64 + 2.0 * INFAP_EPSILON));
            }
        }
    }
    ratio(sum, r.num_relevant)
}

/// A share of R (in hundredths) as a number of documents, as trec_eval rounds it: ⌊p·R + 0.9⌋.
fn share_of_relevant(hundredths: u16, num_relevant: usize) -> usize {
    (f64::from(hundredths) / 100.0 * num_relevant as f64 + 0.9) as usize
}

/// `iprec_at_recall`: the highest precision at any rank where recall is at least `recall`
/// hundredths; 0 past the recall reached.
pub(crate) fn interpolated_precision(r: &Ranking, recall: u8) -> f64 {
    let needed = share_of_relevant(u16::from(recall), r.num_relevant);
    let num_found = r.num_rel_ret();
    if needed > num_found {
        return 0.0;
    }
    // Walk back from the last rank, keeping the best precision seen, down to the rank where
    // the `needed`-th relevant document is (or the first rank, when `needed` is 0).
    let mut best = ratio(num_found as f64, r.num_ret());
    let mut found = num_found;
    for (i, &grade) in r.judged.iter().enumerate().rev() {
        if found == 0 {
            break;
        }
        best = best.max(found as f64 / (i + 1) as f64);
        if r.relevant(grade) {
            if found == needed {
                return best;
            }
            found -= 1;
        }
    }
    best
}

/// `11pt_avg`: interpolated precision averaged over recall 0, 0.1, …, 1, summed from 1 down
/// as trec_eval sums it.
pub(crate) fn eleven_point_average(r: &Ranking) -> f64 {
    let sum: f64 = (0..=10u8)
        .rev()
        .map(|tenths| interpolated_precision(r, tenths * 10))
        .sum();
    sum / 11.0
}

/// `Rprec_mult`: precision at a multiple of R (given in hundredths), the rank rounded as
/// trec_eval rounds it; 0 where that rank is 0.
pub(crate) fn precision_at_multiple_of_r(r: &Ranking, multiple: u16) -> f64 {
    match share_of_relevant(multiple, r.num_relevant) {
        0 => 0.0,
        rank => r.found_in(rank) as f64 / rank as f64,
    }
}

/// `utility` with trec_eval's default coefficients (1, -1, 0, 0): relevant retrieved less
/// non-relevant retrieved.
pub(crate) fn utility(r: &Ranking) -> f64 {
    let found = r.num_rel_ret();
    found as f64 - (r.num_ret() - found) as f64
}

/// `binG`: over R, each relevant document's 1 / log2(2 + non-relevant documents above it).
pub(crate) fn binary_g(r: &Ranking) -> f64 {
    let mut found = 0usize;
    let mut sum = 0.0;
    for (i, &grade) in r.judged.iter().enumerate() {
        if r.relevant(grade) {
            found += 1;
            sum += 1.0 / ((3 + i - found) as f64).log2();
        }
    }
    if found == 0 {
        0.0
    } else {
        sum / r.num_relevant as f64
    }
}

/// `G`: each document's gain over log2(2 + the gain the ideal ranking has collected by then,
/// each rank costing at least 1, less the gain collected), over the ideal's total gain.
pub(crate) fn g(r: &Ranking) -> f64 {
    let ideal = r.ideal();
    let ideal_at = |i: usize| ideal.get(i).copied().unwrap_or(0.0);
    let (mut collected, mut cost, mut sum) = (0.0, 0.0, 0.0);
    for (i, &grade) in r.judged.iter().enumerate() {
        let gain = Ranking::gain(grade);
        collected += gain;
        cost += ideal_at(i).max(1.0);
        if gain != 0.0 {
            sum += gain / (2.0 + cost - collected).log2();
        }
    }
    let ideal_total: f64 = ideal.iter().sum();
    if ideal_total > 0.0 {
        sum / ideal_total
    } else {
        0.0
    }
}

/// The discount of rank `i` (0-based): log2(i + 2).
fn discount(i: usize) -> f64 {
    ((i + 2) as f64).log2()
}

/// `ndcg_rel`: nDCG averaged over the ranks of the relevant documents, those not retrieved
/// counting the nDCG of the whole ranking. Walked as trec_eval walks it: the ideal ranking
/// beside the ranking while its gain is positive, then past the ranking's end.
pub(crate) fn ndcg_rel(r: &Ranking) -> f64 {
    let ideal = r.ideal();
    let ideal_at = |i: usize| ideal.get(i).copied().unwrap_or(0.0);
    let (mut results_dcg, mut ideal_dcg, mut sum) = (0.0, 0.0, 0.0);
    let (mut num_rel, mut num_rel_ret) = (0i64, 0i64);
    let mut ideal_gain = ideal_at(0);
    for i in 0..r.num_ret() {
        let beside_ideal = ideal_gain > 0.0;
        let gain = Ranking::gain(r.judged[i]);
        if gain != 0.0 {
            results_dcg += gain / discount(i);
        }
        if beside_ideal {
            ideal_gain = ideal_at(i);
            if ideal_gain > 0.0 {
                num_rel += 1;
                ideal_dcg += ideal_gain / discount(i);
            }
        }
        if gain > 0.0 {
            sum += results_dcg / ideal_dcg;
            num_rel_ret += 1;
        }
    }
    let mut i = r.num_ret();
    while ideal_gain > 0.0 {
        ideal_gain = ideal_at(i);
        if ideal_gain > 0.0 {
            num_rel += 1;
            ideal_dcg += ideal_gain / discount(i);
        }
        i += 1;
    }
    sum += (num_rel - num_rel_ret) as f64 * results_dcg / ideal_dcg;
    // Without a positive grade the sum is NaN (0 · 0/0), which is not > 0 either.
    if sum > 0.0 { sum / num_rel as f64 } else { 0.0 }
}

/// nDCG values and how many, for a mean.
#[derive(Default)]
struct Mean {
    sum: f64,
    count: usize,
}

impl Mean {
    fn add_ndcg(&mut self, results_dcg: f64, ideal_dcg: f64) {
        if ideal_dcg > 0.0 {
            self.sum += results_dcg / ideal_dcg;
            self.count += 1;
        }
    }
}

/// `Rndcg`: nDCG averaged over the ranks where the ideal ranking's gain changes, and the end
/// of the ranking when it goes on past the ideal gains; 0 without relevant documents. Walked
/// as [`ndcg_rel`] is.
pub(crate) fn rndcg(r: &Ranking) -> f64 {
    if r.num_relevant == 0 {
        return 0.0;
    }
    let ideal = r.ideal();
    let ideal_at = |i: usize| ideal.get(i).copied().unwrap_or(0.0);
    let (mut results_dcg, mut ideal_dcg) = (0.0, 0.0);
    let mut mean = Mean::default();
    let mut ideal_gain = ideal_at(0);
    let mut previous = ideal_gain;
    let mut past_ideal = false;
    for i in 0..r.num_ret() {
        let beside_ideal = ideal_gain > 0.0;
        past_ideal |= !beside_ideal;
        if beside_ideal {
            ideal_gain = ideal_at(i);
            if ideal_gain != previous {
                mean.add_ndcg(results_dcg, ideal_dcg);
                previous = ideal_gain;
            }
        }
        let gain = Ranking::gain(r.judged[i]);
        if gain != 0.0 {
            results_dcg += gain / discount(i);
        }
        if beside_ideal && ideal_gain > 0.0 {
            ideal_dcg += ideal_gain / discount(i);
        }
    }
    if past_ideal {
        mean.add_ndcg(results_dcg, ideal_dcg);
    }
    let mut i = r.num_ret();
    while ideal_gain > 0.0 {
        ideal_gain = ideal_at(i);
        if ideal_gain != previous {
            mean.add_ndcg(results_dcg, ideal_dcg);
            previous = ideal_gain;
        }
        if ideal_gain > 0.0 {
            ideal_dcg += ideal_gain / discount(i);
        }
        i += 1;
    }
    mean.sum / mean.count as f64
}

/// `map_cut`: average precision over the first `k` documents (still over R).
pub(crate) fn ap_cut(r: &Ranking, k: usize) -> f64 {
    let mut found = 0usize;
    let mut sum = 0.0;
    for (i, &grade) in r.judged.iter().take(k).enumerate() {
        if r.relevant(grade) {
            found += 1;
            sum += found as f64 / (i + 1) as f64;
        }
    }
    ratio(sum, r.num_relevant)
}

/// `relative_P`: relevant documents among the first `k` over the most there could be,
/// min(k, R).
pub(crate) fn relative_precision(r: &Ranking, k: usize) -> f64 {
    ratio(r.found_in(k) as f64, k.min(r.num_relevant))
}

/// `success`: 1 if a relevant document is among the first `k`.
pub(crate) fn success(r: &Ranking, k: usize) -> f64 {
    if r.found_in(k) > 0 { 1.0 } else { 0.0 }
}

/// The set measures: the retrieved documents as an unranked set.
pub(crate) fn set_precision(r: &Ranking) -> f64 {
    ratio(r.num_rel_ret() as f64, r.num_ret())
}

pub(crate) fn set_relative_precision(r: &Ranking) -> f64 {
    match r.num_relevant {
        0 => 0.0,
        rel => ratio(r.num_rel_ret() as f64, r.num_ret().min(rel)),
    }
}

pub(crate) fn set_recall(r: &Ranking) -> f64 {
    ratio(r.num_rel_ret() as f64, r.num_relevant)
}

pub(crate) fn set_ap(r: &Ranking) -> f64 {
    if r.num_ret() == 0 || r.num_relevant == 0 {
        return 0.0;
    }
    let found = r.num_rel_ret() as f64;
    (found * found) / (r.num_ret() as f64 * r.num_relevant as f64)
}

/// `set_F` with β = 1.
pub(crate) fn set_f(r: &Ranking) -> f64 {
    let found = r.num_rel_ret();
    if found == 0 {
        return 0.0;
    }
    let precision = found as f64 / r.num_ret() as f64;
    let recall = found as f64 / r.num_relevant as f64;
    let beta = 1.0;
    (beta + 1.0) * precision * recall / (beta * precision + recall)
}
