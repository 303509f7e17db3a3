//! The per-step training logs of a run's output directory: `train.csv`, appended and flushed
//! row by row, so a killed run loses nothing it logged, and read back by `lsr_files::TrainCsv`;
//! and TensorBoard event files (`lsr_files::tensorboard`) with the same values, the throughput,
//! and once the run's settings, so that `tensorboard --logdir` on a matrix's results shows every
//! cell as a run named after it. On resume, what either holds after the checkpoint's step is
//! dropped, because those steps are taken again.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use lsr_files::TrainCsv;
use lsr_files::tensorboard::EventWriter;

use crate::error::{Result, TrainError};
use crate::trainer::StepMetrics;
use crate::validation::ValidationScores;

/// The TensorBoard text of the run's settings (its resolved config, as TOML).
pub const SETTINGS_TAG: &str = "settings";
/// The TensorBoard tags of the throughput since the previous logged step.
pub const STEPS_PER_SECOND: &str = "throughput/steps_per_second";
pub const TOKENS_PER_SECOND: &str = "throughput/tokens_per_second";

pub struct TrainLog {
    path: PathBuf,
    file: File,
    events: EventWriter,
}

impl StepMetrics {
    /// The CSV columns, in order, with this step's values.
    /// Validation columns are NaN on the steps without a pass.
    pub fn columns(&self) -> [(&'static str, f64); 21] {
        let validation =
            |f: fn(&ValidationScores) -> f64| self.validation.as_ref().map_or(f64::NAN, f);
        [
            ("step", self.step as f64),
            ("lr", self.lr),
            ("loss", self.loss),
            ("ranking_loss", self.ranking_loss),
            ("flops_q", self.flops_q),
            ("flops_d", self.flops_d),
            ("lambda_q", self.lambda_q),
            ("lambda_d", self.lambda_d),
            ("l0_q", self.l0_q),
            ("l0_d", self.l0_d),
            ("flops", self.flops),
            ("positive_score", self.positive_score),
            ("negative_score", self.negative_score),
            ("max_activation", self.max_activation),
            ("grad_norm", self.grad_norm),
            ("dense_steps", self.dense_steps as f64),
            ("val_ndcg@10", validation(|v| v.ndcg_at_10)),
            ("val_l0_q", validation(|v| v.l0_q)),
            ("val_l0_d", validation(|v| v.l0_d)),
            ("val_flops", validation(|v| v.flops)),
            ("seconds", self.seconds),
        ]
    }
}

/// The TensorBoard tag of a `train.csv` column: a validation pass's values under `validation/`,
/// the step's under `train/`; none for the step itself, nor for the step's seconds, which the
/// throughput shows.
pub fn tensorboard_tag(column: &str) -> Option<String> {
    match column {
        "step" | "seconds" => None,
        _ => Some(match column.strip_prefix("val_") {
            Some(measure) => format!("validation/{measure}"),
            None => format!("train/{column}"),
        }),
    }
}

/// What the steps since the previous logged one processed, and how long they took (data
/// loading and the optimiser step; not validation or checkpoints).
#[derive(Debug, Default)]
pub struct Throughput {
    pub steps: usize,
    /// Tokens of the queries and documents, padding excluded.
    pub tokens: u64,
    pub time: Duration,
}

impl Throughput {
    /// Steps and tokens per second, and a fresh count.
    fn take(&mut self) -> [(&'static str, f64); 2] {
        let seconds = self.time.as_secs_f64().max(f64::MIN_POSITIVE);
        let rates = [
            (STEPS_PER_SECOND, self.steps as f64 / seconds),
            (TOKENS_PER_SECOND, self.tokens as f64 / seconds),
        ];
        *self = Self::default();
        rates
    }
}

impl TrainLog {
    /// Opens the logs of the run in `output` for appending, keeping what they hold of steps
    /// ≤ `through_step`; `settings` (the resolved config) goes to TensorBoard once per run.
    pub fn open(output: &Path, through_step: usize, settings: &str) -> Result<Self> {
        let path = output.join(TrainCsv::FILE);
        let file = open_csv(&path, through_step)?;
        let mut events = EventWriter::open(output, through_step as i64)?;
        if !events.logged_before(SETTINGS_TAG) {
            events.text(0, SETTINGS_TAG, &format!("```toml\n{settings}\n```"))?;
        }
        Ok(Self { path, file, events })
    }

    /// One logged step: a row of `train.csv` and an event of TensorBoard scalars (validation
    /// values only on a step with a pass), with the throughput since the previous one.
    pub fn append(&mut self, metrics: &StepMetrics, throughput: &mut Throughput) -> Result<()> {
        let columns = metrics.columns();
        let row = columns
            .map(|(_, value)| lsr_files::number::shortest(value))
            .join(",");
        writeln!(self.file, "{row}")
            .and_then(|()| self.file.flush())
            .map_err(|e| TrainError::io(&self.path, e))?;
        let tags: Vec<(String, f64)> = columns
            .iter()
            .filter(|(_, value)| !value.is_nan())
            .filter_map(|&(column, value)| Some((tensorboard_tag(column)?, value)))
            .collect();
        let mut scalars: Vec<(&str, f64)> = tags.iter().map(|(t, v)| (t.as_str(), *v)).collect();
        scalars.extend(throughput.take());
        Ok(self.events.scalars(metrics.step as i64, &scalars)?)
    }
}

/// Opens `train.csv` at `path` for appending, keeping the rows of steps ≤ `through_step`. Rows
/// written under another header (an older lsr's) are laid out under this one by column name,
/// NaN where they have no value.
fn open_csv(path: &Path, through_step: usize) -> Result<File> {
    let io = |e| TrainError::io(path, e);
    let columns = StepMetrics::default().columns().map(|(name, _)| name);
    let mut kept = vec![columns.join(",")];
    if let Ok(file) = File::open(path) {
        let mut lines = BufReader::new(file).lines();
        let header = lines.next().transpose().map_err(io)?.unwrap_or_default();
        let header: Vec<&str> = header.split(',').collect();
        let order: Vec<Option<usize>> = (columns.iter())
            .map(|column| header.iter().position(|h| h == column))
            .collect();
        for (number, line) in lines.enumerate() {
            let line = line.map_err(io)?;
            let values: Vec<&str> = line.split(',').collect();
            let step = values[0].parse::<usize>().ok();
            match step {
                // A line cut by a kill mid-write is the only kind that can be malformed.
                _ if values.len() != header.len() => {
                    tracing::warn!("{}:{}: dropping a partial row", path.display(), number + 2)
                }
                Some(step) if step <= through_step => {
                    let row = order.iter().map(|at| at.map_or("NaN", |at| values[at]));
                    kept.push(row.collect::<Vec<_>>().join(","));
                }
                _ => {}
            }
        }
    }
    let mut text = kept.join("\n");
    text.push('\n');
    // Atomic: a disk that fills while the log is rewritten must not cost its history.
    lsr_files::write_bytes(path, text.as_bytes())?;
    std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .map_err(io)
}
