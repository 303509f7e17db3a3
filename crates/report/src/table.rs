//! Table 1: rows backbone × k; one column per evaluated data set (or group mean) with its
//! primary measure, the paper's number beside ours where it reports one, FLOPs and L0 on the
//! trade-off set, and the cell's state. The best value of each column within a backbone is in
//! bold, and a value that differs significantly from the backbone's k = 1 cell is marked ↑ or ↓
//! (`marks`). Written as Markdown, CSV (through polars) and LaTeX, plus a per-dataset table of
//! the groups' members.

use lsr_data::registry::{table_label, table_measure};
use std::path::{Path, PathBuf};

use polars::prelude::*;

use crate::error::{ReportError, Result};
use crate::marks::{self, ColumnTests};
use crate::results::{CellResult, MatrixResults};
use lsr_files::CellState;

/// One numeric column of Table 1.
struct TableColumn {
    header: String,
    values: Vec<Option<f64>>,
    /// Higher is better and the best per backbone is marked (not for FLOPs, L0, the paper's).
    marked: bool,
    /// A data set's column: its cells against their backbone's k = 1 cell.
    tests: Option<ColumnTests>,
}

fn columns(matrix: &MatrixResults) -> Vec<TableColumn> {
    let cells = &matrix.cells;
    let of = |f: &dyn Fn(&CellResult) -> Option<f64>| cells.iter().map(f).collect::<Vec<_>>();
    let mut columns = Vec::new();
    for dataset in &matrix.datasets {
        let measure = table_measure(dataset);
        columns.push(TableColumn {
            header: table_label(dataset),
            values: of(&|c| c.metrics.as_ref()?.mean(dataset, measure)),
            marked: true,
            tests: Some(marks::column(matrix, dataset)),
        });
        if matrix.paper.iter().any(|p| &p.dataset == dataset) {
            columns.push(TableColumn {
                header: format!("{} (paper)", table_label(dataset)),
                values: of(&|c| matrix.paper_value(&c.backbone, c.k, dataset)),
                marked: false,
                tests: None,
            });
        }
    }
    let tradeoff = &matrix.tradeoff;
    let sparsity = |f: fn(&lsr_files::Sparsity) -> f64| {
        of(&|c| {
            c.metrics
                .as_ref()?
                .mean_of(tradeoff, |d| Some(f(&d.sparsity)))
        })
    };
    for (header, values) in [
        (format!("FLOPs ({tradeoff})"), sparsity(|s| s.flops)),
        ("L0 q".into(), sparsity(|s| s.mean_query_l0)),
        ("L0 d".into(), sparsity(|s| s.mean_doc_l0)),
    ] {
        columns.push(TableColumn {
            header,
            values,
            marked: false,
            tests: None,
        });
    }
    columns
}

/// Whether row `row` holds the best value of `column` among its backbone's rows.
fn is_best(matrix: &MatrixResults, column: &TableColumn, row: usize) -> bool {
    let Some(value) = column.values[row].filter(|_| column.marked) else {
        return false;
    };
    let backbone = &matrix.cells[row].backbone;
    matrix
        .cells
        .iter()
        .zip(&column.values)
        .filter(|(cell, _)| &cell.backbone == backbone)
        .all(|(_, other)| other.is_none_or(|o| o <= value))
}

fn number(value: Option<f64>, header: &str) -> String {
    // `+ 0.0` turns a negative zero into zero, which would print as "-0.000".
    match value.map(|v| v + 0.0) {
        None => "–".into(),
        Some(v) if header.starts_with("FLOPs") || header.starts_with("L0") => format!("{v:.2}"),
        Some(v) => format!("{v:.3}"),
    }
}

/// The significance mark of `row` in a tested column, after its number; nothing otherwise.
fn mark(tests: Option<&ColumnTests>, row: usize) -> String {
    let mark = tests.and_then(|t| t.marks[row]);
    mark.map(|m| m.symbol().to_string()).unwrap_or_default()
}

fn k_text(k: f64) -> String {
    format!("{k}")
}

/// Writes `table1.md`, `table1.csv`, `table1.tex` and, if any data set is a group,
/// `datasets.md` and `datasets.csv`.
pub fn write_tables(matrix: &MatrixResults, out: &Path) -> Result<Vec<PathBuf>> {
    let columns = columns(matrix);
    let (md, tex) = table1_text(matrix, &columns);
    let mut written = vec![
        write_text(&out.join("table1.md"), &md)?,
        write_text(&out.join("table1.tex"), &tex)?,
        write_csv(&out.join("table1.csv"), table1_frame(matrix, &columns))?,
    ];
    written.extend(write_dataset_tables(matrix, out)?);
    Ok(written)
}

/// Table 1 as Markdown and as LaTeX, the best value per backbone in bold.
fn table1_text(matrix: &MatrixResults, columns: &[TableColumn]) -> (String, String) {
    let mut md = match &matrix.note {
        Some(note) => format!("{}\n\n| backbone | k |", note.trim()),
        None => String::from("| backbone | k |"),
    };
    let mut tex = format!(
        "\\begin{{tabular}}{{ll{}l}}\n\\toprule\nbackbone & $k$",
        "r".repeat(columns.len())
    );
    for column in columns {
        md.push_str(&format!(" {} |", column.header));
        tex.push_str(&format!(" & {}", column.header.replace('%', "\\%")));
    }
    md.push_str(" status |\n|---|---|");
    md.push_str(&"---:|".repeat(columns.len()));
    md.push_str("---|\n");
    tex.push_str(" & status \\\\\n\\midrule\n");
    for (row, cell) in matrix.cells.iter().enumerate() {
        md.push_str(&format!("| {} | {} |", cell.backbone, k_text(cell.k)));
        tex.push_str(&format!("{} & {}", cell.backbone, k_text(cell.k)));
        let collapsed = cell.state == CellState::Collapsed;
        for column in columns {
            let mut text = number(column.values[row], &column.header);
            if collapsed && column.values[row].is_some() && column.marked {
                text.push('†');
            }
            text.push_str(&mark(column.tests.as_ref(), row));
            if is_best(matrix, column, row) {
                md.push_str(&format!(" **{text}** |"));
                tex.push_str(&format!(" & \\textbf{{{text}}}"));
            } else {
                md.push_str(&format!(" {text} |"));
                tex.push_str(&format!(" & {text}"));
            }
        }
        md.push_str(&format!(" {} |\n", cell.status_text()));
        tex.push_str(&format!(" & {} \\\\\n", cell.status_text()));
    }
    tex.push_str("\\bottomrule\n\\end{tabular}\n");
    md.push_str(
        "\nBold: the best value of the column among the backbone's k. †: the run collapsed; \
         the number is its model at the collapse. –: not available (cell not done, collapsed \
         with non-finite weights, or not reported).\n",
    );
    let tested = (columns.iter())
        .filter_map(|c| Some((c.header.clone(), c.tests.as_ref()?)))
        .collect::<Vec<_>>();
    if let Some(note) = marks::note(&tested) {
        md.push_str(&format!("\n{note}\n"));
    }
    (md, tex)
}

/// Table 1 as CSV columns: keys, values, which columns are the backbone's best, status.
fn table1_frame(matrix: &MatrixResults, columns: &[TableColumn]) -> Vec<Column> {
    let mut frame_columns = key_columns(matrix);
    for column in columns {
        frame_columns.push(Column::new(
            column.header.as_str().into(),
            column.values.clone(),
        ));
    }
    let best: Vec<String> = (0..matrix.cells.len())
        .map(|row| {
            columns
                .iter()
                .filter(|c| is_best(matrix, c, row))
                .map(|c| c.header.clone())
                .collect::<Vec<_>>()
                .join("; ")
        })
        .collect();
    frame_columns.push(Column::new("best_of_backbone".into(), best));
    frame_columns.push(Column::new(
        "status".into(),
        matrix
            .cells
            .iter()
            .map(|c| c.state.to_string())
            .collect::<Vec<_>>(),
    ));
    frame_columns
}

/// The per-data-set table (Markdown and CSV) of the matrix's grouped data sets (BEIR-13's
/// members), each in its primary measure; nothing when no data set is a group.
fn write_dataset_tables(matrix: &MatrixResults, out: &Path) -> Result<Vec<PathBuf>> {
    let members: Vec<String> = matrix
        .datasets
        .iter()
        .filter_map(|name| {
            matrix
                .cells
                .iter()
                .find_map(|c| c.metrics.as_ref()?.groups.get(name).cloned())
        })
        .flatten()
        .collect();
    if members.is_empty() {
        return Ok(Vec::new());
    }
    let values: Vec<Vec<Option<f64>>> = members
        .iter()
        .map(|member| {
            let measure = table_measure(member);
            matrix
                .cells
                .iter()
                .map(|c| {
                    c.metrics
                        .as_ref()?
                        .datasets
                        .get(member)?
                        .metrics
                        .get(measure)
                        .copied()
                })
                .collect()
        })
        .collect();
    let md = datasets_markdown(matrix, &members, &values);
    let mut frame_columns = key_columns(matrix);
    for (member, column) in members.iter().zip(values) {
        frame_columns.push(Column::new(
            format!("{member} {}", table_measure(member)).into(),
            column,
        ));
    }
    Ok(vec![
        write_text(&out.join("datasets.md"), &md)?,
        write_csv(&out.join("datasets.csv"), frame_columns)?,
    ])
}

/// The per-data-set table in Markdown: a column per member (`values`), each cell marked where
/// it differs significantly from its backbone's k = 1 cell, and the note saying how.
fn datasets_markdown(
    matrix: &MatrixResults,
    members: &[String],
    values: &[Vec<Option<f64>>],
) -> String {
    let tests: Vec<ColumnTests> = members.iter().map(|m| marks::column(matrix, m)).collect();
    let mut md = String::from("| backbone | k |");
    for member in members {
        md.push_str(&format!(" {member} |"));
    }
    md.push_str("\n|---|---|");
    md.push_str(&"---:|".repeat(members.len()));
    md.push('\n');
    for (row, cell) in matrix.cells.iter().enumerate() {
        md.push_str(&format!("| {} | {} |", cell.backbone, k_text(cell.k)));
        for (column, tests) in values.iter().zip(&tests) {
            let (value, mark) = (number(column[row], ""), mark(Some(tests), row));
            md.push_str(&format!(" {value}{mark} |"));
        }
        md.push('\n');
    }
    let labels = members.iter().cloned().zip(&tests).collect::<Vec<_>>();
    if let Some(note) = marks::note(&labels) {
        md.push_str(&format!("\n{note}\n"));
    }
    md
}

/// The row keys of every CSV table: backbone and k.
fn key_columns(matrix: &MatrixResults) -> Vec<Column> {
    let backbones: Vec<String> = matrix.cells.iter().map(|c| c.backbone.clone()).collect();
    let ks: Vec<f64> = matrix.cells.iter().map(|c| c.k).collect();
    vec![
        Column::new("backbone".into(), backbones),
        Column::new("k".into(), ks),
    ]
}

pub(crate) fn write_csv(path: &Path, columns: Vec<Column>) -> Result<PathBuf> {
    let mut frame =
        DataFrame::new_infer_height(columns).map_err(|e| ReportError::parse(path, e))?;
    let mut bytes = Vec::new();
    CsvWriter::new(&mut bytes)
        .include_header(true)
        .finish(&mut frame)
        .map_err(|e| ReportError::parse(path, e))?;
    write_bytes(path, &bytes)
}

fn write_text(path: &Path, text: &str) -> Result<PathBuf> {
    write_bytes(path, text.as_bytes())
}

/// Written atomically; returns the path for the list of files written.
pub(crate) fn write_bytes(path: &Path, bytes: &[u8]) -> Result<PathBuf> {
    lsr_files::write_bytes(path, bytes)?;
    Ok(path.to_path_buf())
}
