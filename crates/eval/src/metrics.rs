//! Retrieval measures computed exactly as trec_eval (and so pytrec_eval) computes them:
//! each query's documents re-sorted by score descending, ties by document id descending; the
//! rank column of a run ignored; gains of nDCG the raw grades (linear); binary measures count
//! a document relevant when its grade ≥ the relevance level (trec_eval `-l`, default 1).
//! Means are over the queries present in both the run and the qrels, as pytrec_eval and
//! trec_eval without `-c` take them, or, with `complete` (trec_eval `-c`, and MS MARCO's official
//! evaluation), over every judged query, those without results counting 0. A query with no
//! retrieved document is treated as absent, as it is in a run file, which has no line for it.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use crate::error::{EvalError, Result};
use crate::trec_measures::{self as trec, Ranking, judged_ranking, ratio};
use lsr_data::trec::{Qrels, Run};

/// A measure: what it computes and, for the binary ones, the grade that counts as relevant
/// when not the data set's (ir_measures' `rel`, `R(rel=2)@1000`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Measure {
    pub kind: Kind,
    pub rel: Option<i32>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    /// Reciprocal rank of the first relevant document, within the top `cutoff` if given
    /// (MRR@10 is trec_eval's `recip_rank` on the run cut to 10).
    RecipRank(Option<usize>),
    /// nDCG over the top `cutoff` (trec_eval `ndcg_cut_k`), or the whole ranking (`ndcg`);
    /// with `rel`, grades below it gain nothing.
    Ndcg(Option<usize>),
    Recall(usize),
    Precision(usize),
    /// Average precision over the whole ranking (trec_eval `map`).
    AveragePrecision,
    /// Average precision per query, averaged geometrically over the queries, each at least
    /// 0.00001 (trec_eval `gm_map`).
    GeometricMeanAp,
    /// Precision at rank R, R the query's number of relevant documents (trec_eval `Rprec`).
    RPrecision,
    /// The share of judged non-relevant documents each relevant one is ranked above, among
    /// the first R of them (trec_eval `bpref`); unjudged documents are skipped.
    Bpref,
    /// Interpolated precision at a recall level given in hundredths (trec_eval
    /// `iprec_at_recall_0.50` is 50): the best precision at this recall or beyond.
    InterpolatedPrecision(u8),
    /// The rest of trec_eval's `all_trec` set, each as `crate::trec_measures` has it.
    TrecEval(TrecEvalKind),
}

/// The measures of trec_eval's `all_trec` set that only trec_eval names (`crate::trec_measures`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TrecEvalKind {
    /// `infAP`.
    InferredAp,
    /// `gm_bpref`: bpref averaged geometrically, as `gm_map` averages AP.
    GeometricMeanBpref,
    /// `Rprec_mult_0.20`: precision at a multiple of R, in hundredths.
    PrecisionAtMultipleOfR(u16),
    /// `utility` (coefficients 1, -1, 0, 0).
    Utility,
    /// `11pt_avg`.
    ElevenPointAverage,
    /// `binG`.
    BinaryG,
    /// `G`.
    G,
    /// `ndcg_rel`.
    NdcgRel,
    /// `Rndcg`.
    RNdcg,
    /// `map_cut_10`: average precision over the first k documents.
    ApCut(usize),
    /// `relative_P_10`.
    RelativePrecision(usize),
    /// `success_10`.
    Success(usize),
    /// `set_P`.
    SetPrecision,
    /// `set_relative_P`.
    SetRelativePrecision,
    /// `set_recall`.
    SetRecall,
    /// `set_map`.
    SetAp,
    /// `set_F` (β = 1).
    SetF,
}

impl TrecEvalKind {
    /// trec_eval's name, which lsr's outputs use too.
    pub fn name(self) -> String {
        match self {
            Self::InferredAp => "infAP".into(),
            Self::GeometricMeanBpref => "gm_bpref".into(),
            Self::PrecisionAtMultipleOfR(m) => format!("Rprec_mult_{}", hundredths_text(m)),
            Self::Utility => "utility".into(),
            Self::ElevenPointAverage => "11pt_avg".into(),
            Self::BinaryG => "binG".into(),
            Self::G => "G".into(),
            Self::NdcgRel => "ndcg_rel".into(),
            Self::RNdcg => "Rndcg".into(),
            Self::ApCut(k) => format!("map_cut_{k}"),
            Self::RelativePrecision(k) => format!("relative_P_{k}"),
            Self::Success(k) => format!("success_{k}"),
            Self::SetPrecision => "set_P".into(),
            Self::SetRelativePrecision => "set_relative_P".into(),
            Self::SetRecall => "set_recall".into(),
            Self::SetAp => "set_map".into(),
            Self::SetF => "set_F".into(),
        }
    }

    /// The measure of a trec_eval name, in any case, parameters after `_` or `.`.
    fn parse(name: &str) -> Option<Self> {
        let plain = [
            Self::InferredAp,
            Self::GeometricMeanBpref,
            Self::Utility,
            Self::ElevenPointAverage,
            Self::BinaryG,
            Self::G,
            Self::NdcgRel,
            Self::RNdcg,
            Self::SetPrecision,
            Self::SetRelativePrecision,
            Self::SetRecall,
            Self::SetAp,
            Self::SetF,
        ];
        if let Some(kind) = plain
            .into_iter()
            .find(|k| k.name().eq_ignore_ascii_case(name))
        {
            return Some(kind);
        }
        if let Some(multiple) = name.strip_prefix("rprec_mult") {
            let multiple = hundredths(multiple.strip_prefix(['_', '.'])?)?;
            return u16::try_from(multiple)
                .ok()
                .filter(|&m| m > 0)
                .map(Self::PrecisionAtMultipleOfR);
        }
        let (base, k) = name.rsplit_once(['_', '.'])?;
        let k = k.parse::<usize>().ok().filter(|&k| k > 0)?;
        match base {
            "map_cut" => Some(Self::ApCut(k)),
            "relative_p" => Some(Self::RelativePrecision(k)),
            "success" => Some(Self::Success(k)),
            _ => None,
        }
    }
}

impl From<Kind> for Measure {
    fn from(kind: Kind) -> Self {
        Self { kind, rel: None }
    }
}

impl Measure {
    /// Accepts lsr's names (`mrr@10`, `ndcg@10`, `recall@100`, `p@10`, `map`, `ndcg`, `gm_map`,
    /// `rprec`, `bpref`, `iprec@0.50`), ir_measures' (`RR@10`, `nDCG@10`, `R@1000`, `P@10`, `AP`,
    /// `Rprec`, `Bpref`, `IPrec@0.5`, with `(rel=N)` before or after the cutoff:
    /// `R(rel=2)@1000`) and trec_eval's (`recip_rank`, `ndcg_cut.10` or `ndcg_cut_10`,
    /// `recall.1000`, `P_10`, `map`, `gm_map`, `Rprec`, `bpref`, `iprec_at_recall.0.5` or
    /// `iprec_at_recall_0.50`), in any case.
    pub fn parse(name: &str) -> Result<Self> {
        let unknown = || EvalError::UnknownMeasure(name.to_string());
        let lower = name.to_ascii_lowercase();
        let (plain, rel) = match (lower.find('('), lower.find(')')) {
            (Some(open), Some(close)) if open < close => {
                let param = &lower[open + 1..close];
                let level = param
                    .strip_prefix("rel=")
                    .and_then(|v| v.parse::<i32>().ok())
                    .filter(|&level| level > 0)
                    .ok_or_else(unknown)?;
                let plain = format!("{}{}", &lower[..open], &lower[close + 1..]);
                (plain, Some(level))
            }
            (None, None) => (lower, None),
            _ => return Err(unknown()),
        };
        let kind = parse_kind(&plain).ok_or_else(unknown)?;
        Ok(Self { kind, rel })
    }

    /// Parses every name of a list (`--measures ndcg@10,mrr@10`).
    pub fn parse_all(names: &[String]) -> Result<Vec<Self>> {
        names.iter().map(|n| Self::parse(n)).collect()
    }

    /// The name used in outputs: `mrr@10`, `ndcg@10`, `recall@1000`, `p@10`, `map`, with
    /// `(rel=N)` before the cutoff when given (`recall(rel=2)@1000`).
    pub fn name(&self) -> String {
        let rel = self.rel.map(|r| format!("(rel={r})")).unwrap_or_default();
        let at = |base: &str, k: usize| format!("{base}{rel}@{k}");
        match self.kind {
            Kind::RecipRank(Some(k)) => at("mrr", k),
            Kind::RecipRank(None) => format!("recip_rank{rel}"),
            Kind::Ndcg(Some(k)) => at("ndcg", k),
            Kind::Ndcg(None) => format!("ndcg{rel}"),
            Kind::Recall(k) => at("recall", k),
            Kind::Precision(k) => at("p", k),
            Kind::AveragePrecision => format!("map{rel}"),
            Kind::GeometricMeanAp => format!("gm_map{rel}"),
            Kind::RPrecision => format!("rprec{rel}"),
            Kind::Bpref => format!("bpref{rel}"),
            Kind::InterpolatedPrecision(level) => format!("iprec{rel}@{}", recall_text(level)),
            Kind::TrecEval(kind) => format!("{}{rel}", kind.name()),
        }
    }
}

/// A measure's kind from a name without parameters.
fn parse_kind(name: &str) -> Option<Kind> {
    let cutoff = |s: &str| s.parse::<usize>().ok().filter(|&k| k > 0);
    if let Some((base, k)) = name.split_once('@') {
        if base == "iprec" {
            return recall_level(k).map(Kind::InterpolatedPrecision);
        }
        let k = cutoff(k)?;
        return match base {
            "mrr" | "rr" | "recip_rank" => Some(Kind::RecipRank(Some(k))),
            "ndcg" => Some(Kind::Ndcg(Some(k))),
            "recall" | "r" => Some(Kind::Recall(k)),
            "p" | "precision" => Some(Kind::Precision(k)),
            "map" | "ap" => Some(Kind::TrecEval(TrecEvalKind::ApCut(k))),
            "success" => Some(Kind::TrecEval(TrecEvalKind::Success(k))),
            _ => None,
        };
    }
    match name {
        "recip_rank" | "mrr" | "rr" => return Some(Kind::RecipRank(None)),
        "ndcg" => return Some(Kind::Ndcg(None)),
        "map" | "ap" => return Some(Kind::AveragePrecision),
        "gm_map" => return Some(Kind::GeometricMeanAp),
        "rprec" => return Some(Kind::RPrecision),
        "bpref" => return Some(Kind::Bpref),
        _ => {}
    }
    // trec_eval: `iprec_at_recall_0.50` as it prints it, `iprec_at_recall.0.5` as `-m` takes it.
    if let Some(level) = name.strip_prefix("iprec_at_recall") {
        let level = level.strip_prefix(['_', '.'])?;
        return recall_level(level).map(Kind::InterpolatedPrecision);
    }
    if let Some(kind) = TrecEvalKind::parse(name) {
        return Some(Kind::TrecEval(kind));
    }
    // trec_eval: `ndcg_cut_10` as it prints it, `ndcg_cut.10` as `-m` takes it.
    let (base, k) = name.rsplit_once(['_', '.'])?;
    let k = cutoff(k)?;
    match base {
        "ndcg_cut" => Some(Kind::Ndcg(Some(k))),
        "recall" => Some(Kind::Recall(k)),
        "p" => Some(Kind::Precision(k)),
        _ => None,
    }
}

/// A recall level from 0 to 1 in hundredths (`0.5`, `.50`), as [`Kind::InterpolatedPrecision`]
/// keeps it.
fn recall_level(text: &str) -> Option<u8> {
    hundredths(text)
        .and_then(|h| u8::try_from(h).ok())
        .filter(|&h| h <= 100)
}

/// A non-negative number in whole hundredths (`0.5`, `.50`, `1.4`); trec_eval prints no finer
/// parameter (`%3.2f`).
fn hundredths(text: &str) -> Option<u32> {
    let value: f64 = text
        .parse()
        .ok()
        .filter(|v: &f64| v.is_finite() && *v >= 0.0)?;
    let hundredths = (value * 100.0).round();
    let whole = (value * 100.0 - hundredths).abs() < 1e-9 && hundredths <= f64::from(u16::MAX);
    whole.then_some(hundredths as u32)
}

/// A parameter in hundredths as trec_eval prints it (`%3.2f`): `0.50`.
pub fn hundredths_text(hundredths: impl Into<f64>) -> String {
    format!("{:.2}", hundredths.into() / 100.0)
}

/// A recall level as trec_eval prints it: `0.50`.
pub fn recall_text(hundredths: u8) -> String {
    hundredths_text(hundredths)
}

/// Per-query values and their means.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Evaluation {
    /// measure name → mean over the evaluated queries.
    pub mean: BTreeMap<String, f64>,
    /// query id → measure name → value; with `complete`, the judged queries without results
    /// too, at 0, so that these values average to `mean` (geometrically for `gm_map`, whose
    /// per-query value is the query's average precision).
    pub per_query: BTreeMap<String, BTreeMap<String, f64>>,
    /// The queries the means are over (trec_eval's `num_q`).
    pub queries_evaluated: usize,
    /// Judged queries absent from the run.
    pub queries_without_results: usize,
    /// Whether those count 0 in the means (trec_eval `-c`) or are left out.
    pub complete: bool,
}

/// The measures of `run` against `qrels`; `complete` is trec_eval's `-c`.
pub fn evaluate(
    run: &Run,
    qrels: &Qrels,
    measures: &[Measure],
    relevance_level: i32,
    complete: bool,
) -> Evaluation {
    let mut evaluation = Evaluation {
        complete,
        ..Evaluation::default()
    };
    for (query, judgements) in &qrels.queries {
        let Some(docs) = run.queries.get(query).filter(|docs| !docs.is_empty()) else {
            evaluation.queries_without_results += 1;
            if complete {
                let zeros = measures.iter().map(|m| (m.name(), 0.0)).collect();
                evaluation.per_query.insert(query.clone(), zeros);
            }
            continue;
        };
        let values = query_values(docs, judgements, measures, relevance_level);
        evaluation.per_query.insert(query.clone(), values);
    }
    evaluation.queries_evaluated = evaluation.per_query.len();
    for measure in measures {
        let name = measure.name();
        let values = evaluation.per_query.values().map(|v| v[&name]);
        let mean = match measure.kind {
            Kind::GeometricMeanAp | Kind::TrecEval(TrecEvalKind::GeometricMeanBpref) => {
                geometric_mean(values)
            }
            _ => arithmetic_mean(values),
        };
        evaluation.mean.insert(name, mean);
    }
    evaluation
}

/// The mean of `values`, 0 when there are none.
fn arithmetic_mean(values: impl Iterator<Item = f64>) -> f64 {
    let (sum, n) = values.fold((0.0, 0usize), |(sum, n), v| (sum + v, n + 1));
    if n == 0 { 0.0 } else { sum / n as f64 }
}

/// trec_eval's geometric mean: each value at least 0.00001 (its `MIN_GEO_MEAN`), so that one
/// query without a relevant document retrieved does not make the mean 0.
fn geometric_mean(values: impl Iterator<Item = f64>) -> f64 {
    let mut n = 0usize;
    let log_sum: f64 = values.inspect(|_| n += 1).map(|v| v.max(1e-5).ln()).sum();
    if n == 0 {
        0.0
    } else {
        (log_sum / n as f64).exp()
    }
}

/// Every measure of one query's retrieved documents against its judgements.
fn query_values(
    docs: &[(String, f64)],
    judgements: &HashMap<String, i32>,
    measures: &[Measure],
    relevance_level: i32,
) -> BTreeMap<String, f64> {
    // The grade of each ranked document, None where it is not judged.
    let judged = judged_ranking(docs, judgements);
    let grades: Vec<i32> = judged.iter().map(|g| g.unwrap_or(0)).collect();
    let num_relevant = judgements
        .values()
        .filter(|&&g| g >= relevance_level)
        .count();
    let mut ideal: Vec<i32> = judgements.values().copied().filter(|&g| g > 0).collect();
    ideal.sort_unstable_by(|a, b| b.cmp(a));
    let value = |measure: Measure| {
        let level = measure.rel.unwrap_or(relevance_level);
        let num_relevant = match measure.rel {
            Some(level) => judgements.values().filter(|&&g| g >= level).count(),
            None => num_relevant,
        };
        let ranking = Ranking {
            judged: &judged,
            judgements,
            level,
            num_relevant,
        };
        match measure.kind {
            Kind::RecipRank(cutoff) => recip_rank(&grades, cutoff, level),
            Kind::Ndcg(cutoff) => match measure.rel {
                Some(level) => {
                    let gain = |g: i32| if g >= level { g } else { 0 };
                    let grades: Vec<i32> = grades.iter().map(|&g| gain(g)).collect();
                    let ideal: Vec<i32> = ideal.iter().map(|&g| gain(g)).collect();
                    ndcg(&grades, &ideal, cutoff)
                }
                None => ndcg(&grades, &ideal, cutoff),
            },
            Kind::Recall(k) => ratio(count_relevant(&grades, k, level) as f64, num_relevant),
            Kind::Precision(k) => count_relevant(&grades, k, level) as f64 / k as f64,
            // Average precision is map_cut over the whole ranking.
            Kind::AveragePrecision | Kind::GeometricMeanAp => trec::ap_cut(&ranking, usize::MAX),
            Kind::RPrecision => ratio(
                count_relevant(&grades, num_relevant, level) as f64,
                num_relevant,
            ),
            Kind::Bpref => trec::bpref(&ranking),
            Kind::InterpolatedPrecision(recall) => trec::interpolated_precision(&ranking, recall),
            Kind::TrecEval(kind) => trec_eval_measure(&ranking, kind),
        }
    };
    measures.iter().map(|&m| (m.name(), value(m))).collect()
}

fn count_relevant(grades: &[i32], k: usize, level: i32) -> usize {
    grades.iter().take(k).filter(|&&g| g >= level).count()
}

fn recip_rank(grades: &[i32], cutoff: Option<usize>, level: i32) -> f64 {
    let depth = cutoff.unwrap_or(grades.len());
    grades
        .iter()
        .take(depth)
        .position(|&g| g >= level)
        .map_or(0.0, |rank| 1.0 / (rank + 1) as f64)
}

fn dcg(gains: impl Iterator<Item = i32>) -> f64 {
    let sum: f64 = gains
        .enumerate()
        .filter(|(_, g)| *g > 0)
        .map(|(i, g)| g as f64 / ((i + 2) as f64).log2())
        .sum();
    // An empty sum of f64 is -0.0, which would print as "-0.0000" where trec_eval prints 0.
    sum + 0.0
}

fn ndcg(grades: &[i32], ideal: &[i32], cutoff: Option<usize>) -> f64 {
    let depth = cutoff.unwrap_or(usize::MAX);
    let ideal_dcg = dcg(ideal.iter().copied().take(depth));
    if ideal_dcg == 0.0 {
        return 0.0;
    }
    dcg(grades.iter().copied().take(depth)) / ideal_dcg
}

/// One of `all_trec`'s own measures of one query.
fn trec_eval_measure(ranking: &Ranking, kind: TrecEvalKind) -> f64 {
    use TrecEvalKind::*;
    match kind {
        InferredAp => trec::inferred_ap(ranking),
        GeometricMeanBpref => trec::bpref(ranking),
        PrecisionAtMultipleOfR(multiple) => trec::precision_at_multiple_of_r(ranking, multiple),
        Utility => trec::utility(ranking),
        ElevenPointAverage => trec::eleven_point_average(ranking),
        BinaryG => trec::binary_g(ranking),
        G => trec::g(ranking),
        NdcgRel => trec::ndcg_rel(ranking),
        RNdcg => trec::rndcg(ranking),
        ApCut(k) => trec::ap_cut(ranking, k),
        RelativePrecision(k) => trec::relative_precision(ranking, k),
        Success(k) => trec::success(ranking, k),
        SetPrecision => trec::set_precision(ranking),
        SetRelativePrecision => trec::set_relative_precision(ranking),
        SetRecall => trec::set_recall(ranking),
        SetAp => trec::set_ap(ranking),
        SetF => trec::set_f(ranking),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lsr_ir_measures_and_trec_eval_spellings_name_the_same_measures() {
        let same = [
            ["mrr@10", "RR@10", "recip_rank@10"],
            ["ndcg@10", "nDCG@10", "ndcg_cut.10"],
            ["recall@1000", "R@1000", "recall.1000"],
            ["p@10", "P@10", "P_10"],
            ["map", "AP", "map"],
            ["recall(rel=2)@1000", "R(rel=2)@1000", "R@1000(rel=2)"],
            ["ndcg(rel=2)@10", "nDCG@10(rel=2)", "ndcg_cut_10(rel=2)"],
            ["rprec", "Rprec", "Rprec"],
            ["bpref", "Bpref", "bpref"],
            ["iprec@0.50", "IPrec@0.5", "iprec_at_recall.0.5"],
            ["iprec@0.00", "IPrec@0", "iprec_at_recall_0.00"],
            ["gm_map", "gm_map", "GM_MAP"],
            ["map_cut_10", "AP@10", "map_cut.10"],
            ["success_5", "Success@5", "success.5"],
            ["Rprec_mult_0.20", "rprec_mult.0.2", "Rprec_mult_0.20"],
            ["infAP", "infap", "infAP"],
            ["11pt_avg", "11PT_AVG", "11pt_avg"],
            ["set_F", "set_f", "set_F"],
        ];
        for names in same {
            let measures: Vec<Measure> = names.iter().map(|n| Measure::parse(n).unwrap()).collect();
            assert!(measures.iter().all(|m| *m == measures[0]), "{names:?}");
            assert_eq!(measures[0].name(), names[0], "the output spelling");
        }
        for bad in [
            "R(rel=0)@10",
            "R(gains=1)@10",
            "nDCG@0",
            "R(rel=2@10",
            "iprec@0.505",
            "iprec_at_recall_1.1",
            "rprec_mult_0",
            "set_q",
        ] {
            assert!(Measure::parse(bad).is_err(), "{bad}");
        }
    }
}
