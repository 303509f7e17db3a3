//! Results are written to a temporary file in the destination's directory and renamed into
//! place once complete, so an interrupted run never leaves a half-written file under the real
//! name, and a reader sees either the old file or the new one.

use std::io::Write;
use std::path::Path;

use crate::error::{EvalError, Result};

/// Creates `path` atomically with the bytes `fill` writes (buffered).
pub fn write_atomically(
    path: &Path,
    fill: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<()> {
    let io = |source| EvalError::Io {
        path: path.to_path_buf(),
        source,
    };
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(io)?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(io)?;
    {
        let mut out = std::io::BufWriter::new(tmp.as_file_mut());
        fill(&mut out).map_err(io)?;
        out.flush().map_err(io)?;
    }
    tmp.as_file().sync_all().map_err(io)?;
    tmp.persist(path).map_err(|e| io(e.error))?;
    Ok(())
}

/// Pretty JSON, written atomically.
pub fn write_json(path: &Path, value: &impl serde::Serialize) -> Result<()> {
    write_atomically(path, |out| {
        serde_json::to_writer_pretty(&mut *out, value).map_err(std::io::Error::other)
    })
}
