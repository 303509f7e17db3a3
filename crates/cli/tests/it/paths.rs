//! Paths as a user types them: a mistyped local checkpoint is "no such directory" for every
//! command that takes one, never a hub id, and a default path relative to the working
//! directory says so, with the flag that changes it, when it is not there.

use crate::common::lsr;

#[test]
fn every_command_taking_a_checkpoint_calls_a_mistyped_path_no_such_directory() {
    let dir = tempfile::tempdir().unwrap();
    let vectors = dir.path().join("corpus.vectors");
    let out = dir.path().join("out");
    let flex = ["--device", "flex"];
    for path in [
        "./models/bert",
        "/nonexistent/bert",
        "data/models/bert",
        "../bert",
    ] {
        let commands: [Vec<&str>; 4] = [
            [
                &["encode", "--text", "x", "--checkpoint", path][..],
                &flex[..],
            ]
            .concat(),
            [&["norms", path][..], &flex[..]].concat(),
            [&["k", "suggest", path][..], &flex[..]].concat(),
            vec![
                "vectors",
                "export",
                vectors.to_str().unwrap(),
                "--format",
                "seismic",
                "--out",
                out.to_str().unwrap(),
                "--checkpoint",
                path,
            ],
        ];
        for args in commands {
            // Offline: a name taken for a hub id fails fast here, and says so.
            let output = lsr()
                .args(&args)
                .env("HF_HUB_OFFLINE", "1")
                .current_dir(dir.path())
                .output()
                .unwrap();
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert!(
                !output.status.success()
                    && stderr.contains(&format!("{path}: no such directory"))
                    && !stderr.contains("huggingface-cli")
                    && !stderr.contains("HF_HUB_OFFLINE"),
                "{args:?}: {stderr}"
            );
        }
    }
}

#[test]
fn check_outside_the_repository_names_the_fixtures_flag_and_where_it_looked() {
    let dir = tempfile::tempdir().unwrap();
    let output = lsr()
        .args(["check", "--device", "flex"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    let looked = dir.path().canonicalize().unwrap().join("data/fixtures");
    assert!(
        !output.status.success()
            && stderr.contains("--fixtures")
            && stderr.contains(&looked.display().to_string()),
        "{stderr}"
    );
}
