//! lsr's one checksum system: the digests of a file's bytes, as lsr checks what it reads back
//! and what it downloads. SHA-256 for lsr's own files (a staged directory's `checksums.json`,
//! written last and checked before the directory is read; the data root's record of what was
//! installed), md5 besides where the field publishes md5 (the data sets' downloads), hashed in
//! one pass as the bytes stream by ([`Hashing`]).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use md5::Md5;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::{FileError, Result, read_json, write_json};

/// The record of a directory's files, beside them.
pub const CHECKSUMS: &str = "checksums.json";

/// A file as written: its size and SHA-256 (hexadecimal).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileDigest {
    pub size: u64,
    pub sha256: String,
}

impl FileDigest {
    /// The size and SHA-256 of the file at `path`, read once.
    pub fn of(path: &Path) -> Result<Self> {
        let mut file = std::fs::File::open(path).map_err(|e| FileError::io(path, e))?;
        let mut hash = Sha256::new();
        let size = std::io::copy(&mut file, &mut hash).map_err(|e| FileError::io(path, e))?;
        Ok(Self {
            size,
            sha256: hex::encode(hash.finalize()),
        })
    }

    /// How the file as it is now (`now`) differs from this record of it, if it does.
    pub fn damage(&self, now: &Self) -> Option<String> {
        let (then, size) = (self.size, now.size);
        if size < then {
            Some(format!("{size} bytes of the {then} written: cut short"))
        } else if size > then {
            Some(format!("{size} bytes, {then} written: grown"))
        } else if now.sha256 != self.sha256 {
            Some(format!(
                "its SHA-256 is {}…, {}… when written: changed",
                &now.sha256[..12],
                &self.sha256[..12]
            ))
        } else {
            None
        }
    }
}

/// The SHA-256 of `bytes`, hexadecimal.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// A file's digests where the field publishes md5: its md5 beside its size and SHA-256.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Digests {
    pub md5: String,
    pub file: FileDigest,
}

impl Digests {
    /// The digests of the file at `path`, read once.
    pub fn of(path: &Path) -> Result<Self> {
        let mut file = std::fs::File::open(path).map_err(|e| FileError::io(path, e))?;
        let mut hashing = Hashing::new(std::io::sink());
        std::io::copy(&mut file, &mut hashing).map_err(|e| FileError::io(path, e))?;
        Ok(hashing.finish().1)
    }
}

/// A writer that passes bytes on, hashing (md5 and SHA-256) and counting them: a download is
/// checked as it is written.
pub struct Hashing<W> {
    inner: W,
    md5: Md5,
    sha256: Sha256,
    size: u64,
}

impl<W: Write> Hashing<W> {
    pub fn new(inner: W) -> Self {
        Self {
            inner,
            md5: Md5::new(),
            sha256: Sha256::new(),
            size: 0,
        }
    }

    pub fn finish(self) -> (W, Digests) {
        let digests = Digests {
            md5: hex::encode(self.md5.finalize()),
            file: FileDigest {
                size: self.size,
                sha256: hex::encode(self.sha256.finalize()),
            },
        };
        (self.inner, digests)
    }
}

impl<W: Write> Write for Hashing<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let written = self.inner.write(buf)?;
        self.md5.update(&buf[..written]);
        self.sha256.update(&buf[..written]);
        self.size += written as u64;
        Ok(written)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// What checking a directory against its `checksums.json` found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Checked {
    /// Every recorded file as written.
    Intact,
    /// No record: written before lsr recorded one, so nothing could be checked.
    Unrecorded,
    /// What is wrong, file by file (`model.bpk: … cut short`).
    Damaged(Vec<String>),
}

/// Records the size and digest of each of `names` (files in `dir`) in `dir/checksums.json`:
/// the last file written into a staged directory, after those it records.
pub fn record(dir: &Path, names: &[&str]) -> Result<()> {
    let mut files = BTreeMap::new();
    for name in names {
        files.insert(name.to_string(), FileDigest::of(&dir.join(name))?);
    }
    write_json(&dir.join(CHECKSUMS), &files)
}

/// Checks every file `dir/checksums.json` records against it, reading each once. A file that
/// cannot be read for another reason than its absence is an error, not damage.
pub fn check(dir: &Path) -> Result<Checked> {
    let path = dir.join(CHECKSUMS);
    let recorded = match read_json::<BTreeMap<String, FileDigest>>(&path) {
        Ok(None) => return Ok(Checked::Unrecorded),
        Ok(Some(recorded)) => recorded,
        Err(FileError::Parse { message, .. }) => {
            return Ok(Checked::Damaged(vec![format!(
                "{CHECKSUMS}: not a record of checksums ({message})"
            )]));
        }
        Err(error) => return Err(error),
    };
    let mut damage = Vec::new();
    for (name, then) in &recorded {
        let file = dir.join(name);
        if !file.exists() {
            damage.push(format!("{name}: missing"));
            continue;
        }
        if let Some(found) = then.damage(&FileDigest::of(&file)?) {
            damage.push(format!("{name}: {found}"));
        }
    }
    Ok(match damage.is_empty() {
        true => Checked::Intact,
        false => Checked::Damaged(damage),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_digest_is_sha256_in_hexadecimal() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("abc");
        std::fs::write(&path, "abc").unwrap();
        let digest = FileDigest::of(&path).unwrap();
        assert_eq!(digest.size, 3);
        assert_eq!(
            digest.sha256,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn hashing_gives_the_known_digests_of_what_it_passes_on() {
        let mut hashing = Hashing::new(Vec::new());
        hashing.write_all(b"abc").unwrap();
        let (bytes, digests) = hashing.finish();
        assert_eq!(bytes, b"abc");
        assert_eq!(digests.md5, "900150983cd24fb0d6963f7d28e17f72");
        let path = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(path.path(), "abc").unwrap();
        assert_eq!(digests.file, FileDigest::of(path.path()).unwrap());
        assert_eq!(Digests::of(path.path()).unwrap(), digests);
    }

    /// A file cut short, one with a byte flipped, one removed and a record that does not parse
    /// are each named with what is wrong; a directory without a record is said to have none.
    #[test]
    fn each_kind_of_damage_is_found_and_named() {
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path();
        assert_eq!(check(dir).unwrap(), Checked::Unrecorded);
        for name in ["a.bin", "b.bin", "c.json"] {
            std::fs::write(dir.join(name), vec![7u8; 100]).unwrap();
        }
        record(dir, &["a.bin", "b.bin", "c.json"]).unwrap();
        assert_eq!(check(dir).unwrap(), Checked::Intact);

        std::fs::write(dir.join("a.bin"), vec![7u8; 90]).unwrap();
        let mut flipped = vec![7u8; 100];
        flipped[50] ^= 1;
        std::fs::write(dir.join("b.bin"), flipped).unwrap();
        std::fs::remove_file(dir.join("c.json")).unwrap();
        let Checked::Damaged(found) = check(dir).unwrap() else {
            panic!("damage not found");
        };
        assert_eq!(found.len(), 3, "{found:?}");
        assert_eq!(found[0], "a.bin: 90 bytes of the 100 written: cut short");
        assert!(
            found[1].starts_with("b.bin: its SHA-256 is") && found[1].ends_with("changed"),
            "{found:?}"
        );
        assert_eq!(found[2], "c.json: missing");

        std::fs::write(dir.join(CHECKSUMS), "{\"a.bin\": ").unwrap();
        let Checked::Damaged(found) = check(dir).unwrap() else {
            panic!("a damaged record not found");
        };
        assert!(
            found[0].starts_with("checksums.json: not a record"),
            "{found:?}"
        );
    }
}
