//! The text trec_eval (9.0.8) prints, for the measures lsr computes: its measure names, its
//! order (the order of its measure table, not the order asked), `%-22s\t%s\t%6.4f` lines (counts
//! as integers), per-query blocks in `strcmp` order of query id before the summary (`-q`), and
//! `-c`, `-M` and `-l` as it has them, including its count of `num_rel` under `-c`, which takes
//! every judged grade > 0 whatever `-l` says.

use std::collections::BTreeMap;
use std::fmt::Write;

use lsr_data::trec::{Qrels, Run, ranked};

use crate::error::{EvalError, Result};
use crate::metrics::{Kind, Measure, evaluate};

/// How trec_eval was asked.
#[derive(Clone, Copy, Debug)]
pub struct TrecEvalOptions {
    /// `-l`: the grade from which a document is relevant.
    pub relevance_level: i32,
    /// `-c`: average over every judged query.
    pub complete: bool,
    /// `-q`: every query's values before the summary.
    pub per_query: bool,
    /// `-M`: only the first N documents of each query (score descending, ties by id descending).
    pub max_docs: Option<usize>,
}

/// What trec_eval prints when given no `-m` and that lsr computes: the counts, `map`,
/// `recip_rank` and `P` at its cutoffs (its `official` set has more).
pub const DEFAULT_NAMES: [&str; 15] = [
    "runid",
    "num_q",
    "num_ret",
    "num_rel",
    "num_rel_ret",
    "map",
    "recip_rank",
    "P_5",
    "P_10",
    "P_15",
    "P_20",
    "P_30",
    "P_100",
    "P_200",
    "P_500",
];

/// A line trec_eval prints: a count or a measure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Item {
    RunId,
    NumQ,
    NumRet,
    NumRel,
    NumRelRet,
    Measure(Measure),
}

/// The report of `run` against `qrels` for `names` (trec_eval's, ir_measures' or lsr's), as
/// trec_eval prints it.
pub fn report(
    run: &Run,
    qrels: &Qrels,
    names: &[String],
    options: TrecEvalOptions,
) -> Result<String> {
    let mut items = names
        .iter()
        .map(|name| item(name, options.max_docs))
        .collect::<Result<Vec<_>>>()?;
    items.sort_by_key(|item| order(*item));
    items.dedup();
    let run = cut(run, options.max_docs);
    let measures: Vec<Measure> = items
        .iter()
        .filter_map(|item| match item {
            Item::Measure(m) => Some(*m),
            _ => None,
        })
        .collect();
    let level = options.relevance_level;
    let evaluation = evaluate(&run, qrels, &measures, level, options.complete);
    let counts = |query: &str| {
        let judged = &qrels.queries[query];
        let docs = run.queries.get(query).map(Vec::as_slice).unwrap_or(&[]);
        let relevant = |doc: &str| judged.get(doc).is_some_and(|&g| g >= level);
        let num_rel = judged.values().filter(|&&g| g >= level).count();
        let num_rel_ret = docs.iter().filter(|(doc, _)| relevant(doc)).count();
        (docs.len(), num_rel, num_rel_ret)
    };
    // (query, (num_ret, num_rel, num_rel_ret)) of every query evaluated, once.
    let evaluated: Vec<(&String, (usize, usize, usize))> = qrels
        .queries
        .keys()
        .filter(|q| run.queries.get(*q).is_some_and(|docs| !docs.is_empty()))
        .map(|q| (q, counts(q)))
        .collect();
    let mut out = String::new();
    if options.per_query {
        for &(query, (ret, rel, rel_ret)) in &evaluated {
            for item in &items {
                let value = match item {
                    Item::RunId | Item::NumQ => continue,
                    Item::NumRet => Value::Count(ret),
                    Item::NumRel => Value::Count(rel),
                    Item::NumRelRet => Value::Count(rel_ret),
                    Item::Measure(m) => Value::Real(evaluation.per_query[query][&m.name()]),
                };
                line(&mut out, &name(*item), query, value);
            }
        }
    }
    let sum = |pick: fn(&(usize, usize, usize)) -> usize| -> usize {
        evaluated.iter().map(|(_, c)| pick(c)).sum()
    };
    for item in &items {
        let value = match item {
            Item::RunId => Value::Text(run.tag.clone().unwrap_or_default()),
            Item::NumQ => Value::Count(evaluation.queries_evaluated),
            Item::NumRet => Value::Count(sum(|c| c.0)),
            // trec_eval 9.0.8 recounts every judged query under -c, at grade > 0.
            Item::NumRel if options.complete => Value::Count(
                qrels
                    .queries
                    .values()
                    .map(|j| j.values().filter(|&&g| g > 0).count())
                    .sum(),
            ),
            Item::NumRel => Value::Count(sum(|c| c.1)),
            Item::NumRelRet => Value::Count(sum(|c| c.2)),
            Item::Measure(m) => Value::Real(evaluation.mean[&m.name()]),
        };
        line(&mut out, &name(*item), "all", value);
    }
    Ok(out)
}

enum Value {
    Count(usize),
    Real(f64),
    Text(String),
}

fn line(out: &mut String, name: &str, query: &str, value: Value) {
    let _ = match value {
        Value::Count(n) => writeln!(out, "{name:<22}\t{query}\t{n}"),
        Value::Real(x) => writeln!(out, "{name:<22}\t{query}\t{x:6.4}"),
        Value::Text(s) => writeln!(out, "{name:<22}\t{query}\t{s}"),
    };
}

fn item(name: &str, max_docs: Option<usize>) -> Result<Item> {
    Ok(match name {
        "runid" => Item::RunId,
        "num_q" => Item::NumQ,
        "num_ret" => Item::NumRet,
        "num_rel" => Item::NumRel,
        "num_rel_ret" => Item::NumRelRet,
        other => {
            let measure = Measure::parse(other)?;
            let unprintable = |why: &str| {
                Err(EvalError::UnknownMeasure(format!(
                    "{other} (trec_eval has no such measure: {why})"
                )))
            };
            if measure.rel.is_some() {
                return unprintable("its -l applies to every measure");
            }
            if let Kind::RecipRank(Some(k)) = measure.kind
                && max_docs != Some(k)
            {
                return unprintable(&format!("it is recip_rank with -M {k}"));
            }
            Item::Measure(measure)
        }
    })
}

/// trec_eval's name for an item.
fn name(item: Item) -> String {
    match item {
        Item::RunId => "runid".into(),
        Item::NumQ => "num_q".into(),
        Item::NumRet => "num_ret".into(),
        Item::NumRel => "num_rel".into(),
        Item::NumRelRet => "num_rel_ret".into(),
        Item::Measure(m) => match m.kind {
            Kind::AveragePrecision => "map".into(),
            Kind::RecipRank(_) => "recip_rank".into(),
            Kind::Precision(k) => format!("P_{k}"),
            Kind::Recall(k) => format!("recall_{k}"),
            Kind::Ndcg(None) => "ndcg".into(),
            Kind::Ndcg(Some(k)) => format!("ndcg_cut_{k}"),
        },
    }
}

/// An item's place in trec_eval's measure table, then its cutoff.
fn order(item: Item) -> (usize, usize) {
    match item {
        Item::RunId => (0, 0),
        Item::NumQ => (1, 0),
        Item::NumRet => (2, 0),
        Item::NumRel => (3, 0),
        Item::NumRelRet => (4, 0),
        Item::Measure(m) => match m.kind {
            Kind::AveragePrecision => (5, 0),
            Kind::RecipRank(_) => (9, 0),
            Kind::Precision(k) => (11, k),
            Kind::Recall(k) => (13, k),
            Kind::Ndcg(None) => (21, 0),
            Kind::Ndcg(Some(k)) => (24, k),
        },
    }
}

/// The run with each query's ranking cut to `max_docs` (trec_eval `-M`).
pub fn cut(run: &Run, max_docs: Option<usize>) -> Run {
    let Some(n) = max_docs else {
        return run.clone();
    };
    let queries: BTreeMap<String, Vec<(String, f64)>> = run
        .queries
        .iter()
        .map(|(query, docs)| {
            let kept = ranked(docs).into_iter().take(n);
            (
                query.clone(),
                kept.map(|(d, s)| (d.to_string(), s)).collect(),
            )
        })
        .collect();
    Run {
        queries,
        tag: run.tag.clone(),
    }
}
