//! The GPU check's plan (`scripts/gpu/check.sh --plan`: every command a stand-in, time kept on a
//! clock of the plan's own): what it runs first, what it drops after a failed parity, and what
//! its budget leaves out, with every step on a line of its results.

use std::path::PathBuf;
use std::process::Command;

fn repository() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `(step, status)` of each line of the plan's results.jsonl, in order.
fn plan(args: &[&str], step_seconds: u32) -> Vec<(String, String)> {
    let out = tempfile::tempdir().unwrap();
    let run = Command::new("bash")
        .arg(repository().join("scripts/gpu/check.sh"))
        .arg("--plan")
        .args(args)
        .env("OUT", out.path())
        .env("PLAN_STEP_SECONDS", step_seconds.to_string())
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let results = std::fs::read_to_string(out.path().join("results.jsonl")).unwrap();
    results
        .lines()
        .map(|line| {
            let record: serde_json::Value = serde_json::from_str(line).unwrap();
            let field = |name: &str| record[name].as_str().unwrap().to_string();
            (field("step"), field("status"))
        })
        .collect()
}

fn first(steps: &[(String, String)], part: &str) -> usize {
    steps
        .iter()
        .position(|(name, _)| name.contains(part))
        .unwrap_or_else(|| panic!("no step `{part}`: {steps:?}"))
}

#[test]
fn a_mode_whose_parity_fails_is_dropped_from_every_later_step() {
    let steps = plan(&["--fail-parity", "cublas", "--budget", "100000"], 1);
    let failed = first(&steps, "-cublas-parity-f32");
    assert_eq!(steps[failed].1, "exit 1");
    assert_eq!(steps[failed + 1], ("drop-cublas".into(), "dropped".into()));
    let after = &steps[failed + 2..];
    let cublas: Vec<_> = after
        .iter()
        .filter(|(name, _)| name.contains("cublas"))
        .collect();
    assert!(cublas.len() >= 6, "{cublas:?}");
    for (name, status) in cublas {
        assert_eq!(status, "dropped", "{name}");
    }
    for (name, status) in after.iter().filter(|(name, _)| name.contains("-cube-")) {
        assert_eq!(status, "ok", "{name}: the other mode runs on");
    }
}

#[test]
fn targets_run_before_diagnosis_and_the_budget_reports_what_it_leaves_out() {
    let unbounded = plan(&["--budget", "100000"], 20);
    assert!(
        unbounded.iter().all(|(_, status)| status == "ok"),
        "{unbounded:?}"
    );
    let order = [
        "-parity-",
        "-train-recipe-",
        "-encode-",
        "-matmul-",
        "lsr-profile-train",
    ];
    for pair in order.windows(2) {
        assert!(
            first(&unbounded, pair[0]) < first(&unbounded, pair[1]),
            "{} before {}",
            pair[0],
            pair[1]
        );
    }
    // Every step the plan has, again when each takes 20 s of a 400 s budget: those it reaches
    // run, in the same order, and the rest are on their lines as skipped.
    let bounded = plan(&["--budget", "400"], 20);
    let names =
        |steps: &[(String, String)]| steps.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    assert_eq!(names(&bounded), names(&unbounded));
    // A products bench is one step with a record per shape: counted once, by its first shape.
    let ran = bounded
        .iter()
        .filter(|(name, status)| {
            status == "ok" && (!name.contains("-matmul-") || name.ends_with("-head"))
        })
        .count();
    assert!(ran * 20 <= 400, "{ran} steps of 20 s ran in 400 s");
    let skipped = bounded.iter().skip_while(|(_, status)| status == "ok");
    assert!(skipped.clone().count() > 0);
    assert!(
        skipped.clone().all(|(_, status)| status == "skipped"),
        "{bounded:?}"
    );
}

/// A GPU build keeps autotune's choices and its compiled kernels where `LSR_KERNEL_CACHE` says,
/// for the next process to find, and `off` keeps them in memory. Run where `LSR_TEST_DEVICE`
/// names a WGPU device (CI: lavapipe), which caches as CUDA does.
#[test]
fn a_gpu_backend_keeps_its_kernels_where_lsr_kernel_cache_says() {
    let Some(spec) = lsr_files::ci::wgpu_test_device() else {
        return;
    };
    let cache = tempfile::tempdir().unwrap();
    let bench = |setting: &str| {
        crate::common::succeeded(
            crate::common::lsr()
                .env("LSR_KERNEL_CACHE", setting)
                .args([
                    "bench", "reduce", "--device", &spec, "--rows", "64", "--width", "8",
                ])
                .args([
                    "--batch",
                    "2",
                    "--seq-len",
                    "4",
                    "--terms",
                    "16",
                    "--warmup",
                    "0",
                ])
                .args(["--iterations", "1"]),
        )
    };
    let on = bench(cache.path().join("kernels").to_str().unwrap());
    let log = String::from_utf8_lossy(&on.stderr);
    assert!(log.contains("kernel cache: "), "{log}");
    let files: Vec<_> = std::fs::read_dir(cache.path().join("kernels"))
        .expect("the cache directory")
        .map(|entry| entry.unwrap().file_name())
        .collect();
    assert!(
        files
            .iter()
            .any(|name| name.to_string_lossy().ends_with(".db")),
        "{files:?}"
    );
    let off = bench("off");
    assert!(String::from_utf8_lossy(&off.stderr).contains("kernel cache: off"));
}

/// A products bench prints a line per shape, lsr's as serde_json writes JSON and PyTorch's as
/// json.dumps does: each becomes a record named by its shape, so that every shape of lsr's is
/// set beside PyTorch's in the summary; a bench the budget does not reach has the same lines.
#[test]
fn each_product_is_recorded_under_its_shape_for_lsr_and_pytorch_alike() {
    for steps in [
        plan(&["--budget", "100000"], 1),
        plan(&["--budget", "100"], 20),
    ] {
        for shape in ["head", "ffn-in", "ffn-in-plain"] {
            for tool in ["lsr-", "torch-"] {
                let named = steps
                    .iter()
                    .filter(|(name, _)| name.starts_with(tool) && name.contains("-matmul-"))
                    .filter(|(name, _)| name.ends_with(&format!("-{shape}")))
                    .count();
                assert!(named >= 2, "{tool}… {shape}: {named} records in {steps:?}");
            }
        }
    }
}
