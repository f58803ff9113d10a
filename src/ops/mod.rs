//! Operations behind the command line, one library function per subcommand
//! where the store modules do not already offer exactly one: opening a store
//! from its newest snapshot, snapshot, import, replay to a point, the raw
//! event dump (and its follow mode), verify (checksums plus event decoding),
//! audit with heartbeat runs collapsed, stats, and the demo.
//!
//! A store directory holds `log/` (the log engine's segments), `snapshots/`
//! (checkpoints of the folded state) and, by default, the `registry.json`
//! export. Invariants: read-only operations (`current`, `replay`, `dump`,
//! `verify`, `audit`) open the log with a [`LogReader`] and take no writer
//! lock, so they run beside a live writer and never change a file; a damaged
//! log is refused, never folded silently short. Every error names the store
//! directory, the LSN or the agent at fault.

pub mod audit;
pub mod demo;
pub mod describe;
pub mod stats;

use crate::log::{self, LogReader, Lsn, VerifyReport};
use crate::registry::history::{self, ScanError, Until};
use crate::registry::{codec, DecodeError, Event, RegistryError, State};
use crate::store::{Store, StoreError, StoreOptions};
use crate::time::Timestamp;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Why an operation failed.
#[derive(Debug, thiserror::Error)]
pub enum OpsError {
    #[error("no agentlog store at {}: run `agentlog --dir {} init` first", .0.display(), .0.display())]
    NoStore(PathBuf),
    #[error("{} is not a directory", .0.display())]
    NotADirectory(PathBuf),
    #[error("event at lsn {lsn}: {source}")]
    Decode {
        lsn: Lsn,
        #[source]
        source: DecodeError,
    },
    #[error(transparent)]
    Log(#[from] crate::Error),
    #[error(transparent)]
    Registry(#[from] RegistryError),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Export(#[from] crate::export::ExportError),
    #[error(transparent)]
    Import(#[from] crate::import::ImportError),
    #[error(transparent)]
    Snapshot(#[from] crate::snapshot::SnapshotError),
}

impl From<ScanError> for OpsError {
    fn from(e: ScanError) -> Self {
        match e {
            ScanError::Decode { lsn, source } => OpsError::Decode { lsn, source },
            ScanError::Log(e) => OpsError::Log(e),
        }
    }
}

pub type Result<T, E = OpsError> = std::result::Result<T, E>;

/// The log engine's directory inside a store.
pub fn log_dir(dir: &Path) -> PathBuf {
    dir.join("log")
}

/// The snapshot directory inside a store.
pub fn snapshot_dir(dir: &Path) -> PathBuf {
    dir.join("snapshots")
}

/// The default export path of a store.
pub fn registry_json(dir: &Path) -> PathBuf {
    dir.join("registry.json")
}

/// Progress of long work, in LSNs: `start(last_lsn)`, then `advance(lsn)`
/// now and then. The CLI draws a bar on a terminal; `()` ignores it.
pub trait Progress {
    fn start(&mut self, _total: u64) {}
    fn advance(&mut self, _pos: u64) {}
    fn finish(&mut self) {}
}
impl Progress for () {}

/// Records between two progress updates (keeps the fold loop tight).
const PROGRESS_EVERY: u64 = 1 << 16;

/// Checks that `dir` holds a store (a directory with a `log/` inside).
pub fn require_store(dir: &Path) -> Result<()> {
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => {
            if log_dir(dir).is_dir() {
                Ok(())
            } else {
                Err(OpsError::NoStore(dir.to_path_buf()))
            }
        }
        Ok(_) => Err(OpsError::NotADirectory(dir.to_path_buf())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(OpsError::NoStore(dir.to_path_buf()))
        }
        Err(e) => Err(crate::Error::io(dir, e).into()),
    }
}

/// Loads the newest intact store snapshot that `Store::open` would trust
/// too: it covers no LSN beyond the log's last, was taken in the log's
/// current compaction generation (an older one would resurrect retired
/// agents), and was folded with the default message cap. Otherwise the whole
/// log is folded.
fn newest_snapshot(dir: &Path, r: &LogReader) -> Result<Option<(State, Lsn)>> {
    let Some(loaded) =
        crate::snapshot::load_newest::<crate::store::SnapshotPayload>(&snapshot_dir(dir))?
    else {
        return Ok(None);
    };
    let path = loaded.info.path.display();
    if loaded.lsn > r.last_lsn().unwrap_or(0) {
        tracing::warn!(snapshot = %path, "snapshot is ahead of the log; folding the whole log");
        return Ok(None);
    }
    if loaded.state.generation != r.generation() {
        tracing::warn!(
            snapshot = %path,
            "snapshot taken in log generation {}, the log is at generation {} (compacted since); folding the whole log",
            loaded.state.generation,
            r.generation()
        );
        return Ok(None);
    }
    if loaded.state.state.max_messages() != StoreOptions::default().max_messages {
        return Ok(None);
    }
    Ok(Some((loaded.state.state, loaded.lsn)))
}

/// Opens the store in `dir` for writing (taking the writer lock); the
/// store resumes from its newest trusted snapshot. `create` allows a new
/// store.
pub fn open_store(dir: &Path, create: bool) -> Result<Store> {
    open_store_with(dir, create, StoreOptions::default())
}

/// [`open_store`] with explicit store options (e.g. a lock timeout).
pub fn open_store_with(dir: &Path, create: bool, opts: StoreOptions) -> Result<Store> {
    if create {
        if dir.exists() && !dir.is_dir() {
            return Err(OpsError::NotADirectory(dir.to_path_buf()));
        }
    } else {
        require_store(dir)?;
    }
    Ok(Store::open(dir, opts)?)
}

/// Opens the log of the store in `dir` read-only, refusing a damaged log.
///
/// A reader shows only the valid prefix of the newest segment (a batch being
/// written is "not there yet"), so on its own it would silently stop at a
/// damaged record. A checksum scan first tells the two apart: a bad stretch
/// with valid records after it (or in a sealed segment) is damage, named by
/// segment, offset and LSN; one past the last valid record is a tail still
/// being written and is left to the writer.
fn reader(dir: &Path) -> Result<LogReader> {
    require_store(dir)?;
    let dir = &log_dir(dir);
    let report = log::verify(dir)?;
    let last = report.last_lsn.unwrap_or(0);
    if let Some(b) = report.bad.iter().find(|b| b.lsn.is_none_or(|l| l <= last)) {
        return Err(crate::Error::Corrupt {
            segment: b.segment.clone(),
            offset: b.offset,
            lsn: b.lsn,
            reason: format!(
                "{} (run `agentlog verify`; `agentlog repair --salvage` copies the valid records)",
                b.reason
            ),
        }
        .into());
    }
    Ok(LogReader::open(dir)?)
}

/// The point of a replay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Point {
    /// Every record up to and including this LSN.
    Lsn(Lsn),
    /// The prefix of the log whose events were recorded at or before this time.
    Time(Timestamp),
}

/// The registry as of a point of the log.
#[derive(Debug, Clone)]
pub struct Replayed {
    pub state: State,
    /// Events folded.
    pub events: u64,
    /// The last folded event (LSN, time).
    pub last: Option<(Lsn, Timestamp)>,
    /// The first event after the point, if the log goes on.
    pub next: Option<(Lsn, Timestamp)>,
}

/// Folds the log of `dir` from the start up to `point` (read-only). A time
/// point takes the longest prefix of the log whose event times are at or
/// before it (as `Store::state_at` does), so the result is always a prefix.
pub fn replay(dir: &Path, point: Point, progress: &mut dyn Progress) -> Result<Replayed> {
    let r = reader(dir)?;
    let view = r.view();
    progress.start(r.last_lsn().unwrap_or(0));
    let mut out = Replayed {
        state: State::default(),
        events: 0,
        last: None,
        next: None,
    };
    for rec in view.iter() {
        let rec = rec?;
        let decode_err = |source| OpsError::Decode {
            lsn: rec.lsn,
            source,
        };
        let (_, at) = codec::decode_header(rec.payload).map_err(decode_err)?;
        let past = match point {
            Point::Lsn(l) => rec.lsn > l,
            Point::Time(t) => at > t,
        };
        if past {
            out.next = Some((rec.lsn, at));
            break;
        }
        out.state
            .apply_payload(rec.lsn, rec.payload)
            .map_err(decode_err)?;
        out.events += 1;
        out.last = Some((rec.lsn, at));
        if out.events.is_multiple_of(PROGRESS_EVERY) {
            progress.advance(rec.lsn);
        }
    }
    progress.finish();
    Ok(out)
}

/// The current registry, read-only: the newest snapshot plus the log after
/// it (no writer lock, so it works beside a running writer).
pub fn current(dir: &Path, progress: &mut dyn Progress) -> Result<(State, Lsn)> {
    let r = reader(dir)?;
    let view = r.view();
    progress.start(r.last_lsn().unwrap_or(0));
    let (mut state, after) = newest_snapshot(dir, &r)?.unwrap_or_else(|| (State::default(), 0));
    let last = history::fold_view(&view, &mut state, after, Until::End)?;
    progress.finish();
    Ok((state, last))
}

/// One record of the raw dump: decoded, or why it could not be.
#[derive(Debug, Clone)]
pub struct LogEntry {
    pub lsn: Lsn,
    pub event: std::result::Result<Event, DecodeError>,
    /// Who asked for the event, when the daemon recorded it.
    pub origin: Option<codec::Origin>,
}

/// Whether the dump goes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    Continue,
    Stop,
}

/// Hands every record of `dir` from LSN `from` to `sink`, decoded. With
/// `follow`, keeps polling the tail every `poll` for new records until `sink`
/// says stop (read-only; a writer may be appending).
pub fn dump(
    dir: &Path,
    from: Lsn,
    follow: Option<Duration>,
    mut sink: impl FnMut(&LogEntry) -> Flow,
) -> Result<()> {
    let mut r = reader(dir)?;
    let mut next = from;
    loop {
        let view = r.view();
        for rec in view.iter_from(next) {
            let rec = rec?;
            next = rec.lsn + 1;
            let entry = LogEntry {
                lsn: rec.lsn,
                event: codec::decode(rec.payload),
                origin: codec::origin(rec.payload),
            };
            if sink(&entry) == Flow::Stop {
                return Ok(());
            }
        }
        let Some(poll) = follow else {
            return Ok(());
        };
        std::thread::sleep(poll);
        r.refresh()?;
    }
}

/// What `verify` found: the log's checksum scan, and records whose payload
/// does not decode as an event although its checksum is valid.
#[derive(Debug, Clone)]
pub struct Verified {
    pub log: VerifyReport,
    /// (LSN, reason) of each undecodable event.
    pub undecodable: Vec<(Lsn, String)>,
}

impl Verified {
    pub fn is_clean(&self) -> bool {
        self.log.is_clean() && self.undecodable.is_empty()
    }
}

/// Checks every record's checksum (and, when the log is intact, that every
/// payload decodes as an event). Read-only.
pub fn verify(dir: &Path, progress: &mut dyn Progress) -> Result<Verified> {
    require_store(dir)?;
    let dir = &log_dir(dir);
    let report = log::verify(dir)?;
    let mut undecodable = Vec::new();
    if report.is_clean() {
        let r = LogReader::open(dir)?;
        progress.start(r.last_lsn().unwrap_or(0));
        for (i, rec) in r.view().iter().enumerate() {
            let rec = rec?;
            if let Err(e) = codec::decode(rec.payload) {
                undecodable.push((rec.lsn, e.to_string()));
            }
            if (i as u64 + 1).is_multiple_of(PROGRESS_EVERY) {
                progress.advance(rec.lsn);
            }
        }
        progress.finish();
    }
    Ok(Verified {
        log: report,
        undecodable,
    })
}

/// What `init` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Initialized {
    /// False when `dir` already held a store (then nothing changed).
    pub created: bool,
    pub events: u64,
}

/// Creates an empty store in `dir` (and its parents), or opens an existing
/// one and reports its size.
pub fn init(dir: &Path) -> Result<Initialized> {
    let existed = log_dir(dir).is_dir();
    let store = open_store(dir, true)?;
    let events = store.recovery().records;
    store.close()?;
    Ok(Initialized {
        created: !existed,
        events,
    })
}

/// Writes a snapshot of the store's folded state now; returns its file and
/// the LSN it covers.
pub fn snapshot(store: &Store) -> Result<crate::snapshot::SnapshotInfo> {
    Ok(store.snapshot()?)
}

/// Publishes the store's registry as schema-v4 `registry.json` at `path`
/// (default `DIR/registry.json`) under both writers' locks.
pub fn export(
    store: &Store,
    path: Option<&Path>,
    strict: bool,
) -> Result<(PathBuf, crate::export::ExportReport)> {
    let path = path.map_or_else(|| registry_json(store.dir()), Path::to_path_buf);
    let report = store.export(Some(&path), strict)?;
    Ok((path, report))
}

/// Copies every valid record of the store at `dir` into a new store at `out`
/// (which must not exist or be empty), with their original LSNs; the source
/// is never changed. Snapshots are not copied: the new store folds its log.
pub fn salvage(dir: &Path, out: &Path) -> Result<log::SalvageReport> {
    require_store(dir)?;
    if out.exists() {
        let empty = std::fs::read_dir(out)
            .map_err(|e| crate::Error::io(out, e))?
            .next()
            .is_none();
        if !empty {
            return Err(crate::Error::InvalidArgument(format!(
                "salvage destination {} is not empty",
                out.display()
            ))
            .into());
        }
    }
    Ok(log::salvage(&log_dir(dir), &log_dir(out))?)
}

/// Compacts the store at `dir` (SPEC §4) judging retention at `now`
/// (default: the clock); a dry run reports what would be dropped and changes
/// nothing. Takes the writer lock; the store snapshots the new generation
/// (snapshots of the old one are no longer trusted).
pub fn compact(
    dir: &Path,
    now: Option<Timestamp>,
    dry_run: bool,
) -> Result<crate::compact::CompactionReport> {
    let store = open_store(dir, false)?;
    let copts = crate::compact::CompactOptions {
        dry_run,
        ..Default::default()
    };
    let report = store.compact(now.unwrap_or_else(Timestamp::now), &copts);
    let closed = store.close();
    let report = report?;
    closed?;
    Ok(report)
}
