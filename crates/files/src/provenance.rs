//! The commit the running `lsr` was built from, recorded with every result (`cell.json`, the
//! model card): not the repository the user happens to run it in. The binary's build script
//! reads it from git at build time and the binary hands it here when it starts
//! ([`set_built_from`]); a library cannot see its binary's build. Code run without the binary
//! (tests) records it as unknown.

use std::sync::OnceLock;

/// A commit of lsr, and whether the sources built differed from it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BuiltFrom {
    pub commit: String,
    pub dirty: bool,
}

static BUILT_FROM: OnceLock<Option<BuiltFrom>> = OnceLock::new();

/// What the binary was built from (`None`: outside lsr's git checkout); the first call wins.
pub fn set_built_from(built: Option<BuiltFrom>) {
    let _ = BUILT_FROM.set(built);
}

pub fn built_from() -> Option<BuiltFrom> {
    BUILT_FROM.get().cloned().flatten()
}

/// The commit as a result shows it: `<hash>`, with the changes said, or why it is unknown.
pub fn describe(commit: Option<&str>, dirty: Option<bool>) -> String {
    match (commit, dirty) {
        (Some(commit), Some(true)) => format!("{commit} with uncommitted changes"),
        (Some(commit), _) => commit.to_string(),
        (None, _) => "unknown (built outside lsr's git checkout)".into(),
    }
}
