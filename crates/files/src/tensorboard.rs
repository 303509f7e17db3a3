//! TensorBoard event files: what a run logs as it trains, in the format `tensorboard --logdir`
//! reads, and read back. A file is a sequence of records (little-endian u64 length, masked
//! CRC32C of the length, the bytes, masked CRC32C of the bytes), each an `Event` message of
//! TensorBoard's published protos, declared here with their field numbers
//! (`tensorboard/compat/proto/{event,summary,tensor,tensor_shape}.proto` at
//! tensorflow/tensorboard@70b76c922822dcccc3e8d7e5dd89860948690357).
//!
//! Event files are append-only: each process that logs a run starts a file of its own (named to
//! sort after the run's earlier files, which is the order TensorBoard reads them in) and appends
//! a record per logged step, so a kill costs at most the record being written. A process that
//! resumes a run after step `s` first rewrites (atomically) any earlier file that holds events
//! of later steps without them, as `train.csv` is cut on resume: each step is then in the run
//! once however often it was killed. Its new file also opens with `SessionLog.START` at step
//! `s + 1`, on which a TensorBoard that had already read the discarded steps drops them too.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use prost::Message;

use crate::{FileError, Result};

/// What every event file's name holds; TensorBoard reads the files whose names contain it.
const MARKER: &str = "tfevents";
/// The first event of a file: the format version, whose readers purge on `SessionLog.START`.
const FILE_VERSION: &str = "brain.Event:2";

mod proto {
    //! TensorBoard's messages, the fields lsr writes or reads (numbers as in the protos).

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Event {
        #[prost(double, tag = "1")]
        pub wall_time: f64,
        #[prost(int64, tag = "2")]
        pub step: i64,
        #[prost(oneof = "What", tags = "3, 5, 7")]
        pub what: Option<What>,
    }

    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum What {
        #[prost(string, tag = "3")]
        FileVersion(String),
        #[prost(message, tag = "5")]
        Summary(Summary),
        #[prost(message, tag = "7")]
        SessionLog(SessionLog),
    }

    /// `SessionLog.SessionStatus.START`.
    pub const START: i32 = 1;

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct SessionLog {
        #[prost(int32, tag = "1")]
        pub status: i32,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Summary {
        #[prost(message, repeated, tag = "1")]
        pub value: Vec<Value>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Value {
        #[prost(string, tag = "1")]
        pub tag: String,
        #[prost(message, optional, tag = "9")]
        pub metadata: Option<SummaryMetadata>,
        #[prost(oneof = "Payload", tags = "2, 8")]
        pub payload: Option<Payload>,
    }

    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Payload {
        #[prost(float, tag = "2")]
        SimpleValue(f32),
        #[prost(message, tag = "8")]
        Tensor(TensorProto),
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct SummaryMetadata {
        #[prost(message, optional, tag = "1")]
        pub plugin_data: Option<PluginData>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct PluginData {
        #[prost(string, tag = "1")]
        pub plugin_name: String,
        #[prost(bytes = "vec", tag = "2")]
        pub content: Vec<u8>,
    }

    /// `DataType.DT_STRING`.
    pub const DT_STRING: i32 = 7;

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct TensorProto {
        #[prost(int32, tag = "1")]
        pub dtype: i32,
        /// A scalar's shape: no dimension.
        #[prost(message, optional, tag = "2")]
        pub tensor_shape: Option<TensorShapeProto>,
        #[prost(bytes = "vec", repeated, tag = "8")]
        pub string_val: Vec<Vec<u8>>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub struct TensorShapeProto {}
}

/// The text plugin's name: a string tensor under it is shown as Markdown.
const TEXT_PLUGIN: &str = "text";

/// One logged value, as read back.
#[derive(Clone, Debug, PartialEq)]
pub enum Logged {
    Scalar(f32),
    Text(String),
}

/// One event of a file, as read back.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    pub wall_time: f64,
    pub step: i64,
    pub what: What,
}

#[derive(Clone, Debug, PartialEq)]
pub enum What {
    FileVersion(String),
    /// `SessionLog.START`: a process (re)started the run at this step.
    Start,
    /// A summary: values by tag.
    Values(Vec<(String, Logged)>),
    /// Anything else TensorBoard writes (graphs, run metadata), not read here.
    Other,
}

/// A run's logged values by tag, over all its files in the order TensorBoard reads them, each
/// with its step, as written (no step dropped or merged).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunLog {
    pub scalars: BTreeMap<String, Vec<(i64, f32)>>,
    pub texts: BTreeMap<String, Vec<(i64, String)>>,
    /// The steps of the `SessionLog.START` events, in order.
    pub starts: Vec<i64>,
}

/// The event files of the run in `dir`, in the order TensorBoard reads them (by name).
pub fn event_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(FileError::io(dir, e)),
    };
    let mut files = Vec::new();
    for entry in entries {
        let path = entry.map_err(|e| FileError::io(dir, e))?.path();
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        // Skips an atomic rewrite's temporary file, which is hidden.
        if name.contains(MARKER) && !name.starts_with('.') && path.is_file() {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

/// Every value logged in the run in `dir`.
pub fn read_run(dir: &Path) -> Result<RunLog> {
    let mut run = RunLog::default();
    for file in event_files(dir)? {
        for event in read_file(&file)? {
            match event.what {
                What::Start => run.starts.push(event.step),
                What::Values(values) => {
                    for (tag, value) in values {
                        match value {
                            Logged::Scalar(x) => {
                                run.scalars.entry(tag).or_default().push((event.step, x))
                            }
                            Logged::Text(text) => {
                                run.texts.entry(tag).or_default().push((event.step, text))
                            }
                        }
                    }
                }
                What::FileVersion(_) | What::Other => {}
            }
        }
    }
    Ok(run)
}

/// The events of one file. A last record cut short (a kill mid-write) ends the file, as it
/// does for TensorBoard; a record whose checksum fails is an error naming its offset.
pub fn read_file(path: &Path) -> Result<Vec<Event>> {
    let (records, _) = records(path)?;
    records
        .into_iter()
        .map(|(offset, data)| {
            let event = proto::Event::decode(data.as_slice()).map_err(|e| FileError::Parse {
                path: path.to_path_buf(),
                message: format!("record at byte {offset}: not an Event: {e}"),
            })?;
            Ok(Event::from(event))
        })
        .collect()
}

impl From<proto::Event> for Event {
    fn from(event: proto::Event) -> Self {
        let what = match event.what {
            Some(proto::What::FileVersion(version)) => What::FileVersion(version),
            Some(proto::What::SessionLog(log)) if log.status == proto::START => What::Start,
            Some(proto::What::Summary(summary)) => {
                What::Values(summary.value.into_iter().filter_map(logged).collect())
            }
            _ => What::Other,
        };
        Self {
            wall_time: event.wall_time,
            step: event.step,
            what,
        }
    }
}

/// A summary value lsr writes (a scalar, or a text), by tag.
fn logged(value: proto::Value) -> Option<(String, Logged)> {
    let logged = match value.payload? {
        proto::Payload::SimpleValue(x) => Logged::Scalar(x),
        proto::Payload::Tensor(tensor) => {
            let text = tensor.string_val.into_iter().next()?;
            Logged::Text(String::from_utf8_lossy(&text).into_owned())
        }
    };
    Some((value.tag, logged))
}

/// A record's byte offset in its file, and its data.
type Record = (u64, Vec<u8>);

/// The records of the file at `path`, and whether a cut-short record ended it.
fn records(path: &Path) -> Result<(Vec<Record>, bool)> {
    let bytes = std::fs::read(path).map_err(|e| FileError::io(path, e))?;
    let bad = |offset: usize, what: &str| FileError::Parse {
        path: path.to_path_buf(),
        message: format!("record at byte {offset}: {what}"),
    };
    let mut records = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let Some(header) = bytes.get(at..at + 12) else {
            return Ok((records, true));
        };
        let (length, length_crc) = header.split_at(8);
        if masked_crc(length) != u32::from_le_bytes(length_crc.try_into().expect("4 bytes")) {
            return Err(bad(at, "the length's checksum fails"));
        }
        let length = u64::from_le_bytes(length.try_into().expect("8 bytes"));
        let Some(data) = usize::try_from(length)
            .ok()
            .and_then(|length| bytes.get(at + 12..at + 12 + length + 4))
        else {
            return Ok((records, true));
        };
        let (data, data_crc) = data.split_at(data.len() - 4);
        if masked_crc(data) != u32::from_le_bytes(data_crc.try_into().expect("4 bytes")) {
            return Err(bad(at, "the data's checksum fails"));
        }
        records.push((at as u64, data.to_vec()));
        at += 12 + data.len() + 4;
    }
    Ok((records, false))
}

/// TFRecord's masked CRC32C: a CRC stored in the data it covers must not look like one.
fn masked_crc(bytes: &[u8]) -> u32 {
    let crc = crc32c::crc32c(bytes);
    crc.rotate_right(15).wrapping_add(0xa282_ead8)
}

/// `data` framed as a record.
fn frame(data: &[u8]) -> Vec<u8> {
    let length = (data.len() as u64).to_le_bytes();
    let mut record = Vec::with_capacity(data.len() + 16);
    record.extend_from_slice(&length);
    record.extend_from_slice(&masked_crc(&length).to_le_bytes());
    record.extend_from_slice(data);
    record.extend_from_slice(&masked_crc(data).to_le_bytes());
    record
}

/// The event file a process appends its steps to.
pub struct EventWriter {
    path: PathBuf,
    file: File,
    /// The tags the run's files held before this process, each value at a step kept.
    earlier: BTreeSet<String>,
}

impl EventWriter {
    /// Starts this process's file of the run in `dir` (created if needed), which will log the
    /// steps after `resumed_after` (0 for a new run). Earlier files are rewritten without their
    /// events of later steps, and the new file says that the run restarts there.
    pub fn open(dir: &Path, resumed_after: i64) -> Result<Self> {
        std::fs::create_dir_all(dir).map_err(|e| FileError::io(dir, e))?;
        let earlier_files = event_files(dir)?;
        let mut earlier = BTreeSet::new();
        for file in &earlier_files {
            earlier.extend(cut_after(file, resumed_after)?);
        }
        let path = dir.join(new_file_name(&earlier_files));
        let file = std::fs::OpenOptions::new()
            .create_new(true)
            .append(true)
            .open(&path)
            .map_err(|e| FileError::io(&path, e))?;
        let mut writer = Self {
            path,
            file,
            earlier,
        };
        writer.write(0, proto::What::FileVersion(FILE_VERSION.into()))?;
        if !earlier_files.is_empty() {
            let start = proto::SessionLog {
                status: proto::START,
            };
            writer.write(resumed_after + 1, proto::What::SessionLog(start))?;
        }
        Ok(writer)
    }

    /// Whether the run's earlier files already hold a value of `tag` (at a step kept).
    pub fn logged_before(&self, tag: &str) -> bool {
        self.earlier.contains(tag)
    }

    /// The scalars of `step`, one event.
    pub fn scalars(&mut self, step: i64, values: &[(&str, f64)]) -> Result<()> {
        let value = values
            .iter()
            .map(|&(tag, x)| proto::Value {
                tag: tag.into(),
                metadata: None,
                // TensorBoard's scalars are f32 (`simple_value`).
                payload: Some(proto::Payload::SimpleValue(x as f32)),
            })
            .collect();
        self.write(step, proto::What::Summary(proto::Summary { value }))
    }

    /// `markdown` under `tag` at `step`, shown by TensorBoard's text tab.
    pub fn text(&mut self, step: i64, tag: &str, markdown: &str) -> Result<()> {
        let value = proto::Value {
            tag: tag.into(),
            metadata: Some(proto::SummaryMetadata {
                plugin_data: Some(proto::PluginData {
                    plugin_name: TEXT_PLUGIN.into(),
                    content: Vec::new(),
                }),
            }),
            payload: Some(proto::Payload::Tensor(proto::TensorProto {
                dtype: proto::DT_STRING,
                tensor_shape: Some(proto::TensorShapeProto {}),
                string_val: vec![markdown.as_bytes().to_vec()],
            })),
        };
        let summary = proto::Summary { value: vec![value] };
        self.write(step, proto::What::Summary(summary))
    }

    /// Appends one event in one write, so that a kill leaves at most that record cut short.
    fn write(&mut self, step: i64, what: proto::What) -> Result<()> {
        let wall_time = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |t| t.as_secs_f64());
        let event = proto::Event {
            wall_time,
            step,
            what: Some(what),
        };
        self.file
            .write_all(&frame(&event.encode_to_vec()))
            .map_err(|e| FileError::io(&self.path, e))
    }
}

/// Rewrites `file` without its events after step `last` (and without a record cut short) if it
/// has any; returns the tags of the values it keeps.
fn cut_after(file: &Path, last: i64) -> Result<BTreeSet<String>> {
    let (records, cut_short) = records(file)?;
    let mut kept = Vec::new();
    let mut tags = BTreeSet::new();
    for (_, data) in &records {
        let event =
            Event::from(
                proto::Event::decode(data.as_slice()).map_err(|e| FileError::Parse {
                    path: file.to_path_buf(),
                    message: format!("not an Event: {e}"),
                })?,
            );
        if event.step > last {
            continue;
        }
        if let What::Values(values) = &event.what {
            tags.extend(values.iter().map(|(tag, _)| tag.clone()));
        }
        kept.extend(frame(data));
    }
    if cut_short || kept.len() < records.iter().map(|(_, d)| d.len() + 16).sum() {
        crate::write_bytes(file, &kept)?;
    }
    Ok(tags)
}

/// `events.out.tfevents.<seconds>.lsr.<pid>`, TensorBoard's pattern, with the seconds made to
/// sort after every earlier file of the run (a process may start within the second of the one
/// before it).
fn new_file_name(earlier: &[PathBuf]) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |t| t.as_secs());
    let newest = earlier
        .iter()
        .filter_map(|path| {
            let name = path.file_name()?.to_str()?;
            let rest = name.split_once(MARKER)?.1.strip_prefix('.')?;
            rest.split('.').next()?.parse::<u64>().ok()
        })
        .max();
    let seconds = newest.map_or(now, |newest| now.max(newest + 1));
    format!(
        "events.out.{MARKER}.{seconds:010}.lsr.{}",
        std::process::id()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn steps(run: &RunLog, tag: &str) -> Vec<i64> {
        run.scalars[tag].iter().map(|&(step, _)| step).collect()
    }

    /// Logs `steps` of a run in `dir` in one process that resumes after `after`.
    fn log_steps(dir: &Path, after: i64, steps: std::ops::RangeInclusive<i64>) -> EventWriter {
        let mut writer = EventWriter::open(dir, after).unwrap();
        if !writer.logged_before("settings") {
            writer.text(0, "settings", "```toml\nk = 16\n```").unwrap();
        }
        for step in steps {
            let mut values = vec![("train/loss", 1.0 / step as f64)];
            if step % 5 == 0 {
                values.push(("validation/ndcg@10", step as f64 / 100.0));
            }
            writer.scalars(step, &values).unwrap();
        }
        writer
    }

    #[test]
    fn scalars_and_text_read_back_as_written() {
        let dir = tempfile::tempdir().unwrap();
        drop(log_steps(dir.path(), 0, 1..=10));
        let files = event_files(dir.path()).unwrap();
        assert_eq!(files.len(), 1);
        let events = read_file(&files[0]).unwrap();
        assert_eq!(events[0].what, What::FileVersion(FILE_VERSION.into()));
        let run = read_run(dir.path()).unwrap();
        assert_eq!(steps(&run, "train/loss"), (1..=10).collect::<Vec<_>>());
        assert_eq!(run.scalars["train/loss"][3], (4, 0.25));
        assert_eq!(
            run.scalars["validation/ndcg@10"],
            [(5, 0.05f64 as f32), (10, 0.1f64 as f32)]
        );
        assert_eq!(run.texts["settings"], [(0, "```toml\nk = 16\n```".into())]);
        assert!(run.starts.is_empty(), "a new run is no restart");
    }

    /// Killed after logging step 12 (the last record cut short) with a checkpoint at step 10,
    /// then resumed there: each step is in the run once, the settings too, and the new file
    /// says where the run restarted.
    #[test]
    fn a_resumed_run_holds_each_step_once() {
        let dir = tempfile::tempdir().unwrap();
        drop(log_steps(dir.path(), 0, 1..=12));
        let first = event_files(dir.path()).unwrap().remove(0);
        let length = std::fs::metadata(&first).unwrap().len();
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(&first)
            .unwrap();
        file.set_len(length - 3).unwrap();
        drop(log_steps(dir.path(), 10, 11..=20));
        drop(log_steps(dir.path(), 20, 21..=25));

        let files = event_files(dir.path()).unwrap();
        assert_eq!(files.len(), 3, "{files:?}");
        assert_eq!(files[0], first, "the new files sort after the first");
        let run = read_run(dir.path()).unwrap();
        assert_eq!(steps(&run, "train/loss"), (1..=25).collect::<Vec<_>>());
        assert_eq!(steps(&run, "validation/ndcg@10"), [5, 10, 15, 20, 25]);
        assert_eq!(run.texts["settings"].len(), 1);
        assert_eq!(run.starts, [11, 21]);
        let first_steps: Vec<i64> = read_file(&first).unwrap().iter().map(|e| e.step).collect();
        assert_eq!(
            first_steps.last(),
            Some(&10),
            "steps 11 and 12 dropped: {first_steps:?}"
        );
    }

    #[test]
    fn a_record_cut_short_ends_the_file_and_a_changed_byte_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        drop(log_steps(dir.path(), 0, 1..=3));
        let file = event_files(dir.path()).unwrap().remove(0);
        let mut bytes = std::fs::read(&file).unwrap();
        std::fs::write(&file, &bytes[..bytes.len() - 1]).unwrap();
        let run = read_run(dir.path()).unwrap();
        assert_eq!(steps(&run, "train/loss"), [1, 2]);
        let last = bytes.len() - 5;
        bytes[last] ^= 1;
        std::fs::write(&file, &bytes).unwrap();
        let error = read_run(dir.path()).unwrap_err().to_string();
        assert!(
            error.contains(&file.display().to_string()) && error.contains("checksum fails"),
            "{error}"
        );
    }
}
