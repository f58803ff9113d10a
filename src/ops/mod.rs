//! Operations behind the command line, one library function per subcommand
//! where the store modules do not already offer exactly one: replay to a
//! point, the raw event dump (and its follow mode), verify (checksums plus
//! event decoding), audit with heartbeat runs collapsed, stats, and the demo.
//!
//! Invariants: read-only operations (`replay`, `dump`, `verify`, `audit`)
//! open the log with a [`LogReader`] and take no writer lock, so they run
//! beside a live writer and never change a file. Every error names the store
//! directory, the LSN or the agent at fault.

pub mod audit;
pub mod describe;

use crate::log::{self, LogReader, Lsn, VerifyReport};
use crate::registry::{codec, DecodeError, Event, RegistryError, State};
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
    Export(#[from] crate::export::ExportError),
}

pub type Result<T, E = OpsError> = std::result::Result<T, E>;

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

/// Checks that `dir` holds a store (a directory that exists).
pub fn require_store(dir: &Path) -> Result<()> {
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(OpsError::NotADirectory(dir.to_path_buf())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(OpsError::NoStore(dir.to_path_buf()))
        }
        Err(e) => Err(crate::Error::io(dir, e).into()),
    }
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
    let report = log::verify(dir)?;
    let last = report.last_lsn.unwrap_or(0);
    if let Some(b) = report
        .bad
        .iter()
        .find(|b| b.lsn.map_or(true, |l| l <= last))
    {
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

/// Folds the log of `dir` from the start up to `point` (read-only).
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
        let (_, at) = codec::decode_header(rec.payload).map_err(|source| OpsError::Decode {
            lsn: rec.lsn,
            source,
        })?;
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
            .map_err(|source| OpsError::Decode {
                lsn: rec.lsn,
                source,
            })?;
        out.events += 1;
        out.last = Some((rec.lsn, at));
        if out.events % PROGRESS_EVERY == 0 {
            progress.advance(rec.lsn);
        }
    }
    progress.finish();
    Ok(out)
}

/// One record of the raw dump: decoded, or why it could not be.
#[derive(Debug, Clone)]
pub struct LogEntry {
    pub lsn: Lsn,
    pub event: std::result::Result<Event, DecodeError>,
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
            if (i as u64 + 1) % PROGRESS_EVERY == 0 {
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
    if dir.exists() && !dir.is_dir() {
        return Err(OpsError::NotADirectory(dir.to_path_buf()));
    }
    let existed = std::fs::read_dir(dir).is_ok_and(|mut d| d.next().is_some());
    let (log, report) = log::Log::open(dir, log::LogOptions::default())?;
    log.close()?;
    Ok(Initialized {
        created: !existed,
        events: report.records,
    })
}
