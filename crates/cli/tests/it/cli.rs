//! The `lsr` binary end to end on the fixture checkpoints.

use std::path::{Path, PathBuf};

use crate::common::{fixture, lsr, stdout_of, succeeded};

fn json_lines(output: &[u8]) -> Vec<serde_json::Value> {
    String::from_utf8(output.to_vec())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect()
}

/// What `lsr` says on stderr when it fails with exit code 1.
fn error_of(command: &mut assert_cmd::Command) -> String {
    let out = command.output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    String::from_utf8(out.stderr).unwrap()
}

/// `lsr check` on flex in both precisions, with products by gemm and, where `LSR_BLAS` names a
/// CPU BLAS (as `just test` does), by that library.
#[test]
fn check_passes_on_flex_in_both_precisions() {
    let mut routes = vec!["cube"];
    match std::env::var_os("LSR_BLAS") {
        Some(_) => routes.push("blas"),
        None if std::env::var_os("CI").is_some() => panic!("CI sets LSR_BLAS (`just test`)"),
        None => eprintln!("LSR_BLAS unset: the check through a CPU BLAS is skipped"),
    }
    for (precision, route) in itertools::iproduct!(["f32", "bf16-mixed"], routes) {
        let out = lsr()
            .env("LSR_MATMUL", route)
            .args([
                "check",
                "--device",
                "flex",
                "--json",
                "--precision",
                precision,
            ])
            .args(["--fixtures", &fixture("")])
            .output()
            .unwrap();
        let case = format!("{precision}, {route}");
        assert!(
            out.status.success(),
            "{case}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(report["pass"], true, "{case}");
        // 15 fixtures × (logits, SPLADE weights) + 2 families × (loss terms, weights).
        assert_eq!(report["items"].as_array().unwrap().len(), 34, "{case}");
    }
}

/// `--precision bf16` (bf16 operands in a CPU BLAS's products) passes the check where the CPU
/// has AVX512_BF16 or AMX, and is refused, naming what is missing, where it has neither; a
/// training step refuses it.
#[test]
fn bf16_passes_the_check_where_the_cpu_has_bf16_units_and_training_refuses_it() {
    let mut check = lsr();
    check
        .env("LSR_MATMUL", "blas")
        .args(["check", "--device", "flex", "--json", "--precision", "bf16"])
        .args(["--fixtures", &fixture("")]);
    let units = std::arch::is_x86_feature_detected!("avx512bf16");
    match (units, std::env::var_os("LSR_BLAS")) {
        (true, Some(_)) => {
            let report: serde_json::Value = serde_json::from_slice(&stdout_of(&mut check)).unwrap();
            assert_eq!(report["pass"], true, "{report}");
        }
        (false, _) => {
            let error = error_of(&mut check);
            assert!(
                error.contains("--precision bf16") && error.contains("AVX512_BF16"),
                "{error}"
            );
        }
        (true, None) if std::env::var_os("CI").is_some() => {
            panic!("CI sets LSR_BLAS (`just test`)")
        }
        (true, None) => eprintln!("LSR_BLAS unset: the bf16 check is skipped"),
    }
    let error = error_of(lsr().args([
        "bench",
        "train-step",
        "--device",
        "flex",
        "--precision",
        "bf16",
    ]));
    assert!(
        error.contains("--precision bf16 is for encoding"),
        "{error}"
    );
}

#[test]
fn encode_json_lists_every_nonzero_term_by_weight() {
    let out = succeeded(
        lsr()
            .args([
                "encode",
                "--checkpoint",
                &fixture("bert"),
                "--json",
                "--device",
                "flex",
            ])
            .args([
                "--text",
                "what is the capital of france",
                "--text",
                "boil an egg",
            ]),
    );
    let lines = json_lines(&out.stdout);
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["text"], "what is the capital of france");
    let terms = lines[0]["terms"].as_array().unwrap();
    assert!(!terms.is_empty());
    let weights: Vec<f64> = terms
        .iter()
        .map(|t| t["weight"].as_f64().unwrap())
        .collect();
    assert!(
        weights.windows(2).all(|w| w[0] >= w[1]),
        "not sorted: {weights:?}"
    );
    assert!(weights.iter().all(|&w| w > 0.0));
    assert!(
        terms
            .iter()
            .all(|t| t["id"].is_u64() && t["token"].is_string())
    );
}

#[test]
fn encode_reads_texts_from_stdin_one_per_line() {
    let out = succeeded(
        lsr()
            .args([
                "encode",
                "--checkpoint",
                &fixture("modernbert"),
                "--json",
                "--input",
                "-",
            ])
            .args(["--k", "16", "--batch-size", "2"])
            .write_stdin("first text\nsecond text\nthird text\n"),
    );
    let texts: Vec<String> = json_lines(&out.stdout)
        .iter()
        .map(|l| l["text"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(texts, ["first text", "second text", "third text"]);
}

#[test]
fn encode_plain_output_shows_top_terms_with_tokens() {
    let out = lsr()
        .args(["encode", "--checkpoint", &fixture("roberta"), "--top", "3"])
        .args(["--text", "sparse retrieval"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.starts_with("# sparse retrieval"), "{stdout}");
    assert_eq!(stdout.lines().count(), 4, "{stdout}");
}

/// The binary's side of `values::every_numeric_flag_refuses_values_that_cannot_be_meant_by_name`:
/// a usage error (exit code 2) naming the flag and the rule, before any work.
#[test]
fn values_that_cannot_be_meant_are_refused_with_the_flag_name() {
    let bert = fixture("bert");
    let eval = |flag: &'static str| {
        let args = ["--dataset", "beir/x", "--output", "out", flag, "0"];
        [vec!["eval", "--checkpoint", bert.as_str()], args.to_vec()].concat()
    };
    let cases: Vec<(Vec<&str>, &str, &str)> = vec![
        (
            vec!["encode", "--checkpoint", &bert, "--text", "a", "--k", "0"],
            "--k",
            "k must be finite and > 0",
        ),
        (eval("--top-k"), "--top-k", "must be at least 1"),
        (eval("--batch-size"), "--batch-size", "must be at least 1"),
        (
            vec!["k", "suggest", &bert, "--grid", "1,-2"],
            "--grid",
            "-2",
        ),
    ];
    for (args, flag, rule) in cases {
        let out = lsr().args(&args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains(flag) && stderr.contains(rule),
            "{args:?}: {stderr}"
        );
    }
}

/// A refusal names the flag that gets past it, and help shows a flag's values as it takes them:
/// an exported (already divided) head with `--k 4` names `--rescale-again`; `k suggest` shows
/// and takes its grid comma-separated, and a grid typed with spaces is named as such rather
/// than loaded as checkpoints.
#[test]
fn refusals_name_the_flag_that_gets_past_them() {
    let dir = tempfile::tempdir().unwrap();
    for file in ["config.json", "model.safetensors", "tokenizer.json"] {
        std::fs::copy(format!("{}/{file}", fixture("bert")), dir.path().join(file)).unwrap();
    }
    let record = r#"{"k": 4.0, "mode": "shared", "lsr_version": "0.1.0"}"#;
    std::fs::write(dir.path().join("lsr-rescale.json"), record).unwrap();
    let exported = dir.path().to_str().unwrap();
    let stderr = error_of(
        lsr()
            .args(["encode", "--checkpoint", exported, "--k", "4"])
            .args(["--text", "a"]),
    );
    assert!(stderr.contains("already divided by k = 4"), "{stderr}");
    assert!(stderr.contains("--rescale-again"), "{stderr}");
    let again = lsr()
        .args([
            "encode",
            "--checkpoint",
            exported,
            "--k",
            "4",
            "--rescale-again",
        ])
        .args(["--text", "a"])
        .output()
        .unwrap();
    assert!(
        again.status.success(),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );

    let help = String::from_utf8(stdout_of(lsr().args(["k", "suggest", "--help"]))).unwrap();
    assert!(help.contains("[default: 1,2,4,8,16]"), "{help}");
    let bert = fixture("bert");
    let stderr = error_of(lsr().args(["k", "suggest", "--grid", "1", "2", "4", &bert]));
    assert!(
        stderr.contains("`2` is not a checkpoint: --grid takes its k comma-separated"),
        "{stderr}"
    );
    let out = stdout_of(lsr().args(["k", "suggest", "--grid", "1,2,4", &bert, "--json"]));
    assert_eq!(json_lines(&out).len(), 1);
}

#[test]
fn a_backend_not_compiled_in_is_named() {
    let out = lsr()
        .args(["norms", &fixture("bert"), "--device", "rocm"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("unknown backend `rocm`"), "{stderr}");
}

#[test]
fn norms_json_reports_head_statistics_per_checkpoint() {
    let out = succeeded(lsr().args(["norms", &fixture("bert"), &fixture("modernbert"), "--json"]));
    let rows = json_lines(&out.stdout);
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[1]["family"], "modernbert");
    assert_eq!(rows[1]["tied"], true);
    let (min, mean, max) = (
        rows[1]["row_norm_min"].as_f64().unwrap(),
        rows[1]["row_norm_mean"].as_f64().unwrap(),
        rows[1]["row_norm_max"].as_f64().unwrap(),
    );
    assert!(0.0 < min && min <= mean && mean <= max);
}

#[test]
fn k_suggest_divides_the_row_norm_by_the_reference_and_rounds_to_the_grid() {
    let stats = stdout_of(lsr().args(["norms", &fixture("roberta"), "--json"]));
    let row_norm = json_lines(&stats)[0]["row_norm_mean"].as_f64().unwrap();
    let suggest = |extra: &[&str]| {
        let mut command = lsr();
        command.args(["k", "suggest", &fixture("roberta"), "--json"]);
        json_lines(&stdout_of(command.args(extra))).remove(0)
    };
    let paper = suggest(&[]);
    let exact = row_norm / (2.553 / 16.0);
    assert!(
        (paper["exact_k"].as_f64().unwrap() - exact).abs() < 1e-9,
        "{paper}"
    );
    assert_eq!(paper["grid"], serde_json::json!([1.0, 2.0, 4.0, 8.0, 16.0]));
    assert!(paper["reference"].as_str().unwrap().contains("ModernBERT"));
    // A reference of a third of the norm on a grid of 1 and 4: 3 is nearer 4 on a log scale.
    let third = format!("{}", row_norm / 3.0);
    let own = suggest(&["--reference-norm", &third, "--grid", "1,4"]);
    assert_eq!(
        (own["k"].as_f64(), own["grid"].as_array().unwrap().len()),
        (Some(4.0), 2)
    );
    assert!(
        own["reference"]
            .as_str()
            .unwrap()
            .contains("--reference-norm")
    );
}

#[test]
fn matrix_status_shows_each_finished_probe_and_run_k_from_probe_names_the_missing_ones() {
    let dir = tempfile::tempdir().unwrap();
    let matrix = dir.path().join("m.toml");
    crate::matrix::write_inputs(dir.path());
    std::fs::write(&matrix, crate::matrix::matrix_text(&["bert", "roberta"])).unwrap();
    let run = |k, score| lsr_files::ProbeRun {
        k,
        steps: 5,
        status: lsr_files::RunStatus::Finished,
        ndcg_at_10: score,
    };
    let probe = lsr_files::Probe {
        backbone: "bert".into(),
        fraction: 0.05,
        full_steps: 100,
        dataset: "nanobeir/nfcorpus".into(),
        runs: vec![run(1.0, Some(0.31)), run(4.0, None)],
        chosen_k: 1.0,
        norm_rule: lsr_files::KSuggestion {
            checkpoint: "x".into(),
            row_norm_mean: 0.9,
            reference_row_norm: 0.16,
            reference: "r".into(),
            exact_k: 5.6,
            grid: vec![1.0, 4.0],
            k: 4.0,
        },
    };
    probe.write(&dir.path().join("results")).unwrap();
    let status = |json: &[&str]| {
        stdout_of(
            lsr()
                .args(["matrix", "status"])
                .args(json)
                .arg(&matrix)
                .current_dir(dir.path()),
        )
    };
    let text = String::from_utf8(status(&[])).unwrap();
    assert!(text.contains("bert-k4\tmissing"), "{text}");
    assert!(
        text.contains("probe bert\tk = 1\t(head-norm rule k = 4; nanobeir/nfcorpus nDCG@10 after 5 steps: k1 0.310, k4 -)"),
        "{text}"
    );
    let json: serde_json::Value = serde_json::from_slice(&status(&["--json"])).unwrap();
    assert_eq!(json["probes"], serde_json::json!({ "bert": 1.0 }));
    assert_eq!(json["cells"]["roberta-k1"], "missing");
    let stderr = error_of(
        lsr()
            .args(["matrix", "run", "--k-from", "probe"])
            .arg(&matrix)
            .current_dir(dir.path()),
    );
    assert!(stderr.contains("no finished probe for roberta"), "{stderr}");
}

/// The command named is one that works from where the report was asked: the committed matrix
/// where there is one, never a file that does not exist.
#[test]
fn a_report_of_a_matrix_not_run_yet_says_so_and_names_a_command_that_exists() {
    let dir = tempfile::tempdir().unwrap();
    let repository = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let report = |from: &Path| {
        error_of(
            lsr()
                .arg("report")
                .arg(dir.path().join("table1"))
                .current_dir(from),
        )
    };
    let stderr = report(&repository);
    assert!(stderr.contains("no results yet"), "{stderr}");
    assert!(
        stderr.contains("lsr matrix run experiments/table1.toml"),
        "{stderr}"
    );
    let stderr = report(dir.path());
    assert!(
        !stderr.contains("experiments/") && stderr.contains("lsr matrix run FILE"),
        "{stderr}"
    );
}

/// `lsr encode --max-length` beyond the model's positions is capped as evaluation caps it,
/// and says so.
#[test]
fn encode_caps_its_max_length_at_the_models_positions_and_says_so() {
    let out = lsr()
        .args([
            "encode",
            "--device",
            "flex",
            "--max-length",
            "1000000",
            "--text",
            "paris",
        ])
        .arg("--checkpoint")
        .arg(fixture("bert"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("the model takes at most"), "{stderr}");
}

/// Renamed commands: `lsr evaluate` (now `trec-eval`, beside `lsr eval`) is refused with both
/// names; `data synth` and `data miniatures` still run as aliases of their new names.
#[test]
fn renamed_commands_are_refused_naming_the_new_one_or_kept_as_aliases() {
    let stderr = error_of(lsr().args(["evaluate", "--run", "r", "-c"]));
    assert!(
        stderr.contains("`lsr trec-eval`") && stderr.contains("`lsr eval`"),
        "{stderr}"
    );
    for (old, new) in [("synth", "mini-task"), ("miniatures", "mini-models")] {
        let help = |name: &str| stdout_of(lsr().args(["data", name, "--help"]));
        assert_eq!(help(old), help(new), "{old}");
    }
}

#[test]
fn an_unreadable_file_is_named_once_with_its_cause_once() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.trec");
    let mut command = lsr();
    command
        .args(["trec-eval", "--run"])
        .arg(&missing)
        .arg("--qrels")
        .arg(&missing);
    let stderr = error_of(&mut command);
    assert_eq!(stderr.matches("missing.trec").count(), 1, "{stderr}");
    assert_eq!(stderr.matches("os error 2").count(), 1, "{stderr}");
}

/// A hub file that is not the one whose md5 is pinned (a tampered cache) is refused with both
/// digests, and nothing is installed. The file is looked for at the commit the registry pins,
/// where the Python libraries cache it (a snapshot named by the commit, no ref file).
#[test]
fn a_fetched_file_with_another_md5_is_refused_and_not_installed() {
    let dir = tempfile::tempdir().unwrap();
    let repo = dir
        .path()
        .join("hf/hub/datasets--zeta-alpha-ai--NanoSciFact");
    let snapshot = repo.join("snapshots/309f1d1ae3ae2e092444a8a0c25bed59b82318bc/corpus");
    std::fs::create_dir_all(&snapshot).unwrap();
    std::fs::write(snapshot.join("train-00000-of-00001.parquet"), "abc").unwrap();
    let data = dir.path().join("data");
    let error = error_of(
        lsr()
            .args(["data", "fetch", "nanobeir/scifact", "--data-root"])
            .arg(&data)
            .env("HF_HOME", dir.path().join("hf"))
            .env("HF_HUB_OFFLINE", "1"),
    );
    assert!(
        error.contains("expected md5 9f82bfc70f9b7d7f0275fb6b8ee38876")
            && error.contains("got md5 900150983cd24fb0d6963f7d28e17f72, 3 bytes"),
        "{error}"
    );
    let installed: Vec<_> = walk(&data);
    assert!(
        installed.iter().all(|p| !p.ends_with(".parquet")),
        "{installed:?}"
    );
}

fn walk(dir: &std::path::Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .flat_map(|e| match e.path().is_dir() {
            true => walk(&e.path()),
            false => vec![e.path().display().to_string()],
        })
        .collect()
}

/// `LSR_MATMUL` is read by every command that picks a device: a bad value stops it before any
/// work, naming the variable and the accepted values; `cublas` on a device that is not CUDA
/// computes its products as `cube` does, and the bench reports say so. On flex, `blas` takes the
/// library `LSR_BLAS` names (and refuses, saying so, when it does not load), as does `auto`
/// (which falls back to cube).
#[test]
fn lsr_matmul_is_checked_and_reported_by_the_benches() {
    let bench = |mode: &str, library: Option<&str>| {
        let mut command = lsr();
        command
            .env("LSR_MATMUL", mode)
            .args(["bench", "matmul", "--device", "flex", "--json"])
            .args(["--shape", "head=8x4x6t", "--shape", "plain=8x4x6"])
            .args(["--warmup", "0", "--iterations", "1"]);
        match library {
            Some(library) => command.env("LSR_BLAS", library),
            None => command.env_remove("LSR_BLAS"),
        };
        command
    };
    let error = error_of(&mut bench("cuBLAS", None));
    assert!(
        error.contains("LSR_MATMUL=`cuBLAS`") && error.contains("cube, cublas, blas, auto"),
        "{error}"
    );
    let missing = "/nonexistent/libblas.so";
    let error = error_of(&mut bench("blas", Some(missing)));
    assert!(
        error.contains("LSR_MATMUL=blas") && error.contains(missing),
        "{error}"
    );
    let installed = std::env::var("LSR_BLAS").ok();
    let mut runs = vec![
        ("cube", None, "cube"),
        ("cublas", None, "cube"),
        ("auto", Some(missing), "cube"),
    ];
    match &installed {
        Some(library) => {
            runs.push(("blas", Some(library.as_str()), "blas"));
            runs.push(("auto", Some(library.as_str()), "blas"));
        }
        None if std::env::var_os("CI").is_some() => panic!("CI sets LSR_BLAS (`just test`)"),
        None => eprintln!("LSR_BLAS unset: the runs through a CPU BLAS are skipped"),
    }
    for (mode, library, route) in runs {
        let reports = json_lines(&stdout_of(&mut bench(mode, library)));
        let shapes: Vec<_> = reports.iter().map(|r| r["shape"].clone()).collect();
        assert_eq!(shapes, ["head", "plain"], "one line per shape, in order");
        for report in &reports {
            assert_eq!(report["matmul"], route, "{mode}");
            // Off CUDA nothing goes to cuBLASLt, so there is nothing of it to report.
            assert!(report.get("cublas").is_none(), "{report}");
            assert_eq!(report.get("blas").is_some(), route == "blas", "{report}");
        }
        assert_eq!(reports[0]["transposed_rhs"], true);
        assert_eq!(reports[1]["transposed_rhs"], false);
    }
}
