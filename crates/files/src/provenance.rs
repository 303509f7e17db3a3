//! The commit the running `lsr` was built from, recorded with every result (`cell.json`, the
//! model card): not the repository the user happens to run it in. The binary's build script
//! reads it from git at build time and the binary hands it here when it starts
//! ([`set_built_from`]); a library cannot see its binary's build. Code run without the binary
//! (tests) records it as unknown. Also what a git commit id looks like, for the hub
//! repositories (models, data sets) lsr pins by commit.

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

/// Whether `revision` is a git commit id (40 hex digits), which no push can move, rather than a
/// branch or a tag: what a hub model or data set is pinned by.
pub fn is_commit(revision: &str) -> bool {
    revision.len() == 40 && revision.bytes().all(|b| b.is_ascii_hexdigit())
}
