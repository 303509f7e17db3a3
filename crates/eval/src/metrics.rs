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
}

impl From<Kind> for Measure {
    fn from(kind: Kind) -> Self {
        Self { kind, rel: None }
    }
}

impl Measure {
    /// Accepts lsr's names (`mrr@10`, `ndcg@10`, `recall@100`, `p@10`, `map`, `ndcg`), ir_measures'
    /// (`RR@10`, `nDCG@10`, `R@1000`, `P@10`, `AP`, with `(rel=N)` before or after the cutoff:
    /// `R(rel=2)@1000`) and trec_eval's (`recip_rank`, `ndcg_cut.10` or `ndcg_cut_10`,
    /// `recall.1000`, `P_10`, `map`), in any case.
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
        }
    }
}

/// A measure's kind from a name without parameters.
fn parse_kind(name: &str) -> Option<Kind> {
    let cutoff = |s: &str| s.parse::<usize>().ok().filter(|&k| k > 0);
    if let Some((base, k)) = name.split_once('@') {
        let k = cutoff(k)?;
        return match base {
            "mrr" | "rr" | "recip_rank" => Some(Kind::RecipRank(Some(k))),
            "ndcg" => Some(Kind::Ndcg(Some(k))),
            "recall" | "r" => Some(Kind::Recall(k)),
            "p" | "precision" => Some(Kind::Precision(k)),
            _ => None,
        };
    }
    match name {
        "recip_rank" | "mrr" | "rr" => return Some(Kind::RecipRank(None)),
        "ndcg" => return Some(Kind::Ndcg(None)),
        "map" | "ap" => return Some(Kind::AveragePrecision),
        _ => {}
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
    let value = |measure: Measure| {
        let level = measure.rel.unwrap_or(relevance_level);
        let num_relevant = match measure.rel {
            Some(level) => judgements.values().filter(|&&g| g >= level).count(),
            None => num_relevant,
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
            Kind::Recall(k) => ratio(count_relevant(&grades, k, level), num_relevant),
            Kind::Precision(k) => count_relevant(&grades, k, level) as f64 / k as f64,
            Kind::AveragePrecision => average_precision(&grades, num_relevant, level),
        }
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
            "bpref",
        ] {
            assert!(Measure::parse(bad).is_err(), "{bad}");
        }
    }
}
