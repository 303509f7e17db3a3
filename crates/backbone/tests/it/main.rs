//! One test binary for the crate, each file a module: the workspace then links one test
//! executable per crate, not one per file (each links the whole backend stack).

mod bad_input;
mod dropout;
mod hub_cache;
mod parity;
mod precision;
mod rescale;

/// The committed fixture of registered family `name` (`data/fixtures/<name>`, as the family
/// registry names it); a family without one fails, naming the missing file and its generator.
fn family_fixture(name: &str) -> std::path::PathBuf {
    let dir = lsr_backbone::reference::fixtures_dir().join(name);
    for file in ["config.json", "expected.safetensors"] {
        let path = dir.join(file);
        assert!(
            path.is_file(),
            "family `{name}` has no fixture: {} is missing; add the family to \
             scripts/fixtures/generate.py and run it",
            path.display()
        );
    }
    dir
}
