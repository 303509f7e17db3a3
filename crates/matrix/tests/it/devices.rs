//! A matrix over several devices with a stand-in for the `lsr` each worker runs: every cell
//! is taken once, in turn, by the next free device, each with its own log beside it; a worker
//! that dies without recording anything has its cell recorded as failed, and the others go on;
//! a device that cannot start, or that fails two cells for reasons of its own, is retired and
//! its cells go to the others. (The real workers, their signals and their results: the CLI's
//! tests.)

use std::path::{Path, PathBuf};

use crate::common;

use lsr_files::stop::Workers;
use lsr_matrix::devices::{DeviceRun, RETIRED, run_on_devices};
use lsr_matrix::{CellState, Matrix};

/// A matrix of BERT at five k in `root` (`m.toml`), with `script` as the `lsr` its workers run
/// (`root/lsr`; `$cell` and `$device` set from its arguments).
fn matrix_with_workers(root: &Path, script: &str) -> (PathBuf, Matrix, PathBuf) {
    common::task(root, &[("bert", 0.9)]);
    let text = format!(
        "{head}\n{recipe}\n{bert}",
        head = common::head(root, "m", "[1, 2, 4, 8, 16]", r#"["ndcg@10"]"#),
        recipe = common::recipe(4, 1, 1, 2),
        bert = common::backbone(root, "bert"),
    );
    let file = root.join("m.toml");
    std::fs::write(&file, text).unwrap();
    let matrix = Matrix::load(&file).unwrap();
    let lsr = root.join("lsr");
    let head = "#!/bin/bash\ncell=${@: -3:1}\ndevice=${@: -1}\n";
    std::fs::write(&lsr, format!("{head}{script}")).unwrap();
    let chmod = std::process::Command::new("chmod")
        .arg("+x")
        .arg(&lsr)
        .status();
    assert!(chmod.unwrap().success());
    (file, matrix, lsr)
}

#[test]
fn each_cell_goes_to_the_next_free_device_and_a_dead_worker_is_recorded() {
    let root = tempfile::tempdir().unwrap();
    // Each call leaves its arguments; the worker of bert-k4 dies as a crash would.
    let calls = root.path().join("calls");
    std::fs::create_dir_all(&calls).unwrap();
    let script = format!(
        "echo \"worker output\"\necho \"$@\" > {calls}/$cell\nsleep 0.2\n\
         [ \"$cell\" != bert-k4 ] || exit 7\n",
        calls = calls.display()
    );
    let (file, matrix, lsr) = matrix_with_workers(root.path(), &script);
    let run = DeviceRun {
        lsr: lsr.clone(),
        devices: vec!["flex".into(), "wgpu:1".into()],
        force: false,
        k_from_probe: false,
    };
    let run = run_on_devices(&matrix, &run, &Workers::default()).unwrap();
    assert!(run.retired.is_empty() && run.left.is_empty(), "{run:?}");
    let worked = run.worked;

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

/// Three devices: `cuda:9` cannot start (its worker ends with code 76 at once), `wgpu:1` runs
/// out of memory on every cell (a crash whose output says so), `flex` works. The first is
/// retired at its first cell, the second after its second, each cell they held goes back to the
/// queue, and `flex` runs every cell once; a cell that fails for its own reasons (bert-k4, exit
/// 7 without a word of the device) on `flex` is recorded failed, not blamed on it.
#[test]
fn a_failing_device_is_retired_and_its_cells_go_to_the_others() {
    let root = tempfile::tempdir().unwrap();
    let script = "\
        [ \"$device\" != cuda:9 ] || { echo \"error: device `cuda:9`: could not start\" >&2; exit 76; }\n\
        [ \"$device\" != wgpu:1 ] || { sleep 0.3; echo 'panicked: out of device memory' >&2; exit 101; }\n\
        sleep 0.1\n[ \"$cell\" != bert-k4 ] || exit 7\n";
    let (_, matrix, lsr) = matrix_with_workers(root.path(), script);
    let run = DeviceRun {
        lsr,
        devices: vec!["cuda:9".into(), "wgpu:1".into(), "flex".into()],
        force: false,
        k_from_probe: false,
    };
    let run = run_on_devices(&matrix, &run, &Workers::default()).unwrap();

    let retired: Vec<(&str, &str)> = (run.retired.iter())
        .map(|r| (r.slot.as_str(), r.reason.split(" (log: ").next().unwrap()))
        .collect();
    assert_eq!(
        retired,
        [
            ("cuda:9", "the device could not start"),
            ("wgpu:1", "out of memory")
        ]
    );
    let mut ran: Vec<(&str, &str)> = (run.worked.iter())
        .map(|w| (w.cell.as_str(), w.device.as_str()))
        .collect();
    ran.sort();
    let ids = ["bert-k1", "bert-k16", "bert-k2", "bert-k4", "bert-k8"];
    assert_eq!(ran, ids.map(|id| (id, "flex")), "every cell once, on flex");
    for cell in &run.worked {
        let expected = match cell.cell.as_str() {
            "bert-k4" => CellState::Failed,
            _ => CellState::Missing,
        };
        assert_eq!(cell.state, expected, "{}", cell.cell);
    }
    assert!(run.left.is_empty(), "{:?}", run.left);
    let record = std::fs::read_to_string(matrix.results.join(RETIRED)).unwrap();
    assert!(
        record.contains("cuda:9") && record.contains("wgpu:1"),
        "{record}"
    );
}
