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
use lsr_data::trec::{Qrels, Run, ranked};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Measure {
    /// Reciprocal rank of the first relevant document, within the top `cutoff` if given
    /// (MRR@10 is trec_eval's `recip_rank` on the run cut to 10).
    RecipRank(Option<usize>),
    /// nDCG over the top `cutoff` (trec_eval `ndcg_cut_k`), or the whole ranking (`ndcg`).
    Ndcg(Option<usize>),
    Recall(usize),
    Precision(usize),
    /// Average precision over the whole ranking (trec_eval `map`).
    AveragePrecision,
}

impl Measure {
    /// Accepts `mrr@10`, `ndcg@10`, `recall@100`, `p@10`, `map`, `ndcg`, `recip_rank` and the
    /// trec_eval spellings `ndcg_cut_10`, `recall_100`, `P_10`.
    pub fn parse(name: &str) -> Result<Self> {
        let unknown = || EvalError::UnknownMeasure(name.to_string());
        let cutoff = |s: &str| {
            s.parse::<usize>()
                .ok()
                .filter(|&k| k > 0)
                .ok_or_else(unknown)
        };
        let lower = name.to_ascii_lowercase();
        if let Some((base, k)) = lower.split_once('@') {
            return match base {
                "mrr" | "rr" | "recip_rank" => Ok(Self::RecipRank(Some(cutoff(k)?))),
                "ndcg" => Ok(Self::Ndcg(Some(cutoff(k)?))),
                "recall" | "r" => Ok(Self::Recall(cutoff(k)?)),
                "p" | "precision" => Ok(Self::Precision(cutoff(k)?)),
                _ => Err(unknown()),
            };
        }
        match lower.as_str() {
            "recip_rank" | "mrr" => return Ok(Self::RecipRank(None)),
            "ndcg" => return Ok(Self::Ndcg(None)),
            "map" => return Ok(Self::AveragePrecision),
            _ => {}
        }
        if let Some(k) = lower.strip_prefix("ndcg_cut_") {
            return Ok(Self::Ndcg(Some(cutoff(k)?)));
        }
        if let Some(k) = lower.strip_prefix("recall_") {
            return Ok(Self::Recall(cutoff(k)?));
        }
        if let Some(k) = lower.strip_prefix("p_") {
            return Ok(Self::Precision(cutoff(k)?));
        }
        Err(unknown())
    }

    /// Parses every name of a list (`--measures ndcg@10,mrr@10`).
    pub fn parse_all(names: &[String]) -> Result<Vec<Self>> {
        names.iter().map(|n| Self::parse(n)).collect()
    }

    /// The name used in outputs: `mrr@10`, `ndcg@10`, `recall@1000`, `p@10`, `map`, ...
    pub fn name(&self) -> String {
        match self {
            Self::RecipRank(Some(k)) => format!("mrr@{k}"),
            Self::RecipRank(None) => "recip_rank".into(),
            Self::Ndcg(Some(k)) => format!("ndcg@{k}"),
            Self::Ndcg(None) => "ndcg".into(),
            Self::Recall(k) => format!("recall@{k}"),
            Self::Precision(k) => format!("p@{k}"),
            Self::AveragePrecision => "map".into(),
        }
    }
}

/// Per-query values and their means.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Evaluation {
    /// measure name → mean over the evaluated queries.
    pub mean: BTreeMap<String, f64>,
    /// query id → measure name → value; with `complete`, the judged queries without results
    /// too, at 0, so that these values average to `mean`.
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
        let sum: f64 = evaluation.per_query.values().map(|v| v[&name]).sum();
        let mean = if evaluation.queries_evaluated == 0 {
            0.0
        } else {
            sum / evaluation.queries_evaluated as f64
        };
        evaluation.mean.insert(name, mean);
    }
    evaluation
}

/// Every measure of one query's retrieved documents against its judgements.
fn query_values(
    docs: &[(String, f64)],
    judgements: &HashMap<String, i32>,
    measures: &[Measure],
    relevance_level: i32,
) -> BTreeMap<String, f64> {
    let grades: Vec<i32> = ranked(docs)
        .iter()
        .map(|(doc, _)| judgements.get(*doc).copied().unwrap_or(0))
        .collect();
    let num_relevant = judgements
        .values()
        .filter(|&&g| g >= relevance_level)
        .count();
    let mut ideal: Vec<i32> = judgements.values().copied().filter(|&g| g > 0).collect();
    ideal.sort_unstable_by(|a, b| b.cmp(a));
    let value = |measure: Measure| match measure {
        Measure::RecipRank(cutoff) => recip_rank(&grades, cutoff, relevance_level),
        Measure::Ndcg(cutoff) => ndcg(&grades, &ideal, cutoff),
        Measure::Recall(k) => ratio(count_relevant(&grades, k, relevance_level), num_relevant),
        Measure::Precision(k) => count_relevant(&grades, k, relevance_level) as f64 / k as f64,
        Measure::AveragePrecision => average_precision(&grades, num_relevant, relevance_level),
    };
    measures.iter().map(|&m| (m.name(), value(m))).collect()
}

fn ratio(part: usize, whole: usize) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
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
    gains
        .enumerate()
        .filter(|(_, g)| *g > 0)
        .map(|(i, g)| g as f64 / ((i + 2) as f64).log2())
        .sum()
}

fn ndcg(grades: &[i32], ideal: &[i32], cutoff: Option<usize>) -> f64 {
    let depth = cutoff.unwrap_or(usize::MAX);
    let ideal_dcg = dcg(ideal.iter().copied().take(depth));
    if ideal_dcg == 0.0 {
        return 0.0;
    }
    dcg(grades.iter().copied().take(depth)) / ideal_dcg
}

fn average_precision(grades: &[i32], num_relevant: usize, level: i32) -> f64 {
    let mut found = 0;
    let mut sum = 0.0;
    for (i, &g) in grades.iter().enumerate() {
        if g >= level {
            found += 1;
            sum += found as f64 / (i + 1) as f64;
        }
    }
    if num_relevant == 0 {
        0.0
    } else {
        sum / num_relevant as f64
    }
}
