//! A stop request during `run_cells` (its own test binary: the request is process-wide): the
//! cell in training ends interrupted at a checkpoint, and no further cell starts.

mod common;

use lsr_matrix::{CellState, Matrix, RunOptions, run_cells};

#[test]
fn a_stop_request_interrupts_the_cell_in_training_and_starts_no_other() {
    let root = tempfile::tempdir().unwrap();
    common::task(root.path(), &[("bert", 0.9)]);
    let head = common::head(root.path(), "stop", "[1, 4]", r#"["ndcg@10"]"#);
    let (recipe, bert) = (
        common::recipe(100_000, 1, 1, 1000),
        common::backbone(root.path(), "bert"),
    );
    let text = format!("{head}\n{recipe}\n{bert}");
    let file = root.path().join("stop.toml");
    std::fs::write(&file, text).unwrap();
    let matrix = Matrix::load(&file).unwrap();

    lsr_files::stop::stop_on_signals().unwrap();
    let log = matrix.cells[0].dir().join("train.csv");
    std::thread::spawn(move || {
        while std::fs::read_to_string(&log).map_or(0, |l| l.lines().count()) < 4 {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        signal_hook::low_level::raise(signal_hook::consts::SIGUSR1).unwrap();
    });
    let states = run_cells(&matrix, &RunOptions::default()).unwrap();
    assert_eq!(states, [("bert-k1".to_string(), CellState::Interrupted)]);
    assert_eq!(matrix.cells[0].state().unwrap(), CellState::Interrupted);
    assert_eq!(matrix.cells[1].state().unwrap(), CellState::Missing);
    let status = lsr_files::StatusFile::read(matrix.cells[0].dir())
        .unwrap()
        .unwrap();
    let checkpoint = matrix.cells[0]
        .checkpoint_dir()
        .join(format!("step-{:08}", status.step));
    assert!(checkpoint.is_dir(), "no {}", checkpoint.display());
}
