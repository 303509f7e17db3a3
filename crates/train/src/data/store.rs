//! Texts by integer id from `id<TAB>text` files (MS MARCO collection and queries).

use std::path::Path;

use crate::data::lines::LineFile;
use crate::error::{Result, TrainError};

/// `id<TAB>text` lines (MS MARCO `collection.tsv`, `queries.train.tsv`) looked up by integer
/// id: the file stays mapped, and the index holds 16 bytes per line (id and offset), sorted.
pub struct TextStore {
    lines: LineFile,
    /// (id, byte offset of the text) sorted by id.
    index: Vec<(u64, u64)>,
}

impl TextStore {
    pub fn open(path: &Path) -> Result<Self> {
        let lines = LineFile::open(path)?;
        let mut index = Vec::with_capacity(lines.len());
        for (number, range) in lines.ranges().enumerate() {
            let line = lines.slice(range.clone());
            let tab = memchr::memchr(b'\t', line)
                .ok_or_else(|| lines.error(number, "expected `id<TAB>text`, found no tab"))?;
            let id = std::str::from_utf8(&line[..tab])
                .ok()
                .and_then(|id| id.trim().parse::<u64>().ok())
                .ok_or_else(|| {
                    lines.error(
                        number,
                        format!(
                            "id `{}` is not an integer",
                            String::from_utf8_lossy(&line[..tab])
                        ),
                    )
                })?;
            index.push((id, (range.start + tab + 1) as u64));
        }
        index.sort_unstable_by_key(|(id, _)| *id);
        if let Some(pair) = index.windows(2).find(|pair| pair[0].0 == pair[1].0) {
            return Err(TrainError::data(
                path,
                None,
                format!("id {} appears more than once", pair[0].0),
            ));
        }
        Ok(Self { lines, index })
    }

    pub fn len(&self) -> usize {
        self.index.len()
    }

    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    pub fn path(&self) -> &Path {
        self.lines.path()
    }

    /// Whether the file has a line for `id`.
    pub fn contains(&self, id: u64) -> bool {
        self.index.binary_search_by_key(&id, |(id, _)| *id).is_ok()
    }

    /// The text of `id`, `None` if the file has no such id; `Err` if it is not UTF-8.
    pub fn get(&self, id: u64) -> Result<Option<&str>> {
        let Ok(position) = self.index.binary_search_by_key(&id, |(id, _)| *id) else {
            return Ok(None);
        };
        let text = self.lines.line_from(self.index[position].1 as usize);
        std::str::from_utf8(text).map(Some).map_err(|e| {
            TrainError::data(
                self.path(),
                None,
                format!("text of id {id} is not UTF-8: {e}"),
            )
        })
    }
}
