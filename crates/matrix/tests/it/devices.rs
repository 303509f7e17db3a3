//! A matrix over several devices with a stand-in for the `lsr` each worker runs: every cell
//! is taken once, in turn, by the next free device, each with its own log beside it; a worker
//! that dies without recording anything has its cell recorded as failed, and the others go on.
//! (The real workers, their signals and their results: the CLI's tests.)

use crate::common;

use lsr_files::stop::Workers;
use lsr_matrix::devices::{DeviceRun, run_on_devices};
use lsr_matrix::{CellState, Matrix};

#[test]
fn each_cell_goes_to_the_next_free_device_and_a_dead_worker_is_recorded() {
    let root = tempfile::tempdir().unwrap();
    common::task(root.path(), &[("bert", 0.9)]);
    let text = format!(
        "{head}\n{recipe}\n{bert}",
        head = common::head(root.path(), "m", "[1, 2, 4, 8, 16]", r#"["ndcg@10"]"#),
        recipe = common::recipe(4, 1, 1, 2),
        bert = common::backbone(root.path(), "bert"),
    );
    let file = root.path().join("m.toml");
    std::fs::write(&file, text).unwrap();
    let matrix = Matrix::load(&file).unwrap();
    // Each call leaves its arguments; the worker of bert-k4 dies as a crash would.
    let calls = root.path().join("calls");
    std::fs::create_dir_all(&calls).unwrap();
    let lsr = root.path().join("lsr");
    std::fs::write(
        &lsr,
        format!(
            "#!/bin/bash\necho \"worker output\"\ncell=${{@: -3:1}}\n\
             echo \"$@\" > {calls}/$cell\nsleep 0.2\n[ \"$cell\" != bert-k4 ] || exit 7\n",
            calls = calls.display()
        ),
    )
    .unwrap();
    std::process::Command::new("chmod")
        .arg("+x")
        .arg(&lsr)
        .status()
        .unwrap();
    let run = DeviceRun {
        lsr: lsr.clone(),
        devices: vec!["flex".into(), "wgpu:1".into()],
        force: false,
        k_from_probe: false,
    };
    let worked = run_on_devices(&matrix, &run, &Workers::default()).unwrap();

    let ids: Vec<&str> = matrix.cells.iter().map(|c| c.id.as_str()).collect();
    let mut ran: Vec<&str> = worked.iter().map(|w| w.cell.as_str()).collect();
    ran.sort_by_key(|id| ids.iter().position(|i| i == id));
    assert_eq!(ran, ids, "each cell once");
    for cell in &worked {
        let args = std::fs::read_to_string(calls.join(&cell.cell)).unwrap();
        let wanted = format!(
            "matrix run {} --cell {} --device {}",
            file.display(),
            cell.cell,
            cell.device
        );
        assert_eq!(args.trim(), wanted);
        assert_eq!(cell.log, matrix.results.join(format!("{}.log", cell.cell)));
        let log = std::fs::read_to_string(&cell.log).unwrap();
        assert_eq!(
            log,
            format!("== {} on {}\nworker output\n", cell.cell, cell.device)
        );
        // The stand-in does nothing: the cells stay missing, but for the dead worker's.
        let expected = match cell.cell.as_str() {
            "bert-k4" => CellState::Failed,
            _ => CellState::Missing,
        };
        assert_eq!(cell.state, expected, "{}", cell.cell);
    }
    // Both devices worked: the first two cells start together, one on each.
    let devices = |id: &str| worked.iter().find(|w| w.cell == id).unwrap().device.clone();
    assert_ne!(devices("bert-k1"), devices("bert-k2"));
    let failure =
        std::fs::read_to_string(matrix.cell("bert-k4").unwrap().dir().join("failure.json"))
            .unwrap();
    assert!(
        failure.contains("exit status: 7") && failure.contains("bert-k4.log"),
        "{failure}"
    );
}
