//! The per-step training log, `train.csv`: appended and flushed row by row, so a killed run
//! loses nothing it logged; on resume, rows after the checkpoint's step are dropped, because
//! those steps are taken again. It is read back by `lsr_files::TrainCsv`.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use crate::error::{Result, TrainError};
use crate::trainer::StepMetrics;
use crate::validation::ValidationScores;

pub struct TrainLog {
    path: PathBuf,
    file: File,
}

impl StepMetrics {
    /// The CSV columns, in order, with this step's values.
    /// Validation columns are NaN on the steps without a pass.
    pub fn columns(&self) -> [(&'static str, f64); 20] {
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

impl TrainLog {
    /// Opens `path` for appending, keeping the rows of steps ≤ `through_step`.
    pub fn open(path: &Path, through_step: usize) -> Result<Self> {
        let io = |e| TrainError::io(path, e);
        let header = StepMetrics::default()
            .columns()
            .map(|(name, _)| name)
            .join(",");
        let mut kept = vec![header];
        if let Ok(file) = File::open(path) {
            for (number, line) in BufReader::new(file).lines().enumerate().skip(1) {
                let line = line.map_err(io)?;
                let step = line.split(',').next().and_then(|s| s.parse::<usize>().ok());
                match step {
                    Some(step) if step <= through_step => kept.push(line),
                    Some(_) => {}
                    // A line cut by a kill mid-write is the only kind that can be malformed.
                    None => {
                        tracing::warn!("{}:{}: dropping a partial row", path.display(), number + 1)
                    }
                }
            }
        }
        let mut text = kept.join("\n");
        text.push('\n');
        // Atomic: a disk that fills while the log is rewritten must not cost its history.
        lsr_files::write_bytes(path, text.as_bytes())?;
        let file = std::fs::OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(io)?;
        Ok(Self {
            path: path.to_path_buf(),
            file,
        })
    }

    pub fn append(&mut self, metrics: &StepMetrics) -> Result<()> {
        let row = metrics
            .columns()
            .map(|(_, value)| lsr_files::number::shortest(value))
            .join(",");
        writeln!(self.file, "{row}")
            .and_then(|()| self.file.flush())
            .map_err(|e| TrainError::io(&self.path, e))
    }
}
