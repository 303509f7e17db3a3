//! Downloads against a small HTTP server on 127.0.0.1, started by each test, that misbehaves as
//! real ones do: it drops the connection mid-file, stalls, answers a `Range` request with the
//! whole file, labels a `.gz` with `Content-Encoding: gzip`, or serves other bytes than the
//! published ones. Each case ends with the published file under its final name or with a clear
//! error and nothing there.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use lsr_data::download::{Retry, download, partial_path};
use lsr_data::registry::Pinned;
use lsr_files::digest::Hashing;

/// A request as the server saw it: its path and headers (names in lower case).
#[derive(Clone, Debug)]
struct Request {
    path: String,
    headers: Vec<(String, String)>,
}

impl Request {
    fn header(&self, name: &str) -> Option<&str> {
        let found = self.headers.iter().find(|(n, _)| n == name);
        found.map(|(_, value)| value.as_str())
    }

    /// The first byte asked for by `Range: bytes=N-`.
    fn range_start(&self) -> Option<usize> {
        let range = self.header("range")?;
        range
            .strip_prefix("bytes=")?
            .strip_suffix('-')?
            .parse()
            .ok()
    }
}

/// What the server answers: status line, headers, body, and whether it stops after part of the
/// body, closing (`Drop`) or holding the connection silent (`Stall`).
struct Reply {
    status: &'static str,
    headers: Vec<(&'static str, String)>,
    body: Vec<u8>,
    cut: Option<(usize, Cut)>,
}

#[derive(Clone, Copy)]
enum Cut {
    Drop,
    Stall,
}

impl Reply {
    /// The whole body, or the rest from a `Range` request's first byte when `ranges`.
    fn serve(body: &[u8], request: &Request, ranges: bool) -> Self {
        match request.range_start().filter(|_| ranges) {
            Some(start) => Self {
                status: "206 Partial Content",
                headers: vec![(
                    "Content-Range",
                    format!("bytes {start}-{}/{}", body.len() - 1, body.len()),
                )],
                body: body[start..].to_vec(),
                cut: None,
            },
            None => Self {
                status: "200 OK",
                headers: vec![("Accept-Ranges", "bytes".into())],
                body: body.to_vec(),
                cut: None,
            },
        }
    }

    fn cut(mut self, at: usize, how: Cut) -> Self {
        self.cut = Some((at, how));
        self
    }
}

type Behaviour = dyn Fn(usize, &Request) -> Reply + Send + Sync;

/// A server on 127.0.0.1 answering each request (the n-th, counted from 0) as `behaviour` says,
/// one connection per request; it records every request.
struct Server {
    url: String,
    requests: Arc<Mutex<Vec<Request>>>,
}

impl Server {
    fn start(
        name: &str,
        behaviour: impl Fn(usize, &Request) -> Reply + Send + Sync + 'static,
    ) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/{name}", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let behaviour: Arc<Behaviour> = Arc::new(behaviour);
        let seen = requests.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let (seen, behaviour) = (seen.clone(), behaviour.clone());
                std::thread::spawn(move || answer(stream.unwrap(), &seen, &*behaviour));
            }
        });
        Self { url, requests }
    }

    fn requests(&self) -> Vec<Request> {
        self.requests.lock().unwrap().clone()
    }
}

fn answer(mut stream: TcpStream, seen: &Mutex<Vec<Request>>, behaviour: &Behaviour) {
    let mut lines = BufReader::new(stream.try_clone().unwrap()).lines();
    let request_line = lines.next().unwrap().unwrap();
    let path = request_line.split(' ').nth(1).unwrap().to_string();
    let mut headers = Vec::new();
    for line in lines {
        let line = line.unwrap();
        if line.is_empty() {
            break;
        }
        let (name, value) = line.split_once(':').unwrap();
        headers.push((name.trim().to_lowercase(), value.trim().to_string()));
    }
    let request = Request { path, headers };
    let reply = {
        let mut seen = seen.lock().unwrap();
        seen.push(request.clone());
        behaviour(seen.len() - 1, &request)
    };
    let mut head = format!(
        "HTTP/1.1 {}\r\nContent-Length: {}\r\nConnection: close\r\n",
        reply.status,
        reply.body.len()
    );
    for (name, value) in &reply.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    let sent = reply.cut.map_or(reply.body.len(), |(at, _)| at);
    // The peer may have hung up already (a timed-out stall): nothing more to do then.
    let _ = stream
        .write_all(head.as_bytes())
        .and_then(|()| stream.write_all(&reply.body[..sent]))
        .and_then(|()| stream.flush());
    if let Some((_, Cut::Stall)) = reply.cut {
        std::thread::sleep(Duration::from_secs(5));
    }
    let _ = stream.shutdown(std::net::Shutdown::Both);
}

/// A published file: its bytes and their pin.
fn published(bytes: Vec<u8>) -> (Vec<u8>, Pinned) {
    let mut hashing = Hashing::new(std::io::sink());
    hashing.write_all(&bytes).unwrap();
    let digests = hashing.finish().1;
    let pinned = Pinned {
        md5: digests.md5,
        size: Some(digests.file.size),
    };
    (bytes, pinned)
}

/// 300 kB that no prefix or shift of reproduces.
fn content() -> Vec<u8> {
    let mut state = 0x9e3779b97f4a7c15u64;
    (0..300_000)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect()
}

fn quick() -> Retry {
    Retry {
        attempts: 3,
        first_delay: Duration::from_millis(10),
        read_timeout: Duration::from_millis(500),
    }
}

fn destination(dir: &Path, name: &str) -> PathBuf {
    dir.join(".downloads").join(name)
}

#[test]
fn a_dropped_connection_is_resumed_from_where_it_stopped() {
    let (body, pinned) = published(content());
    let served = body.clone();
    let server = Server::start("collection.tar.gz", move |n, request| {
        let reply = Reply::serve(&served, request, true);
        if n == 0 {
            reply.cut(100_000, Cut::Drop)
        } else {
            reply
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let dest = destination(dir.path(), "collection.tar.gz");
    let got = download(&server.url, &pinned, &dest, &quick()).unwrap();
    assert_eq!(got.md5, pinned.md5);
    assert_eq!(std::fs::read(&dest).unwrap(), body);
    assert!(!partial_path(&dest).exists());
    let requests = server.requests();
    assert_eq!(requests.len(), 2, "{requests:?}");
    assert_eq!(requests[0].range_start(), None);
    assert_eq!(requests[1].range_start(), Some(100_000), "{requests:?}");
    for request in &requests {
        assert_eq!(request.path, "/collection.tar.gz");
        assert_eq!(request.header("accept-encoding"), Some("identity"));
        assert_eq!(request.header("x-ms-version"), Some("2019-12-12"));
    }
}

#[test]
fn a_stalled_connection_times_out_and_is_resumed() {
    let (body, pinned) = published(content());
    let served = body.clone();
    let server = Server::start("triples.tsv", move |n, request| {
        let reply = Reply::serve(&served, request, true);
        if n == 0 {
            reply.cut(50_000, Cut::Stall)
        } else {
            reply
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let dest = destination(dir.path(), "triples.tsv");
    download(&server.url, &pinned, &dest, &quick()).unwrap();
    assert_eq!(std::fs::read(&dest).unwrap(), body);
    assert_eq!(server.requests()[1].range_start(), Some(50_000));
}

#[test]
fn a_server_that_refuses_ranges_sends_the_file_again_and_it_replaces_the_partial_one() {
    let (body, pinned) = published(content());
    let served = body.clone();
    let server = Server::start("scifact.zip", move |n, request| {
        let reply = Reply::serve(&served, request, false);
        if n == 0 {
            reply.cut(120_000, Cut::Drop)
        } else {
            reply
        }
    });
    let dir = tempfile::tempdir().unwrap();
    let dest = destination(dir.path(), "scifact.zip");
    download(&server.url, &pinned, &dest, &quick()).unwrap();
    assert_eq!(
        std::fs::read(&dest).unwrap(),
        body,
        "not appended to the partial file"
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[1].range_start(), Some(120_000));
}

#[test]
fn a_partial_file_left_by_a_killed_fetch_is_resumed() {
    let (body, pinned) = published(content());
    let served = body.clone();
    let server = Server::start("qrels.tsv", move |_, request| {
        Reply::serve(&served, request, true)
    });
    let dir = tempfile::tempdir().unwrap();
    let dest = destination(dir.path(), "qrels.tsv");
    std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
    std::fs::write(partial_path(&dest), &body[..77_777]).unwrap();
    download(&server.url, &pinned, &dest, &quick()).unwrap();
    assert_eq!(std::fs::read(&dest).unwrap(), body);
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].range_start(), Some(77_777));
}

#[test]
fn a_gz_labelled_content_encoding_gzip_is_kept_as_the_stored_bytes() {
    let mut gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gzip.write_all(&content()).unwrap();
    let (body, pinned) = published(gzip.finish().unwrap());
    let served = body.clone();
    let server = Server::start("queries.tsv.gz", move |_, request| {
        let mut reply = Reply::serve(&served, request, true);
        reply.headers.push(("Content-Encoding", "gzip".into()));
        reply
    });
    let dir = tempfile::tempdir().unwrap();
    let dest = destination(dir.path(), "queries.tsv.gz");
    let got = download(&server.url, &pinned, &dest, &quick()).unwrap();
    assert_eq!(got.md5, pinned.md5);
    assert_eq!(
        std::fs::read(&dest).unwrap(),
        body,
        "the .gz as stored, not decoded"
    );
}

#[test]
fn a_partial_file_that_fails_its_checksum_is_fetched_again_from_zero() {
    let (body, pinned) = published(content());
    let served = body.clone();
    let server = Server::start("corpus.jsonl", move |_, request| {
        Reply::serve(&served, request, true)
    });
    let dir = tempfile::tempdir().unwrap();
    let dest = destination(dir.path(), "corpus.jsonl");
    std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
    // A partial file of another version of the file: its rest completes it to the wrong bytes.
    std::fs::write(partial_path(&dest), vec![7u8; 1000]).unwrap();
    download(&server.url, &pinned, &dest, &quick()).unwrap();
    assert_eq!(std::fs::read(&dest).unwrap(), body);
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].range_start(), Some(1000));
    assert_eq!(requests[1].range_start(), None);
}

#[test]
fn a_server_serving_other_bytes_ends_in_a_clear_error_and_no_file() {
    let (_, pinned) = published(content());
    let mut other = content();
    other[123] ^= 1;
    let server = Server::start("collection.tsv", move |_, request| {
        Reply::serve(&other, request, true)
    });
    let dir = tempfile::tempdir().unwrap();
    let dest = destination(dir.path(), "collection.tsv");
    let error = download(&server.url, &pinned, &dest, &quick())
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("the second time downloaded whole from zero")
            && error.contains(&format!("expected md5 {}", pinned.md5))
            && error.contains("collection.tsv"),
        "{error}"
    );
    assert!(!dest.exists() && !partial_path(&dest).exists());
    assert_eq!(server.requests().len(), 2);
}

#[test]
fn a_server_that_keeps_failing_is_given_up_on_keeping_the_bytes_received() {
    let (body, pinned) = published(content());
    let server = Server::start("fever.zip", move |n, request| match n {
        0 => Reply::serve(&body, request, true).cut(10_000, Cut::Drop),
        _ => Reply {
            status: "503 Service Unavailable",
            headers: Vec::new(),
            body: Vec::new(),
            cut: None,
        },
    });
    let dir = tempfile::tempdir().unwrap();
    let dest = destination(dir.path(), "fever.zip");
    let error = download(&server.url, &pinned, &dest, &quick())
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("503") && error.contains("gave up after 3 attempts"),
        "{error}"
    );
    assert!(
        error.contains("the 10000 bytes received are kept"),
        "{error}"
    );
    assert!(!dest.exists());
    assert_eq!(
        std::fs::metadata(partial_path(&dest)).unwrap().len(),
        10_000
    );
    // Bytes arrived in the first attempt, so three more without any came before giving up.
    assert_eq!(server.requests().len(), 4);
}

#[test]
fn a_missing_file_is_an_error_at_once() {
    let server = Server::start("gone.tsv", |_, _| Reply {
        status: "404 Not Found",
        headers: Vec::new(),
        body: Vec::new(),
        cut: None,
    });
    let (_, pinned) = published(content());
    let dir = tempfile::tempdir().unwrap();
    let dest = destination(dir.path(), "gone.tsv");
    let error = download(&server.url, &pinned, &dest, &quick())
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("404") && error.contains("gone.tsv"),
        "{error}"
    );
    assert_eq!(server.requests().len(), 1);
    assert!(!dest.exists());
}
