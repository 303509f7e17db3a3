//! Every input that once crashed, hung or over-allocated a reader (`regressions/<target>/`)
//! goes through its target again, under the fuzz build's allocation cap: these must now end in
//! an `Err`, not a panic or an abort. And `fuzz.sh` fuzzes every target there is.

use std::path::Path;

#[global_allocator]
static ALLOCATOR: lsr_fuzz::CappedAllocator = lsr_fuzz::CappedAllocator;

#[test]
fn every_regression_input_is_rejected_cleanly() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("regressions");
    let mut inputs = 0;
    for dir in std::fs::read_dir(&root).expect("regressions/ exists") {
        let dir = dir.unwrap().path();
        let name = dir.file_name().unwrap().to_str().unwrap().to_string();
        let target = lsr_fuzz::target(&name)
            .unwrap_or_else(|| panic!("{}: not a fuzz target", dir.display()));
        for file in std::fs::read_dir(&dir).unwrap() {
            let file = file.unwrap().path();
            println!("{name}: {}", file.display());
            target(&std::fs::read(&file).unwrap());
            inputs += 1;
        }
    }
    assert!(inputs > 0, "no regression inputs under {}", root.display());
}

#[test]
fn fuzz_sh_runs_every_target() {
    let script = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz.sh"))
        .expect("fuzz.sh exists");
    let listed: Vec<&str> = script
        .lines()
        .find_map(|line| line.strip_prefix("targets=("))
        .and_then(|rest| rest.strip_suffix(')'))
        .expect("fuzz.sh has a `targets=(...)` line")
        .split_whitespace()
        .collect();
    let names: Vec<&str> = lsr_fuzz::TARGETS.iter().map(|(name, _)| *name).collect();
    assert_eq!(listed, names, "fuzz.sh's targets are not lsr_fuzz::TARGETS");
}
