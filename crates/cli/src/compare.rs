//! `lsr compare RUN_A RUN_B [RUN_C ...]`: whether each run differs from the first by more than
//! noise on one measure, over the qrels' queries: the per-query values `lsr trec-eval -c`
//! computes, handed to `lsr_report::significance` (paired t-test, paired randomisation test,
//! the mean difference's confidence interval, Holm over several runs).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Result, bail};
use clap::Args;
use lsr_eval::{Measure, Qrels, Run, evaluate};
use lsr_report::significance::{Settings, against_baseline};

#[derive(Args)]
pub struct CompareArgs {
    /// TREC runs (`qid Q0 docid rank score tag`, plain or .gz): the first is the baseline, each
    /// other one is compared with it.
    #[arg(required = true, num_args = 2..)]
    runs: Vec<PathBuf>,
    /// TREC qrels (`qid iter docid rel`) or BEIR qrels (`query-id corpus-id score`), plain or
    /// .gz. Every judged query is a pair; a run with nothing for one scores 0 there (trec_eval -c).
    #[arg(long)]
    qrels: PathBuf,
    /// The measure, by any name `lsr trec-eval` takes (ndcg@10, mrr@10, recall@1000, map,
    /// ndcg_cut.10, ...).
    #[arg(short = 'm', long)]
    measure: String,
    /// Grade from which a document counts as relevant for binary measures (trec_eval -l).
    #[arg(short = 'l', long, default_value_t = 1)]
    relevance_level: i32,
    /// Random sign patterns of the randomisation test; with n queries and 2^n no more than
    /// this, every pattern instead (exact).
    #[arg(long, default_value_t = 10000, value_parser = crate::values::at_least_one)]
    permutations: usize,
    /// Seed of the random sign patterns (each comparison starts from it).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Significance level of the Holm-adjusted p-values.
    #[arg(long, default_value_t = 0.05, value_parser = crate::values::level)]
    alpha: f64,
    /// JSON: {"measure", "confidence", "permutations", "seed", "alpha", "comparisons": [{"baseline",
    /// "system", "t_test": {"queries", "mean_a", "mean_b", "difference", "interval", "t", "p"},
    /// "permutation": {"p", "resamples", "exact"}, "t_test_p_holm", "permutation_p_holm",
    /// "t_test_significant", "permutation_significant"}]}; `t` is null where it is infinite.
    #[arg(long)]
    json: bool,
}

pub fn run(args: CompareArgs) -> Result<()> {
    let qrels = Qrels::read(&args.qrels)?;
    let measure = Measure::parse(&args.measure)?;
    let mut runs = Vec::new();
    for path in &args.runs {
        let values = per_query(path, &args.qrels, &qrels, &measure, args.relevance_level)?;
        runs.push((path.display().to_string(), values));
    }
    let (baseline, others) = runs.split_first().expect("clap asks for two runs or more");
    let settings = Settings {
        permutations: args.permutations,
        seed: args.seed,
        alpha: args.alpha,
    };
    let name = measure.name();
    let family = against_baseline(&name, (baseline.0.as_str(), &baseline.1), others, settings)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&family)?);
    } else {
        println!(
            "Against {} over the {} queries judged in {} (a query a run has no result for \
             scores 0, as trec_eval -c).",
            baseline.0,
            qrels.queries.len(),
            args.qrels.display()
        );
        print!("{}", family.text());
    }
    Ok(())
}

/// The run at `path`'s value of `measure` on every judged query; a run none of whose queries is
/// judged (another collection's, or another qrels') is refused.
fn per_query(
    path: &Path,
    qrels_path: &Path,
    qrels: &Qrels,
    measure: &Measure,
    relevance_level: i32,
) -> Result<BTreeMap<String, f64>> {
    let run = Run::read(path)?;
    if !run.queries.keys().any(|q| qrels.queries.contains_key(q)) {
        bail!(
            "{}: none of its {} queries is judged in {}; expected a run of the qrels' queries",
            path.display(),
            run.queries.len(),
            qrels_path.display()
        );
    }
    let measures = std::slice::from_ref(measure);
    let evaluation = evaluate(&run, qrels, measures, relevance_level, true);
    let name = measure.name();
    Ok((evaluation.per_query.into_iter())
        .map(|(query, values)| (query, values[&name]))
        .collect())
}
