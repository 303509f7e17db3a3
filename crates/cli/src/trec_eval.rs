//! `lsr trec-eval`: trec_eval-exact measures of any TREC run file against qrels, printed as lsr
//! prints them, as JSON, or exactly as trec_eval does. (Named `evaluate` before: that spelling
//! is refused with the new name, beside `lsr eval`, which evaluates a model.)

use std::path::PathBuf;

use anyhow::Result;
use clap::{Args, ValueEnum};
use lsr_eval::trec_eval::{TrecEvalOptions, report};
use lsr_eval::{Measure, Qrels, Run, evaluate};

#[derive(Args)]
pub struct TrecEvalArgs {
    /// A TREC run (`qid Q0 docid rank score tag`), plain or .gz.
    #[arg(long)]
    run: PathBuf,
    /// TREC qrels (`qid iter docid rel`) or BEIR qrels (`query-id corpus-id score`), plain or .gz.
    #[arg(long)]
    qrels: PathBuf,
    /// Measures: mrr@10, ndcg@10, recall@100, recall@1000, p@10, map, ndcg, recip_rank, gm_map,
    /// rprec, bpref, iprec@0.50, or ir_measures names (RR@10, nDCG@10, R@1000, P@10, AP, AP@10,
    /// R(rel=2)@1000), or trec_eval's (ndcg_cut.10, recall_1000, P_10, iprec_at_recall.0.5,
    /// map_cut.10, infAP, ...); docs/data.md, "Measure names", has the table. Default: mrr@10,
    /// ndcg@10, recall@100, recall@1000. With `--format trec_eval`, also trec_eval's sets:
    /// `official` (the default: the counts runid, num_q, num_ret, num_rel, num_rel_ret, then map,
    /// gm_map, Rprec, bpref, recip_rank, iprec_at_recall, P) and `all_trec`, and a measure
    /// without its parameters (P, recall, ndcg_cut, map_cut, relative_P, success,
    /// iprec_at_recall, Rprec_mult) at trec_eval's defaults.
    #[arg(short = 'm', long, value_delimiter = ',')]
    measures: Vec<String>,
    /// Grade from which a document counts as relevant for binary measures (trec_eval -l);
    /// TREC DL uses 2. nDCG always uses the raw grades.
    #[arg(short = 'l', long, default_value_t = 1)]
    relevance_level: i32,
    /// Only the first N documents of each query, by score (trec_eval -M).
    #[arg(short = 'M', long, value_parser = crate::values::at_least_one)]
    max_docs: Option<usize>,
    /// Print every query's values too (trec_eval -q).
    #[arg(short = 'q', long)]
    per_query: bool,
    /// Average over every judged query, those absent from the run counting 0 (trec_eval -c, as
    /// `lsr eval` does); without it, over the judged queries the run has.
    #[arg(short = 'c', long)]
    complete: bool,
    /// JSON: {"mean", "per_query", "queries_evaluated", "queries_without_results", "complete"}
    /// (the same as `--format json`).
    #[arg(long)]
    json: bool,
    /// `lsr` (measure, `all`, mean), `json`, or `trec_eval`: trec_eval's names, order and
    /// layout, byte for byte.
    #[arg(long, value_enum, default_value_t = Format::Lsr)]
    format: Format,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Format {
    Lsr,
    Json,
    #[value(name = "trec_eval")]
    TrecEval,
}

pub fn run(args: TrecEvalArgs) -> Result<()> {
    let qrels = Qrels::read(&args.qrels)?;
    let run = Run::read(&args.run)?;
    let format = if args.json { Format::Json } else { args.format };
    let names: Vec<String> = match (args.measures.is_empty(), format) {
        (false, _) => args.measures.clone(),
        (true, Format::TrecEval) => vec!["official".to_string()],
        (true, _) => ["mrr@10", "ndcg@10", "recall@100", "recall@1000"]
            .map(String::from)
            .to_vec(),
    };
    if format == Format::TrecEval {
        let options = TrecEvalOptions {
            relevance_level: args.relevance_level,
            complete: args.complete,
            per_query: args.per_query,
            max_docs: args.max_docs,
        };
        print!("{}", report(&run, &qrels, &names, options)?);
        return Ok(());
    }
    let run = match args.max_docs {
        Some(n) => lsr_eval::trec_eval::cut(&run, Some(n)),
        None => run,
    };
    let measures = Measure::parse_all(&names)?;
    let evaluation = evaluate(&run, &qrels, &measures, args.relevance_level, args.complete);
    if format == Format::Json {
        println!("{}", serde_json::to_string_pretty(&evaluation)?);
        return Ok(());
    }
    if args.per_query {
        for (query, values) in &evaluation.per_query {
            for (name, value) in values {
                println!("{name:<16}\t{query}\t{value:.4}");
            }
        }
    }
    println!("{:<16}\tall\t{}", "num_q", evaluation.queries_evaluated);
    for (name, value) in &evaluation.mean {
        println!("{name:<16}\tall\t{value:.4}");
    }
    let missing = evaluation.queries_without_results;
    if missing > 0 && evaluation.complete {
        eprintln!("note: {missing} judged queries have no results in the run and count 0 (-c)");
    } else if missing > 0 {
        eprintln!(
            "note: {missing} judged queries have no results in the run and are not averaged (as \
             pytrec_eval and trec_eval without -c; -c counts them 0)"
        );
    }
    Ok(())
}

/// `lsr trec-eval ...`, the old name: whatever follows it is taken and refused.
#[derive(Args)]
pub struct Renamed {
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
    _args: Vec<String>,
}

pub fn renamed(_: Renamed) -> Result<()> {
    anyhow::bail!(
        "`lsr evaluate` is now `lsr trec-eval` (a run against qrels, as trec_eval); \
         `lsr eval` evaluates a model on data sets"
    )
}
