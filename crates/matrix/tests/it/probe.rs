//! The probe on two miniature backbones: the first steps of every cell scored on the
//! validation set, the chosen k and the head-norm rule's written per backbone, nothing rerun
//! on a second call, `--k-from probe` continuing only the chosen cells, and the report setting
//! both choices against the whole grid.

use itertools::Itertools;
use std::path::Path;

use crate::common;

use lsr_backbone::ANCHOR_ROW_NORM;
use lsr_files::{Probe, RunStatus, TrainCsv};
use lsr_matrix::probe::{ProbeState, choose, run_probes};
use lsr_matrix::{CellState, Matrix, RunOptions, run_cells};
use lsr_report::kchoice::rows;
use lsr_report::{MatrixResults, Part};

const NORMS: [(&str, f64); 2] = [("bert", 0.9), ("modernbert", 2.553)];

fn matrix_text(root: &Path, probe: &str, validation: bool) -> String {
    let validation = if validation {
        format!(
            "[validation]\ndataset = \"beir/synth-val\"\ndata_root = \"{}/synth\"\nevery = 2\n\
             query_max_length = 16\ndocument_max_length = 32\nbatch_size = 16\n",
            root.display()
        )
    } else {
        String::new()
    };
    let head = common::head(root, "tiny", "[1, 4]", r#"["ndcg@10"]"#);
    let (recipe, bert, modernbert) = (
        common::recipe(8, 2, 4, 4),
        common::backbone(root, "bert"),
        common::backbone(root, "modernbert"),
    );
    format!("{head}\n{validation}\n{probe}\n\n{recipe}\n{bert}\n{modernbert}")
}

fn load(root: &Path, probe: &str, validation: bool) -> lsr_matrix::Result<Matrix> {
    let path = root.join("tiny.toml");
    std::fs::write(&path, matrix_text(root, probe, validation)).unwrap();
    Matrix::load(&path)
}

#[test]
fn the_probe_chooses_a_k_per_backbone_and_run_continues_only_it() {
    let root = tempfile::tempdir().unwrap();
    let root = root.path();
    common::task(root, &NORMS);

    // A fraction outside (0, 1] is refused at its line; a probe needs a validation set.
    let error = load(root, "[probe]\nfraction = 0", true).unwrap_err();
    assert!(
        error
            .to_string()
            .contains("probe.fraction must be in (0, 1]")
    );
    assert!(error.to_string().contains("tiny.toml:"), "{error}");
    let unvalidated = load(root, "", false).unwrap();
    let error = run_probes(&unvalidated, None).unwrap_err().to_string();
    assert!(error.contains("[validation] set"), "{error}");

    // 3 of the recipe's 8 steps: not a step the recipe validates at (every 2).
    let matrix = load(root, "[probe]\nfraction = 0.375", true).unwrap();
    let k_from_probe = RunOptions {
        k_from_probe: true,
        ..RunOptions::default()
    };
    let error = run_cells(&matrix, &k_from_probe).unwrap_err().to_string();
    assert!(
        error.contains("no finished probe for bert, modernbert"),
        "{error}"
    );

    let states = run_probes(&matrix, None).unwrap();
    assert_eq!(states.len(), 2);
    let results = root.join("results");
    for ((name, state), (family, norm)) in states.iter().zip_eq(NORMS) {
        assert_eq!(name, family);
        let ProbeState::Done(probe) = state else {
            panic!("{name}: {state:?}")
        };
        assert_eq!(Probe::read(&results, name).unwrap().as_ref(), Some(probe));
        assert_eq!((probe.fraction, probe.full_steps), (0.375, 8));
        assert_eq!(probe.dataset, "beir/synth-val");
        let ks: Vec<f64> = probe.runs.iter().map(|r| r.k).collect();
        assert_eq!(ks, [1.0, 4.0]);
        for (run, cell) in probe
            .runs
            .iter()
            .zip_eq(matrix.cells.iter().filter(|c| &c.backbone == name))
        {
            // Each cell's own first 3 steps, validated at the third, stopped at a checkpoint.
            assert_eq!((run.steps, run.status), (3, RunStatus::Interrupted));
            assert_eq!(cell.state().unwrap(), CellState::Interrupted);
            let log = cell.dir().join("train.csv");
            assert_eq!(
                TrainCsv::read(&log).unwrap().validation_at(3),
                run.ndcg_at_10
            );
            assert!(run.ndcg_at_10.is_some_and(|s| (0.0..=1.0).contains(&s)));
            let rows = std::fs::read_to_string(&log).unwrap().lines().count();
            assert_eq!(rows, 1 + 3, "{}", log.display());
        }
        assert_eq!(probe.chosen_k, choose(&probe.runs));
        let rule = &probe.norm_rule;
        assert!((rule.row_norm_mean - norm).abs() < 1e-3, "{rule:?}");
        assert!((rule.exact_k - norm / ANCHOR_ROW_NORM).abs() < 1e-2);
        // 0.9 / 0.16 = 5.6 and 2.553 / 0.16 = 16 are both nearer 4 than 1.
        assert_eq!((rule.grid.as_slice(), rule.k), ([1.0, 4.0].as_slice(), 4.0));
    }

    // A finished probe is read back, not run again.
    let log = matrix.cells[0].dir().join("train.csv");
    let before = std::fs::metadata(&log).unwrap().modified().unwrap();
    let again = run_probes(&matrix, Some("bert")).unwrap();
    assert!(matches!(again.as_slice(), [(_, ProbeState::Done(_))]));
    assert_eq!(std::fs::metadata(&log).unwrap().modified().unwrap(), before);
    // Nor read back under another fraction.
    let other = load(root, "[probe]\nfraction = 0.25", true).unwrap();
    let error = run_probes(&other, None).unwrap_err().to_string();
    assert!(error.contains("made with fraction 0.375"), "{error}");

    let chosen: Vec<String> = states
        .iter()
        .map(|(name, state)| match state {
            ProbeState::Done(p) => lsr_matrix::spec::cell_id(name, p.chosen_k),
            _ => unreachable!(),
        })
        .collect();
    // The chosen cells go on from the probe's checkpoint; the others stay where they stopped.
    let ran = run_cells(&matrix, &k_from_probe).unwrap();
    let ids: Vec<&String> = ran.iter().map(|(id, _)| id).collect();
    assert_eq!(ids, chosen.iter().collect::<Vec<_>>());
    assert!(ran.iter().all(|(_, s)| *s == CellState::Done));
    for cell in &matrix.cells {
        let steps = TrainCsv::read(&cell.dir().join(TrainCsv::FILE))
            .unwrap()
            .require("step")
            .unwrap();
        if chosen.contains(&cell.id) {
            assert_eq!(
                steps,
                (1..=8).map(f64::from).collect::<Vec<_>>(),
                "{}",
                cell.id
            );
        } else {
            assert_eq!(cell.state().unwrap(), CellState::Interrupted, "{}", cell.id);
        }
    }

    // With the whole grid run, the report sets both choices against it.
    run_cells(&matrix, &RunOptions::default()).unwrap();
    let out = root.join("report");
    let written = lsr_report::write_report(&results, &out, &[Part::KChoice]).unwrap();
    assert_eq!(written.len(), 4, "{written:?}");
    let (rows, left_out) = rows(&MatrixResults::read(&results).unwrap()).unwrap();
    assert!(left_out.is_empty(), "{left_out:?}");
    assert_eq!(rows.len(), 2);
    for (row, (_, state)) in rows.iter().zip_eq(&states) {
        let ProbeState::Done(probe) = state else {
            unreachable!()
        };
        assert_eq!(
            (row.probe_k, row.rule_k),
            (probe.chosen_k, probe.norm_rule.k)
        );
        // Two beginnings of 3 steps and the 5 steps left of the chosen cell, over 8.
        assert_eq!(row.probe_runs, 11.0 / 8.0);
        let best = row.grid.iter().map(|g| g.1).fold(f64::MIN, f64::max);
        assert_eq!(row.score(row.best_k), best);
        assert!(row.regret(row.rule_k) >= 0.0 && row.regret(row.probe_k) >= 0.0);
    }
    let table = std::fs::read_to_string(out.join("k-choice.md")).unwrap();
    assert!(table.contains("| probe | "), "{table}");
    assert!(table.contains("| tiny | modernbert | 2.553 |"), "{table}");
}
