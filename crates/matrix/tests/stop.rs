//! A stop request during `run_cells` (its own test binary: the request is process-wide): the
//! cell in training ends interrupted at a checkpoint, and no further cell starts.

use lsr_data::miniature::{SynthSpec, vocabulary, write_synthetic};
use lsr_matrix::{CellState, Matrix, RunOptions, run_cells};

#[test]
fn a_stop_request_interrupts_the_cell_in_training_and_starts_no_other() {
    let root = tempfile::tempdir().unwrap();
    let spec = SynthSpec {
        entities: 12,
        train_triples: 40,
        test_sets: vec![("synth-a".into(), 8)],
        ..SynthSpec::default()
    };
    write_synthetic(&spec, &root.path().join("synth")).unwrap();
    let model = root.path().join("models/bert");
    lsr_backbone::miniature::write_miniature("bert", &vocabulary(&spec), 0.9, 3, &model).unwrap();
    let text = format!(
        r#"name = "stop"
results = "{root}/results"
checkpoints = "{root}/checkpoints"
device = "flex"
k = [1, 4]

[eval]
data_root = "{root}/synth"
datasets = ["beir/synth-a"]
measures = ["ndcg@10"]
batch_size = 16
query_max_length = 16
document_max_length = 32
top_k = 10
tradeoff = "beir/synth-a"

[data]
format = "triples"
triples = "{root}/synth/train/triples.tsv"

[recipe]
steps = 100000
batch_size = 4
checkpoint_every = 1000
query_max_length = 16
document_max_length = 32

[[backbone]]
name = "bert"
checkpoint = "{model}"
"#,
        root = root.path().display(),
        model = model.display()
    );
    let file = root.path().join("stop.toml");
    std::fs::write(&file, text).unwrap();
    let matrix = Matrix::load(&file).unwrap();

    lsr_train::stop::stop_on_signals().unwrap();
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
