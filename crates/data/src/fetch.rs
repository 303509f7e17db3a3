//! `lsr data fetch`: downloads a data set's standard files from their canonical public
//! locations into the data root (resumed after a dropped connection or a killed fetch:
//! `download.rs`), each checked against its published md5 and refused before anything is
//! installed if it differs, then checks what it got (the files parse, the number of evaluated
//! queries is the published one). Offline, or when a download fails, the error names every file
//! expected, where it goes and where it comes from.

use std::io::Read;
use std::path::{Path, PathBuf};

use crate::datasets::Dataset;
use crate::download;
use crate::error::{DataError, Result};
use crate::installed::{self, Installed};
use crate::registry::{self, Download, Payload, Pinned};
use lsr_files::digest::{Digests, Hashing};

/// The downloads a data set (or group, or `registry::MSMARCO_TRAIN`) needs.
pub fn plan(name: &str) -> Result<Vec<Download>> {
    Ok(registry::fetched(name)?
        .into_iter()
        .flat_map(|set| set.downloads)
        .collect())
}

/// The lock a fetch holds on its data root, so that two fetches never install the same file.
const FETCH_LOCK: &str = ".fetch.lock";

/// Where downloads gather under the data root (`<md5>-<name>.partial` until verified), each
/// removed once installed.
pub const DOWNLOADS: &str = ".downloads";

/// Fetches what is missing, then verifies every set; returns `(name, evaluated queries)`.
pub fn fetch(name: &str, root: &Path, offline: bool) -> Result<Vec<(String, usize)>> {
    let plan = plan(name)?;
    let _lock = match offline {
        true => None,
        false => Some(lsr_files::OutputLock::acquire(root, FETCH_LOCK)?),
    };
    for download in plan {
        if download
            .destinations()
            .iter()
            .all(|d| root.join(d).is_file())
        {
            continue;
        }
        if offline {
            return Err(missing(&download, root, "offline"));
        }
        let url = download.origin();
        if download.pinned().is_none() {
            let why = installed::unpinned_reason(&url).unwrap_or("no digest is pinned");
            let why = format!("no published checksum to verify it against: {why}");
            return Err(missing(&download, root, &why));
        }
        let fetch_error = |e: DataError| missing(&download, root, &e.to_string());
        // The verified download, whether it is a copy to remove once installed, and what it
        // holds.
        let (source, temporary, digests, payload) = match &download {
            Download::HubDataset {
                repo,
                commit,
                file,
                dest,
                pinned,
            } => {
                let cached = hub_file(repo, commit, file).map_err(fetch_error)?;
                let digests = Digests::of(&cached)?;
                installed::check(&url, pinned.as_ref(), &cached, &digests)?;
                (cached, false, digests, Payload::File(dest.clone()))
            }
            Download::Url {
                url,
                payload,
                pinned,
            } => {
                let (archive, digests) = get(url, pinned.as_ref(), root).map_err(fetch_error)?;
                (archive, true, digests, payload.clone())
            }
        };
        let installed = install(&source, &payload, root)?;
        // Kept until installed: a verified download is not fetched twice.
        if temporary {
            std::fs::remove_file(&source).map_err(|e| DataError::io(&source, e))?;
        }
        let record = installed
            .into_iter()
            .map(|(dest, got)| {
                let entry = Installed {
                    file: got.file,
                    source: url.clone(),
                    source_md5: digests.md5.clone(),
                };
                (dest, entry)
            })
            .collect();
        installed::record_installed(root, record)?;
    }
    verify(name, root)
}

/// Re-hashes the files of `name` that a fetch installed against their record; returns how
/// many matched and how many files the set has (the rest were put in place by hand).
pub fn verify_installed(name: &str, root: &Path) -> Result<(usize, usize)> {
    let plan = plan(name)?;
    let files: Vec<&Path> = plan.iter().flat_map(|d| d.destinations()).collect();
    Ok((installed::verify_installed(root, &files)?, files.len()))
}

/// Parses every set of `name` under `root` and checks its number of evaluated queries.
pub fn verify(name: &str, root: &Path) -> Result<Vec<(String, usize)>> {
    let mut checked = Vec::new();
    for set in registry::fetched(name)? {
        // Training data has no evaluated queries; its files are checked by their record.
        let Some(evaluation) = &set.evaluation else {
            continue;
        };
        let dataset = Dataset::locate(&set, root)?;
        let (queries, _) = dataset.queries_and_qrels()?;
        if let Some(expected) = evaluation.published_queries
            && expected != queries.len()
        {
            return Err(DataError::File {
                path: dataset.queries.clone(),
                message: format!(
                    "{} has {} evaluated queries, the published set has {expected}",
                    dataset.name,
                    queries.len()
                ),
            });
        }
        if let Some(expected) = evaluation.published_flops_queries
            && let Some((path, flops)) = dataset.read_flops_queries()?
            && flops.len() != expected
        {
            return Err(DataError::File {
                path: path.to_path_buf(),
                message: format!(
                    "{} has {} queries for FLOPs, the published set has {expected}",
                    dataset.name,
                    flops.len()
                ),
            });
        }
        checked.push((dataset.name.clone(), queries.len()));
    }
    Ok(checked)
}

fn missing(download: &Download, root: &Path, why: &str) -> DataError {
    let files: Vec<String> = download
        .destinations()
        .iter()
        .map(|d| root.join(d).display().to_string())
        .collect();
    DataError::File {
        path: root.to_path_buf(),
        message: format!(
            "cannot fetch {} ({why}); download it on a machine with network access and put {} in place",
            download.origin(),
            files.join(", ")
        ),
    }
}

/// Downloads a URL of the registry into `<root>/.downloads/` (resumed there if a previous
/// fetch was cut off), verified against its pinned md5.
fn get(url: &str, pinned: Option<&Pinned>, root: &Path) -> Result<(PathBuf, Digests)> {
    let pinned = pinned.ok_or_else(|| installed::unpinned(url, root))?;
    let name = url.rsplit('/').next().unwrap_or(url);
    let dest = root.join(DOWNLOADS).join(format!("{}-{name}", pinned.md5));
    let digests = download::download(url, pinned, &dest, &download::Retry::default())?;
    Ok((dest, digests))
}

/// A file of a hub dataset at `commit`, from the hub cache (downloaded into it if missing).
fn hub_file(repo: &str, commit: &str, file: &str) -> Result<PathBuf> {
    let hub_error = |e: &dyn std::fmt::Display| DataError::Invalid(e.to_string());
    let api = hf_hub::api::sync::ApiBuilder::from_env()
        .build()
        .map_err(|e| hub_error(&e))?;
    let repo = hf_hub::Repo::with_revision(repo.into(), hf_hub::RepoType::Dataset, commit.into());
    // The Python libraries cache a commit's snapshot under its name, with no ref file for it.
    let snapshot = hf_hub::Cache::from_env()
        .repo(repo.clone())
        .pointer_path(commit)
        .join(file);
    if snapshot.is_file() {
        return Ok(snapshot);
    }
    api.repo(repo).get(file).map_err(|e| hub_error(&e))
}

/// Extracts the payload's members of `archive` to their places under `root`; every member
/// must be found. Returns each installed file (relative to `root`) with its digests.
pub fn install(archive: &Path, payload: &Payload, root: &Path) -> Result<Vec<(PathBuf, Digests)>> {
    let io = |path: &Path, source| DataError::io(path, source);
    let open = || std::fs::File::open(archive).map_err(|e| io(archive, e));
    let mut installed = Vec::new();
    let mut write = |dest: &Path, reader: &mut dyn Read| -> Result<()> {
        let mut got = None;
        lsr_files::write_atomically(&root.join(dest), |out| {
            let mut hashing = Hashing::new(out);
            std::io::copy(reader, &mut hashing)?;
            got = Some(hashing.finish().1);
            Ok(())
        })?;
        installed.push((
            dest.to_path_buf(),
            got.expect("set when the write succeeded"),
        ));
        Ok(())
    };
    let matches =
        |name: &str, member: &str| name == member || name.ends_with(&format!("/{member}"));
    let mut found = Vec::new();
    match payload {
        Payload::File(dest) => write(dest, &mut open()?)?,
        Payload::TarGz(members) => {
            let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(open()?));
            for entry in tar.entries().map_err(|e| io(archive, e))? {
                let mut entry = entry.map_err(|e| io(archive, e))?;
                let name = entry
                    .path()
                    .map_err(|e| io(archive, e))?
                    .to_string_lossy()
                    .to_string();
                if let Some((member, dest)) = members.iter().find(|(m, _)| matches(&name, m)) {
                    write(dest, &mut entry)?;
                    found.push(member.clone());
                }
            }
            check_found(archive, members, &found)?
        }
        Payload::Zip(members) => {
            let mut zip =
                zip::ZipArchive::new(open()?).map_err(|e| io(archive, std::io::Error::other(e)))?;
            for i in 0..zip.len() {
                let mut entry = zip
                    .by_index(i)
                    .map_err(|e| io(archive, std::io::Error::other(e)))?;
                let name = entry
                    .name()
                    .map_err(|e| io(archive, std::io::Error::other(e)))?
                    .to_string();
                if let Some((member, dest)) = members.iter().find(|(m, _)| matches(&name, m)) {
                    write(dest, &mut entry)?;
                    found.push(member.clone());
                }
            }
            check_found(archive, members, &found)?
        }
    }
    Ok(installed)
}

fn check_found(archive: &Path, members: &[(String, PathBuf)], found: &[String]) -> Result<()> {
    match members.iter().find(|(m, _)| !found.contains(m)) {
        Some((member, _)) => Err(DataError::File {
            path: archive.to_path_buf(),
            message: format!("the archive has no `{member}`"),
        }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    const CORPUS: &str = "{\"_id\": \"d1\", \"text\": \"a\"}\n";
    const QUERIES: &str = "{\"_id\": \"q1\", \"text\": \"b\"}\n";
    const QRELS: &str = "query-id\tcorpus-id\tscore\nq1\td1\t1\n";

    /// `lsr data verify msmarco-dev` checks the full dev queries FLOPs are measured over
    /// against their published count, as it checks the evaluated ones.
    #[test]
    fn msmarco_devs_full_dev_queries_are_counted_too() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("msmarco");
        std::fs::create_dir_all(&dir).unwrap();
        let queries: String = (0..6980).map(|i| format!("{i}\tq{i}\n")).collect();
        std::fs::write(dir.join("queries.dev.small.tsv"), queries).unwrap();
        std::fs::write(dir.join("qrels.dev.small.tsv"), "0\t0\t0\t1\n").unwrap();
        std::fs::write(dir.join("collection.tsv"), "0\tpassage\n").unwrap();
        std::fs::write(dir.join("queries.dev.tsv"), "0\tq0\n1\tq1\n").unwrap();
        let error = verify("msmarco-dev", root.path()).unwrap_err().to_string();
        assert!(
            error.contains("queries.dev.tsv") && error.contains("2 queries for FLOPs"),
            "{error}"
        );
        assert!(error.contains("101093"), "{error}");
    }

    #[test]
    fn offline_names_the_files_their_place_and_origin() {
        let root = tempfile::tempdir().unwrap();
        let error = fetch("beir/scifact", root.path(), true)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("thakur/BEIR/datasets/scifact.zip"),
            "{error}"
        );
        assert!(
            error.contains("beir/scifact/corpus.jsonl") && error.contains("offline"),
            "{error}"
        );
        let error = fetch("nanobeir/scifact", root.path(), true)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("datasets/zeta-alpha-ai/NanoSciFact"),
            "{error}"
        );
    }

    /// A teacher's scores have no published digest: nothing is downloaded, and the error says
    /// why, what to fetch by hand and where it goes.
    #[test]
    fn an_unpinned_download_is_refused_before_the_network_saying_why() {
        let root = tempfile::tempdir().unwrap();
        let error = fetch(registry::MSMARCO_CE_SCORES, root.path(), false)
            .unwrap_err()
            .to_string();
        for expected in [
            "no published checksum",
            "sentence-transformers publishes no checksum",
            "msmarco-hard-negatives/resolve/main/cross-encoder-ms-marco-MiniLM-L-6-v2-scores.pkl.gz",
            "msmarco/cross-encoder-ms-marco-MiniLM-L-6-v2-scores.pkl.gz",
        ] {
            assert!(error.contains(expected), "{expected}: {error}");
        }
    }

    #[test]
    fn zip_and_tar_members_land_in_the_data_root() {
        let root = tempfile::tempdir().unwrap();
        let zip_path = root.path().join("scifact.zip");
        let mut zip = zip::ZipWriter::new(std::fs::File::create(&zip_path).unwrap());
        let stored = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Stored);
        for (name, content) in [
            ("scifact/corpus.jsonl", CORPUS),
            ("scifact/queries.jsonl", QUERIES),
            ("scifact/qrels/test.tsv", QRELS),
            ("scifact/qrels/train.tsv", "ignored"),
        ] {
            zip.start_file(name, stored).unwrap();
            zip.write_all(content.as_bytes()).unwrap();
        }
        zip.finish().unwrap();
        let Download::Url { payload, .. } = plan("beir/scifact").unwrap().remove(0) else {
            panic!("BEIR comes from a URL")
        };
        install(&zip_path, &payload, root.path()).unwrap();
        let corpus =
            std::fs::read_to_string(root.path().join("beir/scifact/corpus.jsonl")).unwrap();
        assert_eq!(corpus, CORPUS);
        // Files in place but not the published set: verification says so.
        let error = verify("beir/scifact", root.path()).unwrap_err().to_string();
        assert!(
            error.contains("1 evaluated queries, the published set has 300"),
            "{error}"
        );

        let tar_path = root.path().join("collectionandqueries.tar.gz");
        let write_tar = |members: &[(&str, &str)]| {
            let mut tar = tar::Builder::new(flate2::write::GzEncoder::new(
                std::fs::File::create(&tar_path).unwrap(),
                flate2::Compression::fast(),
            ));
            for (name, content) in members {
                let mut header = tar::Header::new_gnu();
                header.set_size(content.len() as u64);
                header.set_cksum();
                tar.append_data(&mut header, name, content.as_bytes())
                    .unwrap();
            }
            tar.into_inner().unwrap().finish().unwrap();
        };
        let mut members = vec![
            ("collection.tsv", "0\tpassage\n"),
            ("queries.dev.small.tsv", "1\tq\n"),
        ];
        write_tar(&members);
        let Download::Url { payload, .. } = plan("msmarco-dev").unwrap().remove(0) else {
            panic!("MS MARCO comes from a URL")
        };
        let error = install(&tar_path, &payload, root.path())
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("the archive has no `qrels.dev.small.tsv`"),
            "{error}"
        );
        // The archive's full dev queries are kept too: FLOPs are measured over them.
        members.extend([
            ("qrels.dev.small.tsv", "1\t0\t0\t1\n"),
            ("queries.dev.tsv", "1\tq\n2\tanother\n"),
            ("queries.train.tsv", "3\tnot kept\n"),
        ]);
        write_tar(&members);
        install(&tar_path, &payload, root.path()).unwrap();
        let dev = Dataset::resolve("msmarco-dev", root.path())
            .unwrap()
            .remove(0);
        assert_eq!(dev.read_flops_queries().unwrap().unwrap().1.len(), 2);
        assert!(!root.path().join("msmarco/queries.train.tsv").exists());
        assert!(root.path().join("msmarco/collection.tsv").is_file());
    }
}
