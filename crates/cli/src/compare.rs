//! `lsr compare RUN_A RUN_B [RUN_C ...]`: whether each run differs from the first by more than
//! noise on one measure, over the qrels' queries (runs as files, or as the cells of a matrix or
//! `lsr eval` outputs with a data set's name): the per-query values `lsr trec-eval -c`
//! computes, handed to `lsr_report::significance` (paired t-test, paired randomisation test,
//! the mean difference's confidence interval, Holm over several runs).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Result, anyhow, bail};
use clap::Args;
use lsr_data::Dataset;
use lsr_eval::{Measure, Qrels, Run, evaluate};
use lsr_files::layout::{RUN, dataset_dir, eval_dir};
use lsr_report::significance::{Settings, against_baseline};

#[derive(Args)]
pub struct CompareArgs {
    /// TREC runs (`qid Q0 docid rank score tag`, plain or .gz), or directories holding one per
    /// data set (a matrix's cells, `lsr eval --output`s) with `--dataset`: the first is the
    /// baseline, each other one is compared with it.
    #[arg(required = true, num_args = 2..)]
    runs: Vec<PathBuf>,
    /// With directories: the data set whose runs to compare (`<cell>/eval/<data set>/run.trec`,
    /// or `<output>/<data set>/run.trec`); its qrels and relevance level come from the data
    /// root unless `--qrels` or `-l` say otherwise.
    #[arg(long)]
    dataset: Option<String>,
    /// Where the data sets' standard files are (see docs/data.md, "Data sets").
    #[arg(long, default_value = "data")]
    data_root: PathBuf,
    /// TREC qrels (`qid iter docid rel`) or BEIR qrels (`query-id corpus-id score`), plain or
    /// .gz. Every judged query is a pair; a run with nothing for one scores 0 there (trec_eval -c).
    #[arg(long, required_unless_present = "dataset")]
    qrels: Option<PathBuf>,
    /// The measure, by any name `lsr trec-eval` takes (ndcg@10, mrr@10, recall@1000, map,
    /// ndcg_cut.10, ...).
    #[arg(short = 'm', long)]
    measure: String,
    /// Grade from which a document counts as relevant for binary measures (trec_eval -l); 1, or
    /// the data set's.
    #[arg(short = 'l', long)]
    relevance_level: Option<i32>,
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
    let (qrels_path, relevance_level) = judgements(&args)?;
    let qrels = Qrels::read(&qrels_path)?;
    let measure = Measure::parse(&args.measure)?;
    let mut runs = Vec::new();
    for path in &args.runs {
        let path = run_file(path, args.dataset.as_deref())?;
        let values = per_query(&path, &qrels_path, &qrels, &measure, relevance_level)?;
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
            qrels_path.display()
        );
        print!("{}", family.text());
    }
    Ok(())
}

/// The qrels file and relevance level: as given, or the data set's (whose files are only looked
/// up for what the options leave open).
fn judgements(args: &CompareArgs) -> Result<(PathBuf, i32)> {
    let needs_dataset = args.qrels.is_none() || args.relevance_level.is_none();
    let dataset = match &args.dataset {
        Some(name) if needs_dataset => Some(one_dataset(name, &args.data_root)?),
        _ => None,
    };
    let qrels = match (&args.qrels, &dataset) {
        (Some(path), _) => path.clone(),
        (None, Some(dataset)) => dataset.qrels.clone(),
        (None, None) => unreachable!("clap asks for --qrels without --dataset"),
    };
    let level = (args.relevance_level).unwrap_or(dataset.map_or(1, |d| d.relevance_level));
    Ok((qrels, level))
}

/// The data set `name` stands for; a group (`beir-13`) is refused, as its members' runs are
/// compared one by one.
fn one_dataset(name: &str, data_root: &Path) -> Result<Dataset> {
    let mut members = Dataset::resolve(name, data_root)?;
    if members.len() != 1 {
        bail!(
            "--dataset {name}: a group of {} data sets; name one of them",
            members.len()
        );
    }
    Ok(members.remove(0))
}

/// `path` itself, or in a directory the run of `dataset`: in a matrix cell's `eval/`, or where
/// `lsr eval --output` puts it.
fn run_file(path: &Path, dataset: Option<&str>) -> Result<PathBuf> {
    if !path.is_dir() {
        return Ok(path.to_path_buf());
    }
    let Some(name) = dataset else {
        bail!(
            "{}: a directory; name the data set whose run to compare with --dataset",
            path.display()
        );
    };
    let places = [eval_dir(path, name), path.join(dataset_dir(name))].map(|dir| dir.join(RUN));
    (places.iter().find(|run| run.is_file()).cloned()).ok_or_else(|| {
        anyhow!(
            "{}: no run of {name} in it (looked for {} and {})",
            path.display(),
            places[0].display(),
            places[1].display()
        )
    })
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
