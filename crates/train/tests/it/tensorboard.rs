//! A miniature run's TensorBoard log as TensorBoard itself reads it: `data/fixtures/tensorboard`
//! holds the event files of two cells lsr trained (one killed past a checkpoint and resumed)
//! and `tensorboard.json`, what TensorBoard's reader saw in them
//! (`scripts/fixtures/tensorboard.sh`). lsr's reader must see the same, every scalar lsr logs
//! must be there for every cell at every logged step, once, and the settings once.

use std::collections::BTreeMap;
use std::path::PathBuf;

use lsr_backbone::reference::fixtures_dir;
use lsr_files::tensorboard::{RunLog, read_run};
use lsr_train::StepMetrics;
use lsr_train::log::{SETTINGS_TAG, STEPS_PER_SECOND, TOKENS_PER_SECOND, tensorboard_tag};
use serde::Deserialize;

#[derive(Deserialize)]
struct Seen {
    runs: BTreeMap<String, SeenRun>,
}

#[derive(Deserialize)]
struct SeenRun {
    scalars: BTreeMap<String, Vec<(i64, f64)>>,
    texts: BTreeMap<String, Vec<(i64, String)>>,
}

/// The steps the fixture's cells log (40, each one) and validate at (every 10).
const STEPS: i64 = 40;
const VALIDATION_EVERY: i64 = 10;

fn fixture() -> (PathBuf, Seen) {
    let dir = fixtures_dir().join("tensorboard");
    let json = std::fs::read_to_string(dir.join("tensorboard.json"))
        .unwrap_or_else(|e| panic!("{}: {e} (scripts/fixtures/tensorboard.sh)", dir.display()));
    (dir, serde_json::from_str(&json).unwrap())
}

/// Every scalar tag lsr logs at each step, and at each validation pass.
fn expected_tags() -> (Vec<String>, Vec<String>) {
    let columns = StepMetrics::default().columns();
    let tags = columns
        .iter()
        .filter_map(|(column, _)| tensorboard_tag(column));
    let (validation, mut every_step): (Vec<String>, Vec<String>) =
        tags.partition(|tag| tag.starts_with("validation/"));
    every_step.extend([STEPS_PER_SECOND.to_string(), TOKENS_PER_SECOND.to_string()]);
    (every_step, validation)
}

#[test]
fn lsr_reads_its_event_files_as_tensorboard_does() {
    let (dir, seen) = fixture();
    assert_eq!(seen.runs.len(), 2, "{:?}", seen.runs.keys());
    for (cell, tensorboard) in &seen.runs {
        let ours: RunLog = read_run(&dir.join(cell)).unwrap();
        // TensorBoard's values are f32 (`simple_value`); serde_json reads the JSON's decimal
        // to the nearest f64 or its neighbour, either of which rounds to the f32 written.
        let seen: BTreeMap<String, Vec<(i64, f32)>> = (tensorboard.scalars.iter())
            .map(|(tag, values)| {
                let values = values.iter().map(|&(step, x)| (step, x as f32));
                (tag.clone(), values.collect())
            })
            .collect();
        assert_eq!(ours.scalars, seen, "{cell}");
        assert_eq!(ours.texts, tensorboard.texts, "{cell}");
    }
}

#[test]
fn tensorboard_shows_every_scalar_of_every_cell_each_step_once() {
    let (dir, seen) = fixture();
    let (every_step, validation) = expected_tags();
    let steps: Vec<i64> = (1..=STEPS).collect();
    let passes: Vec<i64> = (1..=STEPS).filter(|s| s % VALIDATION_EVERY == 0).collect();
    for (cell, run) in &seen.runs {
        let logged = |tag: &str| -> Vec<i64> {
            let values = run.scalars.get(tag);
            let values = values.unwrap_or_else(|| panic!("{cell}: no {tag}"));
            values.iter().map(|&(step, _)| step).collect()
        };
        for tag in &every_step {
            assert_eq!(logged(tag), steps, "{cell}: {tag}");
        }
        for tag in &validation {
            assert_eq!(logged(tag), passes, "{cell}: {tag}");
        }
        let settings = &run.texts[SETTINGS_TAG];
        assert_eq!(settings.len(), 1, "{cell}");
        assert!(
            settings[0].1.contains("[recipe]"),
            "{cell}: {}",
            settings[0].1
        );
        let positive = |tag: &str| run.scalars[tag].iter().all(|&(_, x)| x > 0.0);
        assert!(
            positive(STEPS_PER_SECOND) && positive(TOKENS_PER_SECOND),
            "{cell}"
        );
    }
    // The killed cell was resumed: a second process wrote a file that says so.
    let restarted: Vec<&String> = (seen.runs.keys())
        .filter(|cell| !read_run(&dir.join(cell)).unwrap().starts.is_empty())
        .collect();
    assert_eq!(restarted, ["modernbert-k16"]);
}
