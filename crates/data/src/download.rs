//! Downloads that survive the network. A file is fetched into `<name>.partial` beside its final
//! name and renamed there only once its published md5 matches: the checksum is the judge, the
//! published size only a hint (for the progress bar, and to tell a finished partial file from an
//! unfinished one). A dropped connection, a stalled one or a killed process costs only what was
//! not yet on disk: the next attempt asks for the rest with `Range` and appends it, unless the
//! server answers with the whole file, which then replaces the partial one. Attempts back off
//! exponentially and the count restarts whenever one brings bytes. The bytes are always the
//! stored ones: the request asks for `Accept-Encoding: identity` and nothing is decoded, even
//! under a `Content-Encoding: gzip` label (which some servers put on a stored `.gz`). A complete
//! partial file whose checksum fails is removed and the file fetched once more from zero; a
//! second failure is an error naming both digests.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use reqwest::StatusCode;
use reqwest::blocking::{Client, Response};
use reqwest::header::{ACCEPT_ENCODING, CONTENT_RANGE, RANGE};

use crate::error::{DataError, Result};
use crate::installed;
use crate::registry::Pinned;
use lsr_files::digest::Digests;

/// Azure blob storage, which serves MS MARCO, answers `Range` requests with the range only
/// when a request names a service version that has them (as ir_datasets sends for MS MARCO's
/// large files, and MS MARCO's maintainers advise for `wget`); other servers ignore the header.
const AZURE_VERSION: (&str, &str) = ("x-ms-version", "2019-12-12");

/// The longest wait between two attempts.
const MAX_DELAY: Duration = Duration::from_secs(60);

/// How hard a download tries before it gives up.
#[derive(Clone, Debug)]
pub struct Retry {
    /// Consecutive attempts that bring no byte before the download fails.
    pub attempts: u32,
    /// The wait after an attempt that brought bytes, or the first that brought none; doubled
    /// after each further one without (up to a minute).
    pub first_delay: Duration,
    /// A connection silent for this long is dropped and the download resumed.
    pub read_timeout: Duration,
}

impl Default for Retry {
    fn default() -> Self {
        Self {
            attempts: 8,
            first_delay: Duration::from_secs(2),
            read_timeout: Duration::from_secs(60),
        }
    }
}

/// Fetches `url` to `dest` unless a verified copy is there; returns its digests. Nothing that
/// fails its md5 is ever left at `dest`.
pub fn download(url: &str, pinned: &Pinned, dest: &Path, retry: &Retry) -> Result<Digests> {
    if dest.is_file() {
        // A verified download left by a run that stopped before installing it.
        let digests = Digests::of(dest)?;
        if installed::check(url, Some(pinned), dest, &digests).is_ok() {
            return Ok(digests);
        }
        std::fs::remove_file(dest).map_err(|e| DataError::io(dest, e))?;
    }
    if let Some(parent) = dest.parent() {
        std::fs::create_dir_all(parent).map_err(|e| DataError::io(parent, e))?;
    }
    let partial = partial_path(dest);
    let client = client(retry)?;
    let mut last_try = false;
    loop {
        fetch(&client, url, pinned, &partial, retry)?;
        let digests = Digests::of(&partial)?;
        let checked = installed::check(url, Some(pinned), &partial, &digests);
        if checked.is_ok() {
            std::fs::rename(&partial, dest).map_err(|e| DataError::io(dest, e))?;
            return Ok(digests);
        }
        std::fs::remove_file(&partial).map_err(|e| DataError::io(&partial, e))?;
        if last_try {
            return Err(DataError::File {
                path: dest.to_path_buf(),
                message: format!(
                    "refused twice, the second time downloaded whole from zero: {}",
                    checked.unwrap_err()
                ),
            });
        }
        tracing::warn!(
            "{}; removed, downloading it again from zero",
            checked.unwrap_err()
        );
        last_try = true;
    }
}

/// Where the bytes of `dest` gather until they are verified.
pub fn partial_path(dest: &Path) -> PathBuf {
    let mut name = dest.file_name().unwrap_or_default().to_os_string();
    name.push(".partial");
    dest.with_file_name(name)
}

fn client(retry: &Retry) -> Result<Client> {
    // Without reqwest's compression features nothing is decoded; the calls say so where a
    // feature turned on elsewhere in a build would otherwise change it.
    Client::builder()
        .no_gzip()
        .no_brotli()
        .no_deflate()
        .no_zstd()
        .connect_timeout(retry.read_timeout)
        .timeout(retry.read_timeout)
        .build()
        .map_err(|e| DataError::Invalid(format!("cannot start an HTTP client: {e}")))
}

/// What one attempt came to.
enum Attempt {
    /// The server sent everything it has.
    Complete,
    /// It stopped early (a dropped or stalled connection, a server error); `progress` says
    /// whether any byte arrived.
    Interrupted { why: String, progress: bool },
}

/// Brings `partial` to the whole file, as far as the server and the size hint can tell.
fn fetch(client: &Client, url: &str, pinned: &Pinned, partial: &Path, retry: &Retry) -> Result<()> {
    let bar = progress_bar(url, pinned.size);
    let mut failures = 0;
    loop {
        let mut have = length(partial)?;
        if pinned.size.is_some_and(|size| have > size) {
            // Longer than the published file: not a prefix of it.
            truncate(partial)?;
            have = 0;
        }
        if have > 0 && pinned.size == Some(have) {
            bar.finish_and_clear();
            return Ok(());
        }
        bar.set_position(have);
        bar.reset_eta();
        match attempt(client, url, partial, have, &bar)? {
            Attempt::Complete => {
                bar.finish_and_clear();
                return Ok(());
            }
            Attempt::Interrupted { why, progress } => {
                failures = if progress { 0 } else { failures + 1 };
                if failures >= retry.attempts {
                    bar.finish_and_clear();
                    return Err(DataError::File {
                        path: partial.to_path_buf(),
                        message: format!(
                            "{url}: {why}; gave up after {failures} attempts without a byte \
                             (the {} bytes received are kept: run the fetch again to resume)",
                            length(partial)?
                        ),
                    });
                }
                let doubled = 2u32.saturating_pow(failures.saturating_sub(1));
                let delay = (retry.first_delay.saturating_mul(doubled)).min(MAX_DELAY);
                bar.suspend(|| {
                    tracing::warn!("{url}: {why}; resuming in {delay:?}");
                });
                std::thread::sleep(delay);
            }
        }
    }
}

/// One request for the bytes after the first `have`, appended to `partial`.
fn attempt(
    client: &Client,
    url: &str,
    partial: &Path,
    have: u64,
    bar: &indicatif::ProgressBar,
) -> Result<Attempt> {
    let interrupted = |why: String| Attempt::Interrupted {
        why,
        progress: false,
    };
    let mut request = client
        .get(url)
        .header(ACCEPT_ENCODING, "identity")
        .header(AZURE_VERSION.0, AZURE_VERSION.1);
    if have > 0 {
        request = request.header(RANGE, format!("bytes={have}-"));
    }
    let response = match request.send() {
        Ok(response) => response,
        Err(e) => return Ok(interrupted(error_chain(&e))),
    };
    let status = response.status();
    let mut file = match status {
        StatusCode::PARTIAL_CONTENT if have > 0 && range_start(&response) == Some(have) => {
            OpenOptions::new()
                .append(true)
                .open(partial)
                .map_err(|e| DataError::io(partial, e))?
        }
        StatusCode::OK => {
            if have > 0 {
                bar.suspend(|| {
                    tracing::info!(
                        "{url}: the server sends the whole file, not the rest; starting over"
                    )
                });
                bar.set_position(0);
            }
            File::create(partial).map_err(|e| DataError::io(partial, e))?
        }
        StatusCode::PARTIAL_CONTENT => {
            truncate(partial)?;
            return Ok(interrupted(format!(
                "asked for the bytes from {have} on, got {:?}; starting over",
                response.headers().get(CONTENT_RANGE)
            )));
        }
        // Nothing after the first `have` bytes: the file may be all there; the checksum says.
        StatusCode::RANGE_NOT_SATISFIABLE if have > 0 => return Ok(Attempt::Complete),
        status if status.is_server_error() || status == StatusCode::TOO_MANY_REQUESTS => {
            return Ok(interrupted(format!("the server answered {status}")));
        }
        status => {
            return Err(DataError::File {
                path: partial.to_path_buf(),
                message: format!("{url} answered {status}"),
            });
        }
    };
    if let Some(length) = response.content_length() {
        bar.set_length(bar.position() + length);
    }
    copy(response, &mut file, partial, bar)
}

/// Appends the body to `file` as it arrives; an error of the connection interrupts the attempt,
/// one of the disk fails the download.
fn copy(
    mut response: Response,
    file: &mut File,
    partial: &Path,
    bar: &indicatif::ProgressBar,
) -> Result<Attempt> {
    let expected = response.content_length();
    let mut received = 0u64;
    let mut buffer = vec![0u8; 1 << 16];
    let why = loop {
        match response.read(&mut buffer) {
            Ok(0) => break None,
            Ok(n) => {
                file.write_all(&buffer[..n])
                    .map_err(|e| DataError::io(partial, e))?;
                received += n as u64;
                bar.inc(n as u64);
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => break Some(e.to_string()),
        }
    };
    file.sync_data().map_err(|e| DataError::io(partial, e))?;
    let short = expected.is_some_and(|expected| received < expected);
    Ok(match (why, short) {
        (None, false) => Attempt::Complete,
        (why, _) => Attempt::Interrupted {
            why: why.unwrap_or_else(|| "the connection closed early".into()),
            progress: received > 0,
        },
    })
}

/// The first byte of a `206` response's `Content-Range: bytes START-END/TOTAL`.
fn range_start(response: &Response) -> Option<u64> {
    let range = response.headers().get(CONTENT_RANGE)?.to_str().ok()?;
    let (start, _) = range.strip_prefix("bytes ")?.split_once('-')?;
    start.trim().parse().ok()
}

fn length(path: &Path) -> Result<u64> {
    match std::fs::metadata(path) {
        Ok(metadata) => Ok(metadata.len()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
        Err(e) => Err(DataError::io(path, e)),
    }
}

fn truncate(path: &Path) -> Result<()> {
    File::create(path)
        .map(drop)
        .map_err(|e| DataError::io(path, e))
}

/// The error and its causes, which reqwest keeps apart ("error sending request" alone says
/// nothing of a refused connection).
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// Bytes, rate and ETA on a terminal; nothing elsewhere (a log gets the warnings alone).
fn progress_bar(url: &str, size: Option<u64>) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(size.unwrap_or(0));
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{msg} {bar:30} {bytes}/{total_bytes} {bytes_per_sec}, ETA {eta}",
        )
        .expect("a valid template"),
    );
    bar.set_message(url.rsplit('/').next().unwrap_or(url).to_string());
    bar
}
