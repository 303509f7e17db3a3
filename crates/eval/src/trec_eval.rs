//! The text trec_eval (9.0.8) prints, for its `official` (default) and `all_trec` sets and any
//! of their measures: its measure names, its order (the order of its measure table, not the
//! order asked), `%-22s\t%s\t%6.4f` lines (counts as integers), per-query blocks in `strcmp`
//! order of query id before the summary (`-q`), and `-c`, `-M` and `-l` as it has them,
//! including its count of `num_rel` under `-c`, which takes every judged grade > 0 whatever
//! `-l` says.

use std::collections::BTreeMap;
use std::fmt::Write;

use lsr_data::trec::{Qrels, Run, ranked};

use crate::error::{EvalError, Result};
use crate::metrics::{Kind, Measure, TrecEvalKind, evaluate, hundredths_text, recall_text};
use crate::trec_measures::{Ranking, judged_ranking};

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

/// What trec_eval prints when given no `-m`, its `official` set (`-m official`): the counts,
/// `map`, `gm_map`, `Rprec`, `bpref`, `recip_rank`, `iprec_at_recall` at its 11 recall levels
/// and `P` at its 9 cutoffs.
pub const OFFICIAL: [&str; 12] = [
    "runid",
    "num_q",
    "num_ret",
    "num_rel",
    "num_rel_ret",
    "map",
    "gm_map",
    "Rprec",
    "bpref",
    "recip_rank",
    "iprec_at_recall",
    "P",
];

/// trec_eval's `all_trec` set (`-m all_trec`) beyond `official`: with it, every measure of the
/// standard qrels and run, in trec_eval's order.
const ALL_TREC_BEYOND_OFFICIAL: [&str; 22] = [
    "relstring",
    "recall",
    "infAP",
    "gm_bpref",
    "utility",
    "11pt_avg",
    "ndcg",
    "relative_P",
    "Rprec_mult",
    "success",
    "map_cut",
    "ndcg_cut",
    "ndcg_rel",
    "Rndcg",
    "binG",
    "G",
    "set_P",
    "set_recall",
    "set_relative_P",
    "set_map",
    "set_F",
    "num_nonrel_judged_ret",
];

/// trec_eval's cutoffs for `P`, `recall`, `ndcg_cut`, `map_cut` and `relative_P` given
/// without any.
const CUTOFFS: [usize; 9] = [5, 10, 15, 20, 30, 100, 200, 500, 1000];

/// trec_eval's cutoffs for `success` given without any.
const SUCCESS_CUTOFFS: [usize; 3] = [1, 5, 10];

/// trec_eval's recall levels for `iprec_at_recall` given without any, in hundredths.
const RECALL_LEVELS: [u8; 11] = [0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 100];

/// trec_eval's multiples of R for `Rprec_mult` given without any, in hundredths.
const R_MULTIPLES: [u16; 10] = [20, 40, 60, 80, 100, 120, 140, 160, 180, 200];

/// A name as trec_eval's `-m` expands it: a set (`official`, `all_trec`), or a measure without
/// its parameters (`P`, `iprec_at_recall`) at trec_eval's default ones.
fn expand(name: &str) -> Vec<String> {
    let at = |values: &[String]| values.iter().map(|v| format!("{name}_{v}")).collect();
    match name {
        "official" => OFFICIAL.iter().flat_map(|name| expand(name)).collect(),
        "all_trec" => (OFFICIAL.iter().chain(&ALL_TREC_BEYOND_OFFICIAL))
            .flat_map(|name| expand(name))
            .collect(),
        "P" | "recall" | "ndcg_cut" | "map_cut" | "relative_P" => {
            at(&CUTOFFS.map(|k| k.to_string()))
        }
        "success" => at(&SUCCESS_CUTOFFS.map(|k| k.to_string())),
        "iprec_at_recall" => at(&RECALL_LEVELS.map(recall_text)),
        "Rprec_mult" => at(&R_MULTIPLES.map(hundredths_text)),
        _ => vec![name.to_string()],
    }
}

/// A line trec_eval prints: a count or a measure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Item {
    RunId,
    NumQ,
    NumRet,
    NumRel,
    NumRelRet,
    Measure(Measure),
    /// The first 10 documents' grades, per query only.
    RelString,
    NumNonrelJudgedRet,
}

/// What trec_eval counts of one query's ranking.
struct Counts {
    ret: usize,
    rel: usize,
    rel_ret: usize,
    nonrel_judged_ret: usize,
    relstring: String,
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
        .flat_map(|name| expand(name))
        .map(|name| item(&name, options.max_docs))
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
    // Every query evaluated, once, with its counts.
    let evaluated: Vec<(&String, Counts)> = (qrels.queries.keys())
        .filter(|q| run.queries.get(*q).is_some_and(|docs| !docs.is_empty()))
        .map(|q| (q, Counts::of(&run, qrels, q, level)))
        .collect();
    let mut out = String::new();
    if options.per_query {
        for (query, counts) in &evaluated {
            let values = per_query_values(&items, counts, &evaluation.per_query[*query]);
            for (item, value) in values {
                line(&mut out, &name(item), query, value);
            }
        }
    }
    let sum = |pick: fn(&Counts) -> usize| evaluated.iter().map(|(_, c)| pick(c)).sum();
    for item in &items {
        let value = match item {
            Item::RunId => Value::Text(run.tag.clone().unwrap_or_default()),
            Item::NumQ => Value::Count(evaluation.queries_evaluated),
            Item::NumRet => Value::Count(sum(|c| c.ret)),
            // trec_eval 9.0.8 recounts every judged query under -c, at grade > 0.
            Item::NumRel if options.complete => Value::Count(
                (qrels.queries.values())
                    .map(|j| j.values().filter(|&&g| g > 0).count())
                    .sum(),
            ),
            Item::NumRel => Value::Count(sum(|c| c.rel)),
            Item::NumRelRet => Value::Count(sum(|c| c.rel_ret)),
            Item::NumNonrelJudgedRet => Value::Count(sum(|c| c.nonrel_judged_ret)),
            // trec_eval prints it per query only.
            Item::RelString => continue,
            Item::Measure(m) => Value::Real(evaluation.mean[&m.name()]),
        };
        line(&mut out, &name(*item), "all", value);
    }
    Ok(out)
}

/// A query's lines: its counts and measures, without what trec_eval prints only over all
/// queries (the run id, the query count, the geometric means).
fn per_query_values(
    items: &[Item],
    counts: &Counts,
    measures: &BTreeMap<String, f64>,
) -> Vec<(Item, Value)> {
    let value = |item: &Item| match item {
        Item::RunId | Item::NumQ => None,
        Item::Measure(m) if geometric(m) => None,
        Item::NumRet => Some(Value::Count(counts.ret)),
        Item::NumRel => Some(Value::Count(counts.rel)),
        Item::NumRelRet => Some(Value::Count(counts.rel_ret)),
        Item::NumNonrelJudgedRet => Some(Value::Count(counts.nonrel_judged_ret)),
        Item::RelString => Some(Value::Text(format!("'{}'", counts.relstring))),
        Item::Measure(m) => Some(Value::Real(measures[&m.name()])),
    };
    (items.iter())
        .filter_map(|item| Some((*item, value(item)?)))
        .collect()
}

impl Counts {
    /// The counts of `query`, which `qrels` judges, in `run`.
    fn of(run: &Run, qrels: &Qrels, query: &str, level: i32) -> Self {
        let judgements = &qrels.queries[query];
        let docs = run.queries.get(query).map(Vec::as_slice).unwrap_or(&[]);
        let judged = judged_ranking(docs, judgements);
        let num_relevant = judgements.values().filter(|&&g| g >= level).count();
        let ranking = Ranking {
            judged: &judged,
            judgements,
            level,
            num_relevant,
        };
        Counts {
            ret: docs.len(),
            rel: num_relevant,
            rel_ret: (judged.iter())
                .filter(|g| g.is_some_and(|g| g >= level))
                .count(),
            nonrel_judged_ret: ranking.nonrelevant_judged_retrieved(),
            relstring: ranking.relstring(),
        }
    }
}

/// Whether trec_eval averages the measure geometrically, and so prints it only over all queries.
fn geometric(measure: &Measure) -> bool {
    matches!(
        measure.kind,
        Kind::GeometricMeanAp | Kind::TrecEval(TrecEvalKind::GeometricMeanBpref)
    )
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
        "relstring" => Item::RelString,
        "num_nonrel_judged_ret" => Item::NumNonrelJudgedRet,
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
        Item::RelString => "relstring".into(),
        Item::NumNonrelJudgedRet => "num_nonrel_judged_ret".into(),
        Item::Measure(m) => match m.kind {
            Kind::AveragePrecision => "map".into(),
            Kind::GeometricMeanAp => "gm_map".into(),
            Kind::RPrecision => "Rprec".into(),
            Kind::Bpref => "bpref".into(),
            Kind::InterpolatedPrecision(level) => format!("iprec_at_recall_{}", recall_text(level)),
            Kind::RecipRank(_) => "recip_rank".into(),
            Kind::Precision(k) => format!("P_{k}"),
            Kind::Recall(k) => format!("recall_{k}"),
            Kind::Ndcg(None) => "ndcg".into(),
            Kind::Ndcg(Some(k)) => format!("ndcg_cut_{k}"),
            Kind::TrecEval(kind) => kind.name(),
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
        Item::RelString => (12, 0),
        Item::NumNonrelJudgedRet => (33, 0),
        Item::Measure(m) => match m.kind {
            Kind::AveragePrecision => (5, 0),
            Kind::GeometricMeanAp => (6, 0),
            Kind::RPrecision => (7, 0),
            Kind::Bpref => (8, 0),
            Kind::RecipRank(_) => (9, 0),
            Kind::InterpolatedPrecision(level) => (10, usize::from(level)),
            Kind::Precision(k) => (11, k),
            Kind::Recall(k) => (13, k),
            Kind::Ndcg(None) => (21, 0),
            Kind::Ndcg(Some(k)) => (24, k),
            Kind::TrecEval(kind) => {
                use TrecEvalKind::*;
                match kind {
                    InferredAp => (14, 0),
                    GeometricMeanBpref => (15, 0),
                    PrecisionAtMultipleOfR(m) => (16, usize::from(m)),
                    Utility => (17, 0),
                    ElevenPointAverage => (18, 0),
                    BinaryG => (19, 0),
                    G => (20, 0),
                    NdcgRel => (22, 0),
                    RNdcg => (23, 0),
                    ApCut(k) => (25, k),
                    RelativePrecision(k) => (26, k),
                    Success(k) => (27, k),
                    SetPrecision => (28, 0),
                    SetRelativePrecision => (29, 0),
                    SetRecall => (30, 0),
                    SetAp => (31, 0),
                    SetF => (32, 0),
                }
            }
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
