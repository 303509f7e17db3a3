//! `lsr evaluate`: trec_eval-exact measures of any TREC run file against qrels.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;
use lsr_eval::{Measure, Qrels, Run, evaluate};

#[derive(Args)]
pub struct EvaluateArgs {
    /// A TREC run (`qid Q0 docid rank score tag`), plain or .gz.
    #[arg(long)]
    run: PathBuf,
    /// TREC qrels (`qid iter docid rel`) or BEIR qrels (`query-id corpus-id score`), plain or .gz.
    #[arg(long)]
    qrels: PathBuf,
    /// Measures: mrr@10, ndcg@10, recall@100, recall@1000, p@10, map, ndcg, recip_rank, or
    /// ir_measures names (RR@10, nDCG@10, R@1000, P@10, AP, R(rel=2)@1000), or trec_eval's
    /// (ndcg_cut.10, recall_1000, P_10); README.md, Data, has the table.
    #[arg(long, value_delimiter = ',', default_values_t = ["mrr@10".to_string(), "ndcg@10".into(), "recall@100".into(), "recall@1000".into()])]
    measures: Vec<String>,
    /// Grade from which a document counts as relevant for binary measures (trec_eval -l);
    /// TREC DL uses 2. nDCG always uses the raw grades.
    #[arg(long, default_value_t = 1)]
    relevance_level: i32,
    /// Print every query's values too (trec_eval -q).
    #[arg(short = 'q', long)]
    per_query: bool,
    /// Average over every judged query, those absent from the run counting 0 (trec_eval -c, as
    /// `lsr eval` does); without it, over the judged queries the run has.
    #[arg(short = 'c', long)]
    complete: bool,
    /// JSON: {"mean", "per_query", "queries_evaluated", "queries_without_results", "complete"}.
    #[arg(long)]
    json: bool,
}

pub fn run(args: EvaluateArgs) -> Result<()> {
    let measures = Measure::parse_all(&args.measures)?;
    let qrels = Qrels::read(&args.qrels)?;
    let run = Run::read(&args.run)?;
    let evaluation = evaluate(&run, &qrels, &measures, args.relevance_level, args.complete);
    if args.json {
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
