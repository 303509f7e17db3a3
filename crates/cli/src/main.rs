//! `lsr`: the command line of the lsr workspace. Each subcommand is a thin shell over a crate:
//! `norms` and `k suggest` (backbone head statistics, the k they suggest), `encode` (SPLADE
//! vectors), `data` (evaluation data), `train` and `export` (SPLADE training), `eval` (a model
//! on data sets), `trec-eval` (measures of a run against qrels), `compare` (significance tests
//! between runs), `check` (parity on a device), `matrix` and `report` (the experiment matrix and
//! its tables and figures), `bench` (speed and memory).

mod bench;
mod check;
mod compare;
mod data;
mod encode;
mod eval;
mod matrix;
mod model;
mod norms;
mod report;
mod train;
mod trec_eval;
mod values;
mod vectors;

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "lsr",
    version,
    about = "Learned sparse retrieval with rescaled MLM heads"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// MLM-head statistics of checkpoints (row norms, bias, logit scale): how to choose k.
    Norms(norms::NormsArgs),
    /// Choosing k before training: `lsr k suggest CHECKPOINT...`.
    #[command(subcommand)]
    K(norms::KCommand),
    /// Encode texts into SPLADE sparse vectors.
    Encode(encode::EncodeArgs),
    /// Evaluation data: fetch and verify MS MARCO, TREC DL, BEIR, NanoBEIR.
    #[command(subcommand)]
    Data(data::DataCommand),
    /// Train a SPLADE model from a cell config (exit code 3 when the run collapses, 75 when
    /// SIGTERM or SIGUSR1 stopped it at a step boundary with a checkpoint to resume from).
    Train(train::TrainArgs),
    /// Write a training checkpoint as a Hugging Face checkpoint.
    Export(train::ExportArgs),
    /// Evaluate a SPLADE model on data sets: encode, index, retrieve, measure, FLOPs.
    Eval(eval::EvalArgs),
    /// Sparse vectors for search engines: Anserini, Seismic, CIFF.
    #[command(subcommand)]
    Vectors(vectors::VectorsCommand),
    /// Experiment matrices: list cells, their status, run them, write a Slurm job array.
    #[command(subcommand)]
    Matrix(matrix::MatrixCommand),
    /// Table 1, loss curves and the trade-off plot of a matrix's results.
    Report(report::ReportArgs),
    /// trec_eval-exact measures of any TREC run against qrels.
    TrecEval(trec_eval::TrecEvalArgs),
    /// Whether runs differ from a baseline run by more than noise: paired t-test and
    /// randomisation test over the judged queries, with Holm over several runs.
    Compare(compare::CompareArgs),
    /// Renamed `trec-eval`: refused with a message naming it.
    #[command(hide = true)]
    Evaluate(trec_eval::Renamed),
    /// Parity with transformers and PyTorch on the committed fixtures, on any device.
    Check(check::CheckArgs),
    /// Benchmarks (speed and peak memory); not tests.
    #[command(subcommand)]
    Bench(bench::BenchCommand),
}

/// Whether `NO_COLOR` is set to something: then no output is coloured, whatever stderr is.
fn no_color() -> bool {
    std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty())
}

/// The log levels without `RUST_LOG` (docs/commands.md, "Logs").
const DEFAULT_LOG: &str =
    "warn,lsr=info,lsr_compute=info,lsr_train=info,lsr_eval=info,lsr_matrix=info";

fn main() -> ExitCode {
    // SAFETY: first statements of `main`, before any thread exists.
    unsafe {
        lsr_compute::device::pin_implicit_default_to_host();
        end_quietly_when_the_reader_goes_away();
        keep_freed_memory();
    }
    use tracing_subscriber::prelude::*;
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                // Warnings, and lsr's own notes and progress: the device a command picked when
                // none was named, training's progress lines where no bar is drawn (a pipe, a
                // Slurm log), a resume, a skipped cell.
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(DEFAULT_LOG)),
        )
        .with_writer(std::io::stderr)
        // Colours only for a terminal, and not where NO_COLOR asks for none (no-color.org): a
        // pipe or a Slurm log gets plain lines.
        .with_ansi(std::io::stderr().is_terminal() && !no_color())
        .finish()
        // A GPU backend that cannot start logs the reason while lsr probes it; the probe's
        // error (or the log line naming the device picked instead) already says it.
        .with(tracing_subscriber::filter::filter_fn(|meta| {
            let backend = ["cubecl", "wgpu_hal", "wgpu_core"];
            !(lsr_compute::device::probing()
                && backend.iter().any(|t| meta.target().starts_with(t)))
        }))
        .init();
    lsr_files::set_built_from(built_from());
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Train(args) => train::run(args),
        Command::Export(args) => train::export(args).map(|()| ExitCode::SUCCESS),
        Command::Norms(args) => norms::run(args).map(|()| ExitCode::SUCCESS),
        Command::K(command) => norms::suggest(command).map(|()| ExitCode::SUCCESS),
        Command::Encode(args) => encode::run(args).map(|()| ExitCode::SUCCESS),
        Command::Data(command) => data::run(command).map(|()| ExitCode::SUCCESS),
        Command::Eval(args) => eval::run(args),
        Command::Vectors(command) => vectors::run(command).map(|()| ExitCode::SUCCESS),
        Command::TrecEval(args) => trec_eval::run(args).map(|()| ExitCode::SUCCESS),
        Command::Compare(args) => compare::run(args).map(|()| ExitCode::SUCCESS),
        Command::Evaluate(args) => trec_eval::renamed(args).map(|()| ExitCode::SUCCESS),
        Command::Matrix(command) => matrix::run(command),
        Command::Report(args) => report::run(args).map(|()| ExitCode::SUCCESS),
        Command::Check(args) => check::run(args).map(|()| ExitCode::SUCCESS),
        Command::Bench(command) => bench::run(command).map(|()| ExitCode::SUCCESS),
    };
    match result {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {}", render(&error));
            // A device that could not start: a parent running workers (`--devices`) gives this
            // one's work to the others.
            match error.downcast_ref::<lsr_compute::ComputeError>() {
                Some(lsr_compute::ComputeError::Device { .. }) => {
                    ExitCode::from(lsr_files::workers::DEVICE_EXIT_CODE)
                }
                _ => ExitCode::FAILURE,
            }
        }
    }
}

/// The commit this binary was built from, as `build.rs` found it.
fn built_from() -> Option<lsr_files::BuiltFrom> {
    let commit = env!("LSR_BUILD_COMMIT");
    (!commit.is_empty()).then(|| lsr_files::BuiltFrom {
        commit: commit.into(),
        dirty: env!("LSR_BUILD_DIRTY") == "true",
    })
}

/// A reader that goes away (`lsr trec-eval ... | head -1`) ends lsr as it ends `cat`: quietly, by
/// SIGPIPE, at its next write to that pipe, whatever writes (a `println!` panics on the error,
/// a `writeln!` returns it). The Rust runtime ignores SIGPIPE; this restores the default.
///
/// # Safety
/// Before any other thread exists.
unsafe fn end_quietly_when_the_reader_goes_away() {
    #[cfg(unix)]
    // SAFETY: setting a signal's disposition to its default, with no handler to run.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

/// Freed memory kept for the next tensor instead of handed back to the kernel. glibc maps each
/// allocation over its mmap threshold (at most 32 MiB) afresh and unmaps it when freed, so every
/// large tensor is paid for again in page faults and zeroing (4.3 s of system time in a 24 s
/// encoding benchmark). Without mmaps and trimming, encoding on flex takes 0.83x the wall time
/// at +19% peak memory, a training step 0.94x at +1.5% (docs/perf-cpu.md). A malloc setting in
/// `GLIBC_TUNABLES` still governs.
///
/// # Safety
/// Before any other thread exists.
unsafe fn keep_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if !std::env::var("GLIBC_TUNABLES").is_ok_and(|t| t.contains("glibc.malloc.")) {
        // SAFETY: malloc's parameters, set while only this thread runs.
        unsafe {
            libc::mallopt(libc::M_MMAP_MAX, 0);
            libc::mallopt(libc::M_TRIM_THRESHOLD, libc::c_int::MAX);
        }
    }
}

/// The error and its causes, each said once: the crates' errors embed their source in their
/// own message (`path: No such file or directory`), which the plain chain would repeat.
fn render(error: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in error.chain().map(|cause| cause.to_string()) {
        if !text.contains(&cause) {
            if !text.is_empty() {
                text.push_str(": ");
            }
            text.push_str(&cause);
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::{Cli, render};
    use clap::CommandFactory;

    /// A list flag's default is shown as it is typed (`[default: 1,2,4,8,16]`), not as clap
    /// joins several defaults (`[default: 1 2 4 8 16]`, which reads as separate arguments).
    #[test]
    fn list_flags_show_their_default_as_it_is_typed() {
        fn check(command: &clap::Command, path: &str) {
            for arg in command.get_arguments() {
                if arg.get_value_delimiter().is_some() {
                    let defaults = arg.get_default_values();
                    assert!(
                        defaults.len() <= 1,
                        "{path} --{}: {defaults:?}",
                        arg.get_id()
                    );
                }
            }
            for sub in command.get_subcommands() {
                check(sub, &format!("{path} {}", sub.get_name()));
            }
        }
        check(&Cli::command(), "lsr");
    }

    #[test]
    fn a_cause_already_in_the_message_is_not_repeated() {
        let missing = std::io::Error::new(std::io::ErrorKind::NotFound, "No such file");
        let error = lsr_files::FileError::io("config.json", missing);
        let error = anyhow::Error::from(error).context("loading the backbone");
        assert_eq!(
            render(&error),
            "loading the backbone: config.json: No such file"
        );
    }
}
