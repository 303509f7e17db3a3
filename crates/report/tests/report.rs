//! The report on hand-written results: three cells of one backbone (one collapsed, without
//! metrics) and one of another, with a group data set and a paper number; and cells with
//! per-query values, for the significance marks.

use std::path::Path;

use lsr_report::{Part, write_report};
use serde_json::json;

fn write(path: &Path, value: serde_json::Value) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, value.to_string()).unwrap();
}

fn dataset(ndcg: f64, flops: f64) -> serde_json::Value {
    json!({"metrics": {"ndcg@10": ndcg, "mrr@10": ndcg + 0.1},
           "sparsity": {"flops": flops, "mean_query_l0": 10.0, "mean_doc_l0": 50.0, "num_queries": 5, "num_docs": 9},
           "queries_evaluated": 5})
}

/// A finished cell: nDCG@10 `msmarco` on MS MARCO, `a` and `b` on the group's members.
fn cell(root: &Path, id: &str, msmarco: f64, a: f64, b: f64, flops: f64) {
    write(
        &root.join(id).join("metrics.json"),
        json!({
            "datasets": {"msmarco-dev": dataset(msmarco, flops), "beir/a": dataset(a, flops), "beir/b": dataset(b, flops)},
            "groups": {"group": ["beir/a", "beir/b"]}
        }),
    );
    std::fs::write(
        root.join(id).join("train.csv"),
        "step,lr,loss,ranking_loss\n1,0.1,3.0,2.5\n2,0.1,2.0,1.5\n3,0.1,1.0,0.5\n",
    )
    .unwrap();
}

fn results(root: &Path) {
    write(
        &root.join("matrix.json"),
        json!({
            "name": "demo",
            "cells": [
                {"id": "modernbert-k1", "backbone": "modernbert", "k": 1.0},
                {"id": "modernbert-k4", "backbone": "modernbert", "k": 4.0},
                {"id": "modernbert-k16", "backbone": "modernbert", "k": 16.0},
                {"id": "bert-k1", "backbone": "bert", "k": 1.0}
            ],
            "datasets": ["msmarco-dev", "group"],
            "tradeoff": "group",
            "paper": [{"backbone": "modernbert", "k": 16.0, "dataset": "group", "measure": "ndcg@10", "value": 0.405}]
        }),
    );
    cell(root, "modernbert-k1", 0.10, 0.20, 0.30, 40.0);
    cell(root, "modernbert-k16", 0.30, 0.40, 0.50, 2.0);
    cell(root, "bert-k1", 0.33, 0.35, 0.45, 1.5);
    // Collapsed: a log and a status, no metrics.
    write(
        &root.join("modernbert-k4/status.json"),
        json!({"status": "collapsed", "step": 3, "steps": 10, "reason": "non-finite loss (NaN) at step 3"}),
    );
    std::fs::write(
        root.join("modernbert-k4/train.csv"),
        "step,lr,loss,ranking_loss\n1,0.1,5.0,4.0\n2,0.1,NaN,NaN\n",
    )
    .unwrap();
}

#[test]
fn table_rows_mark_the_best_k_and_show_collapsed_and_paper_values() {
    let root = tempfile::tempdir().unwrap();
    results(root.path());
    let out = root.path().join("report");
    write_report(root.path(), &out, &[Part::Table]).unwrap();
    let table = std::fs::read_to_string(out.join("table1.md")).unwrap();
    let lines: Vec<&str> = table.lines().collect();
    assert_eq!(
        lines[0],
        "| backbone | k | MS MARCO MRR@10 | group nDCG@10 | group nDCG@10 (paper) | FLOPs (group) | L0 q | L0 d | status |"
    );
    assert_eq!(
        lines[2],
        "| modernbert | 1 | 0.200 | 0.250 | – | 40.00 | 10.00 | 50.00 | done |"
    );
    assert_eq!(
        lines[3],
        "| modernbert | 4 | – | – | – | – | – | – | collapsed (training) |"
    );
    assert_eq!(
        lines[4],
        "| modernbert | 16 | **0.400** | **0.450↑** | 0.405 | 2.00 | 10.00 | 50.00 | done |"
    );
    assert_eq!(
        lines[5],
        "| bert | 1 | **0.430** | **0.400** | – | 1.50 | 10.00 | 50.00 | done |"
    );

    let csv = std::fs::read_to_string(out.join("table1.csv")).unwrap();
    assert!(
        csv.starts_with("backbone,k,MS MARCO MRR@10,group nDCG@10,"),
        "{csv}"
    );
    assert!(csv.contains("modernbert,4.0,,,,,,,\"\",collapsed"), "{csv}");
    let tex = std::fs::read_to_string(out.join("table1.tex")).unwrap();
    assert!(tex.contains("modernbert & 16 & \\textbf{0.400}"), "{tex}");
    let per_dataset = std::fs::read_to_string(out.join("datasets.md")).unwrap();
    assert!(
        per_dataset.contains("| bert | 1 | 0.350 | 0.450 |"),
        "{per_dataset}"
    );
}

/// `<cell>/eval/<dataset>/per_query.json`: `values` as queries q0, q1, ... of `measure`.
fn per_query(root: &Path, id: &str, dataset: &str, measure: &str, values: &[f64]) {
    let queries: serde_json::Map<String, serde_json::Value> = (values.iter().enumerate())
        .map(|(i, value)| (format!("q{i}"), json!({ measure: value })))
        .collect();
    let dir = lsr_files::layout::eval_dir(&root.join(id), dataset);
    write(&dir.join(lsr_files::PerQuery::FILE), queries.into());
}

/// Per backbone, a cell significantly above its k = 1 cell is marked ↑, one below ↓, one within
/// the noise nothing; a data set's column is tested on its per-query values, a group's on its
/// members' values, and a cell without per-query values is named in the note, unmarked.
#[test]
fn cells_that_differ_significantly_from_k1_are_marked_with_the_direction() {
    let root = tempfile::tempdir().unwrap();
    let root = root.path();
    let cells: Vec<_> = [("modernbert", 1), ("modernbert", 2), ("modernbert", 4)]
        .into_iter()
        .chain([("modernbert", 16), ("bert", 1), ("bert", 8)])
        .map(|(b, k)| json!({"id": format!("{b}-k{k}"), "backbone": b, "k": k as f64}))
        .collect();
    let matrix = json!({"name": "marks", "cells": cells, "datasets": ["msmarco-dev", "group"],
                        "tradeoff": "group", "paper": []});
    write(&root.join("matrix.json"), matrix);
    for (id, msmarco, a, b) in [
        ("modernbert-k1", 0.10, 0.20, 0.30),
        ("modernbert-k2", 0.12, 0.25, 0.30),
        ("modernbert-k4", 0.11, 0.10, 0.35),
        ("modernbert-k16", 0.30, 0.40, 0.50),
        ("bert-k1", 0.33, 0.35, 0.45),
        ("bert-k8", 0.20, 0.30, 0.30),
    ] {
        cell(root, id, msmarco, a, b, 1.0);
    }
    let mrr: [(&str, &[f64]); 5] = [
        (
            "modernbert-k1",
            &[0.0, 0.1, 0.5, 1.0, 0.25, 0.3, 0.5, 0.2, 0.0, 1.0],
        ),
        (
            "modernbert-k2",
            &[0.1, 0.0, 0.5, 1.0, 0.3, 0.25, 0.6, 0.1, 0.0, 1.0],
        ),
        (
            "modernbert-k16",
            &[0.5, 0.5, 1.0, 1.0, 0.5, 0.5, 1.0, 0.5, 0.33, 1.0],
        ),
        (
            "bert-k1",
            &[1.0, 0.5, 1.0, 0.5, 1.0, 0.33, 1.0, 0.5, 1.0, 0.25],
        ),
        (
            "bert-k8",
            &[0.5, 0.0, 0.5, 0.25, 0.5, 0.0, 1.0, 0.2, 0.5, 0.0],
        ),
    ];
    for (id, values) in mrr {
        per_query(root, id, "msmarco-dev", "mrr@10", values);
    }
    let ndcg: [(&str, &[f64]); 2] = [
        ("modernbert-k1", &[0.2, 0.4, 0.0, 0.6]),
        ("modernbert-k16", &[0.6, 0.8, 0.5, 0.9]),
    ];
    for (id, values) in ndcg {
        per_query(root, id, "beir/a", "ndcg@10", values);
    }
    let out = root.join("report");
    write_report(root, &out, &[Part::Table]).unwrap();

    let table = std::fs::read_to_string(out.join("table1.md")).unwrap();
    let rows: Vec<&str> = table.lines().skip(2).take(6).collect();
    let marked = |row: &str| row.split(" | 1.00 |").next().unwrap().to_string();
    let rows: Vec<String> = rows.iter().map(|r| marked(r)).collect();
    assert_eq!(
        rows,
        [
            "| modernbert | 1 | 0.200 | 0.250",
            "| modernbert | 2 | 0.220 | 0.275",
            "| modernbert | 4 | 0.210 | 0.225",
            "| modernbert | 16 | **0.400↑** | **0.450↑**",
            "| bert | 1 | **0.430** | **0.400**",
            "| bert | 8 | 0.300↓ | 0.300",
        ],
        "{table}"
    );
    for said in [
        "paired two-sided t-test over the data set's per-query values, Holm–Bonferroni over the \
         backbone's other k in the column, α = 0.05.",
        "group nDCG@10: tested over its 2 data sets' values, one pair per data set",
        "Not tested: modernbert k=4 against k=1 on msmarco-dev: no per-query values of mrr@10.\n",
    ] {
        assert!(table.contains(said), "{said}\n{table}");
    }
    let per_dataset = std::fs::read_to_string(out.join("datasets.md")).unwrap();
    assert!(
        per_dataset.contains("| modernbert | 16 | 0.400↑ | 0.500 |")
            && per_dataset.contains("| modernbert | 2 | 0.250 | 0.300 |")
            && per_dataset.contains("modernbert k=2 against k=1 on beir/b: no per-query values"),
        "{per_dataset}"
    );
}

#[test]
fn figures_are_written_as_png_and_svg() {
    let root = tempfile::tempdir().unwrap();
    results(root.path());
    let out = root.path().join("report");
    let written = write_report(root.path(), &out, &[Part::Losses, Part::Tradeoff]).unwrap();
    let names: Vec<String> = written
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        ["losses.png", "losses.svg", "tradeoff.png", "tradeoff.svg"]
    );
    for path in &written {
        assert!(
            std::fs::metadata(path).unwrap().len() > 1000,
            "{}",
            path.display()
        );
    }
    let svg = std::fs::read_to_string(out.join("tradeoff.svg")).unwrap();
    assert!(svg.contains("k = 16") && svg.contains("modernbert") && svg.contains("best k"));
    let losses = std::fs::read_to_string(out.join("losses.svg")).unwrap();
    assert!(
        losses.contains("k=4, collapsed (training)"),
        "the collapsed run is marked"
    );
}

/// A panel whose losses span less than a decade (8 down to 1.3, its axis 1 to 10): its minor
/// grid lines stand apart, not every tenth of the decade crowded into a grey band.
#[test]
fn the_minor_grid_lines_of_a_narrow_loss_axis_stand_apart() {
    let root = tempfile::tempdir().unwrap();
    write(
        &root.path().join("matrix.json"),
        json!({"name": "narrow", "cells": [{"id": "albert-k1", "backbone": "albert", "k": 1.0}],
               "datasets": [], "tradeoff": "beir/a", "paper": []}),
    );
    let log: String = (0..=50)
        .map(|step| {
            let loss = 8.0 - 0.13 * f64::from(step);
            format!("{step},0.1,{loss},{}\n", loss - 0.2)
        })
        .collect();
    let cell = root.path().join("albert-k1");
    std::fs::create_dir_all(&cell).unwrap();
    std::fs::write(
        cell.join("train.csv"),
        format!("step,lr,loss,ranking_loss\n{log}"),
    )
    .unwrap();
    let out = root.path().join("report");
    write_report(root.path(), &out, &[Part::Losses]).unwrap();
    let svg = std::fs::read_to_string(out.join("losses.svg")).unwrap();
    let attribute = |line: &str, name: &str| -> Option<f64> {
        let start = line.find(&format!(" {name}=\""))? + name.len() + 3;
        line[start..].split('"').next()?.parse().ok()
    };
    // plotters draws minor grid lines at opacity 0.1; horizontal ones belong to the loss axis.
    let mut heights: Vec<f64> = svg
        .split("<line")
        .filter(|line| line.contains("opacity=\"0.1\""))
        .filter_map(|line| {
            let (y1, y2) = (attribute(line, "y1")?, attribute(line, "y2")?);
            (y1 == y2).then_some(y1)
        })
        .collect();
    heights.sort_by(f64::total_cmp);
    heights.dedup();
    assert!(
        heights.len() >= 2,
        "no minor grid lines on the loss axis: {heights:?}"
    );
    let closest = heights
        .windows(2)
        .map(|w| w[1] - w[0])
        .fold(f64::INFINITY, f64::min);
    assert!(
        closest >= 4.0,
        "minor grid lines {closest} px apart: {heights:?}"
    );
}

/// A cell with 0 FLOPs has no place on the log axis: the figure names it, with its score.
#[test]
fn the_tradeoff_figure_names_the_cells_it_cannot_place() {
    let root = tempfile::tempdir().unwrap();
    results(root.path());
    let metrics = json!({
        "datasets": {"msmarco-dev": dataset(0.0, 0.0), "beir/a": dataset(0.1, 0.0), "beir/b": dataset(0.2, 0.0)},
        "groups": {"group": ["beir/a", "beir/b"]}
    });
    write(&root.path().join("bert-k1/metrics.json"), metrics);
    let out = root.path().join("report");
    write_report(root.path(), &out, &[Part::Tradeoff]).unwrap();
    let svg = std::fs::read_to_string(out.join("tradeoff.svg")).unwrap();
    assert!(
        svg.contains("Not drawn (0 FLOPs") && svg.contains("bert-k1 (ndcg@10 0.150)"),
        "{svg}"
    );
    results(root.path());
    write_report(root.path(), &out, &[Part::Tradeoff]).unwrap();
    let svg = std::fs::read_to_string(out.join("tradeoff.svg")).unwrap();
    assert!(
        !svg.contains("Not drawn"),
        "no note when every cell is drawn"
    );
}

/// The choice of k asked of a matrix without probes: refused with what is missing, and no
/// table of zeros written.
#[test]
fn a_k_choice_with_nothing_to_choose_from_is_refused() {
    let root = tempfile::tempdir().unwrap();
    results(root.path());
    let out = root.path().join("report");
    let error = write_report(root.path(), &out, &[Part::KChoice])
        .unwrap_err()
        .to_string();
    assert!(
        error.starts_with("k-choice: nothing to report")
            && error.contains("lsr matrix probe")
            && error.contains("demo/modernbert: no probe"),
        "{error}"
    );
    assert!(!out.join("k-choice.md").exists());
}

/// A report written again onto a full disk: an error naming the file and the cause, and the
/// previous report's files exactly as they were. (Needs root to mount a small tmpfs.)
#[test]
fn a_full_disk_keeps_the_previous_report() {
    let Some(disk) = lsr_files::small_disk::SmallDisk::mount(8 << 20) else {
        return;
    };
    results(disk.path());
    let out = disk.path().join("report");
    let parts = [Part::Table, Part::Losses, Part::Tradeoff];
    let written = write_report(disk.path(), &out, &parts).unwrap();
    let before: Vec<Vec<u8>> = written.iter().map(|p| std::fs::read(p).unwrap()).collect();
    disk.fill(0);
    let error = write_report(disk.path(), &out, &parts)
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("No space left on device") && error.contains(out.to_str().unwrap()),
        "{error}"
    );
    let after: Vec<Vec<u8>> = written.iter().map(|p| std::fs::read(p).unwrap()).collect();
    assert!(before == after, "a report file changed");
    let names = std::fs::read_dir(&out).unwrap().count();
    assert_eq!(names, written.len(), "a stray file beside the report");
}

/// Results written before `matrix.json` recorded its format (`tests/results-v1`) are read as
/// that format, and give the same Table 1, byte for byte, as the lsr that wrote them.
#[test]
fn results_written_before_the_format_was_recorded_give_the_same_table() {
    let committed = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/results-v1/tiny");
    let out = tempfile::tempdir().unwrap();
    let written = write_report(&committed, out.path(), &[Part::Table]).unwrap();
    for name in ["table1.md", "table1.csv"] {
        assert!(written.iter().any(|p| p.ends_with(name)), "{written:?}");
        let expected = std::fs::read(committed.join("expected").join(name)).unwrap();
        let got = std::fs::read(out.path().join(name)).unwrap();
        assert!(
            got == expected,
            "{name}:\n{}",
            String::from_utf8_lossy(&got)
        );
    }
}

/// Runs side by side, each cell's score the mean nDCG@10 over MS MARCO and the group (itself the
/// mean of its members); with a noise run, a run that moved a cell past the tolerance and its
/// backbone's best k is told apart from a copy of the first.
#[test]
fn runs_are_compared_cell_by_cell_and_judged_against_the_seed_noise() {
    let root = tempfile::tempdir().unwrap();
    let run = |name: &str| {
        let dir = root.path().join(name);
        results(&dir);
        dir
    };
    let (first, moved, copy, noise) = (run("first"), run("moved"), run("copy"), run("noise"));
    cell(&moved, "modernbert-k16", 0.10, 0.20, 0.30, 2.0);
    cell(&noise, "bert-k1", 0.35, 0.40, 0.50, 1.5);
    let runs = [first.clone(), moved.clone(), copy.clone()];

    let plain = lsr_report::comparison(&runs, None).unwrap();
    assert!(plain.pattern.is_none());
    let md = plain.markdown();
    // Every run is a matrix named `demo`: the columns are named by folder.
    let header = format!("| cell | {} | {} |", first.display(), moved.display());
    assert!(md.starts_with(&header), "{md}");
    assert!(
        md.contains("| modernbert k=16 | 0.375 | 0.175 | 0.375 |"),
        "{md}"
    );
    assert!(md.contains("| modernbert k=4 | – | – | – |"), "{md}");

    let judged = lsr_report::comparison(&runs, Some(&noise)).unwrap();
    let pattern = judged.pattern.as_ref().unwrap();
    assert!((pattern.noise - 0.035).abs() < 1e-12, "{}", pattern.noise);
    assert_eq!(pattern.tolerance, 0.05);
    let [(_, moved_differs), (_, copy_differs)] = &pattern.differences[..] else {
        panic!("{:?}", pattern.differences);
    };
    assert!(copy_differs.is_empty(), "{copy_differs:?}");
    let moved_differs = moved_differs.join("; ");
    assert!(
        moved_differs.contains("modernbert k=16: |Δ| 0.200 > 0.050"),
        "{moved_differs}"
    );
    assert!(
        moved_differs.contains("modernbert: best at k=1"),
        "{moved_differs}"
    );
    let md = judged.markdown();
    assert!(
        md.contains("| modernbert k=16 | 0.375 | 0.175 | 0.375 | 0.375 | 0.200 | 0.000 |"),
        "{md}"
    );
    assert!(md.contains("the same pattern as"), "{md}");

    let out = root.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    let written = judged.write(&out).unwrap();
    let csv = std::fs::read_to_string(&written[1]).unwrap();
    assert_eq!(csv.lines().count(), 1 + 4, "{csv}");
}
