//! For tests of what reads a file back: a file damaged between runs as disks, copies and
//! careless hands damage one, so that the reader's check of it can be shown to find it.

use std::path::Path;

/// How a file is damaged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Damage {
    /// Its last 100 bytes gone (all but its first byte, if it is shorter).
    CutShort,
    /// One bit of its middle byte flipped.
    Flipped,
}

impl Damage {
    pub const ALL: [Damage; 2] = [Damage::CutShort, Damage::Flipped];

    /// Damages the file at `path` in place.
    pub fn apply(self, path: &Path) -> std::io::Result<()> {
        let mut bytes = std::fs::read(path)?;
        match self {
            Damage::CutShort => bytes.truncate(bytes.len().saturating_sub(100).max(1)),
            Damage::Flipped => {
                let middle = bytes.len() / 2;
                bytes[middle] ^= 0x10;
            }
        }
        std::fs::write(path, bytes)
    }
}

impl std::fmt::Display for Damage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Damage::CutShort => "cut short",
            Damage::Flipped => "a byte flipped",
        })
    }
}
