//! Operations behind the command line, on the binary's side (the library
//! does not export them): one function per subcommand where the library does
//! not already offer exactly one call. Opening a store for one command,
//! `init`, `export`, replay to a point, the raw event dump (and its follow
//! mode), verify (checksums plus event decoding), salvage and cut-at-hole
//! repairs, compaction with its guard against a far-future `--now`, audit
//! with heartbeat runs collapsed, stats, the demo, and (in `inbox`) waiting
//! for mail, describing one agent, presence. Errors are [`OpsError`]: what
//! only the command line knows, or the library's error wrapped once.
//!
//! The store directory's files are named by `agentlog::StoreLayout`. Invariants:
//! read-only operations (`current`, `replay`, `dump`, `verify`, `audit`,
//! `stats`) open a [`ReadOnlyStore`] and take no writer lock, so they run
//! beside a live writer and never change a file; they read a snapshot and
//! the log after it once, with no separate verify pass. A damaged log is
//! refused, never folded silently short; a torn tail (a crash mid-write) is
//! read up to its start, as the next writer open will cut it. Every error
//! names the store directory, the LSN or the agent at fault.

pub mod audit;
pub mod demo;
pub mod describe;
mod describe_runtime;
pub mod inbox;
pub mod sharing;
pub mod stats;

use agentlog::log::{self, LogError, LogReader, Lsn, VerifyReport};
use agentlog::registry::history::{self, Until, PROGRESS_EVERY};
use agentlog::registry::{codec, DecodeError, Event, RegistryError, State};
use agentlog::store::{ReadOnlyStore, Store, StoreError, StoreOptions};
use agentlog::time::{Timestamp, MAX_FUTURE_SKEW_MS};
use agentlog::StoreLayout;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Why an operation of the command line failed: what only the command line
/// knows (no store there, a bad request), or the library's own error, once
/// ([`StoreError`] already names the layer below it: the log, the registry,
/// export, import, snapshots). An event that does not decode is the log's
/// damage, named by its segment, offset and LSN.
#[derive(Debug, thiserror::Error)]
pub enum OpsError {
    #[error("no agentlog store at {}: run `agentlog --dir {} init` first", .0.display(), .0.display())]
    NoStore(PathBuf),
    #[error("{} is not a directory", .0.display())]
    NotADirectory(PathBuf),
    /// A request the operation refuses (what and why).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl OpsError {
    /// An I/O error on `path` (the log's I/O error: it tells a full disk).
    pub(crate) fn io(path: &Path, e: std::io::Error) -> OpsError {
        LogError::io(path, e).into()
    }
}

/// The library's errors below the store reach the command line as the
/// store's, so each is wrapped once.
macro_rules! through_store {
    ($($t:ty),*) => {$(
        impl From<$t> for OpsError {
            fn from(e: $t) -> Self {
                OpsError::Store(e.into())
            }
        }
    )*};
}
through_store!(LogError, RegistryError, agentlog::export::ExportError);

pub type Result<T, E = OpsError> = std::result::Result<T, E>;

/// Progress of long work, in LSNs: `start(last_lsn)`, then `advance(lsn)`
/// now and then. The CLI draws a bar on a terminal; `()` ignores it.
pub trait Progress {
    fn start(&mut self, _total: u64) {}
    fn advance(&mut self, _pos: u64) {}
    fn finish(&mut self) {}
}
impl Progress for () {}

/// Checks that `dir` holds a store (a directory with a `log/` inside).
pub fn require_store(dir: &Path) -> Result<()> {
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => {
            if dir.join(SALVAGE_MARKER).exists() {
                Err(OpsError::InvalidArgument(format!(
                    "{} is an unfinished salvage (a `repair --salvage` was interrupted): \
                     rerun it with the same --out to replace it",
                    dir.display()
                )))
            } else if StoreLayout::new(dir).exists() {
                if let Some(w) = sharing::exposure_warning(dir) {
                    tracing::warn!("{w}");
                }
                Ok(())
            } else {
                Err(OpsError::NoStore(dir.to_path_buf()))
            }
        }
        Ok(_) => Err(OpsError::NotADirectory(dir.to_path_buf())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(OpsError::NoStore(dir.to_path_buf()))
        }
        Err(e) => Err(OpsError::io(dir, e)),
    }
}

/// Opens the store in `dir` for writing (taking the writer lock) for one
/// command ([`StoreOptions::short_lived`]: no background threads, a quick
/// open, a snapshot on close only when due); the store resumes from its
/// newest trusted snapshot. `create` allows a new store.
pub fn open_store(dir: &Path, create: bool) -> Result<Store> {
    open_store_with(dir, create, StoreOptions::short_lived())
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

/// Opens the store in `dir` read-only (see [`ReadOnlyStore`]): damage is
/// refused with where it is and what to run next.
fn read_only(dir: &Path) -> Result<ReadOnlyStore> {
    require_store(dir)?;
    let opts = StoreOptions {
        max_messages: agentlog::store::config::max_messages(dir)?,
        ..StoreOptions::short_lived()
    };
    ReadOnlyStore::open(dir, &opts).map_err(|e| match e {
        agentlog::log::LogError::Corrupt {
            segment,
            offset,
            lsn,
            reason,
        } => agentlog::log::LogError::Corrupt {
            segment,
            offset,
            lsn,
            reason: format!(
                "{reason} (run `agentlog verify`; `agentlog repair --salvage` copies the valid records)"
            ),
        }
        .into(),
        e => e.into(),
    })
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

/// Folds the log of `dir` from the start up to `until` (read-only). An LSN
/// point folds that prefix. A time point folds, in log order, every event of
/// the whole log stamped at or before it (as `Store::state_at` does): an
/// event stamped out of order (later than an event after it) is skipped
/// alone, so one bad stamp never hides the events after it (FORMAT.md,
/// "Event times").
pub fn replay(dir: &Path, until: Until, progress: &mut dyn Progress) -> Result<Replayed> {
    let r = read_only(dir)?;
    let view = r.view();
    progress.start(r.log().last_lsn().unwrap_or(0));
    let mut state = State::new(agentlog::store::config::max_messages(dir)?);
    let folded = history::fold(&view, &mut state, 0, until, &mut |lsn| {
        progress.advance(lsn)
    })
    .map_err(|e| e.into_log_error(&view))?;
    progress.finish();
    let timed = |lsn: Option<Lsn>| -> Result<Option<(Lsn, Timestamp)>> {
        let Some(lsn) = lsn else { return Ok(None) };
        let at = history::event_time(&view, lsn).map_err(|e| e.into_log_error(&view))?;
        Ok(at.map(|at| (lsn, at)))
    };
    Ok(Replayed {
        state,
        events: folded.events,
        last: timed((folded.events > 0).then_some(folded.last))?,
        next: timed(folded.next)?,
    })
}

/// The current registry, read-only: the newest snapshot plus the log after
/// it (no writer lock, so it works beside a running writer).
pub fn current(dir: &Path, progress: &mut dyn Progress) -> Result<(State, Lsn)> {
    let r = read_only(dir)?;
    progress.start(r.log().last_lsn().unwrap_or(0));
    let read = r.state_with(&mut |lsn| progress.advance(lsn))?;
    progress.finish();
    Ok((read.state, read.lsn))
}

/// The LSN of the last record of `dir`'s log (0 for an empty log), read
/// without a writer lock: where a follower of new events starts.
pub fn last_lsn(dir: &Path) -> Result<Lsn> {
    Ok(read_only(dir)?.log().last_lsn().unwrap_or(0))
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
    let mut r = read_only(dir)?;
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
    let dir = &StoreLayout::new(dir).log();
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
/// one and reports its size. `max_messages` sets a new store's live-message
/// cap (persisted, see `store::config`); an existing store keeps its own and
/// refuses a different one. The directory is created for `sharing` (0700,
/// or 0750 for the group); an existing directory keeps its mode (a warning
/// says if it is open to everyone).
pub fn init(
    dir: &Path,
    max_messages: Option<usize>,
    schema: Option<agentlog::schemas::Schema>,
    sharing: sharing::Sharing,
) -> Result<Initialized> {
    let existed = StoreLayout::new(dir).exists();
    if dir.exists() && !dir.is_dir() {
        return Err(OpsError::NotADirectory(dir.to_path_buf()));
    }
    if !dir.exists() {
        sharing::create_store_dir(dir, sharing).map_err(|e| OpsError::io(dir, e))?;
    }
    if let Some(n) = max_messages {
        let current = agentlog::store::config::max_messages(dir)?;
        if existed && current != n {
            return Err(OpsError::InvalidArgument(format!(
                "the store at {} exists with message cap {current}; the cap is fixed when a store is created",
                dir.display()
            )));
        }
        if !existed {
            agentlog::store::config::set_max_messages(dir, n)?;
        }
    }
    // The published schema only decides what is written: it may change.
    if let Some(schema) = schema {
        agentlog::store::config::set_registry_schema(dir, schema)?;
    }
    let store = open_store(dir, true)?;
    let events = store.recovery().records;
    store.close()?;
    Ok(Initialized {
        created: !existed,
        events,
    })
}

/// Publishes the registry of the store at `dir` as schema-v4
/// `registry.json` at `path` (default `DIR/registry.json`) under both
/// registry locks. Reads the store read-only (no writer lock), so exports
/// run beside a writer and beside each other, and from a store the caller
/// may only read.
pub fn export(
    dir: &Path,
    path: Option<&Path>,
    strict: bool,
    schema: Option<agentlog::schemas::Schema>,
    progress: &mut dyn Progress,
) -> Result<(PathBuf, agentlog::export::ExportReport)> {
    let schema = match schema {
        Some(s) => s,
        None => agentlog::store::config::registry_schema(dir)?,
    };
    let (state, _) = current(dir, progress)?;
    let path = path.map_or_else(|| StoreLayout::new(dir).registry_json(), Path::to_path_buf);
    let report = agentlog::export::export_to(
        &path,
        state.agents().iter(),
        &agentlog::export::ExportOptions { strict, schema },
        &agentlog::export::PublishOptions::default(),
    )?;
    Ok((path, report))
}

/// Copies every valid record of the store at `dir` into a new store at `out`
/// (which must not exist or be empty), with their original LSNs; the source
/// is never changed. Snapshots are not copied: the new store folds its log.
///
/// The output is marked unfinished ([`SALVAGE_MARKER`], written first and
/// removed last): a killed salvage leaves a store every command refuses as
/// an unfinished salvage, and a rerun with the same `out` replaces it.
pub fn salvage(dir: &Path, out: &Path) -> Result<log::SalvageReport> {
    require_store(dir)?;
    let marker = out.join(SALVAGE_MARKER);
    if out.exists() {
        let empty = std::fs::read_dir(out)
            .map_err(|e| OpsError::io(out, e))?
            .next()
            .is_none();
        if std::fs::symlink_metadata(&marker).is_ok_and(|m| m.is_file()) {
            tracing::warn!(out = %out.display(), "replacing an unfinished salvage");
            std::fs::remove_dir_all(out).map_err(|e| OpsError::io(out, e))?;
        } else if !empty {
            return Err(OpsError::InvalidArgument(format!(
                "salvage destination {} is not empty",
                out.display()
            )));
        }
    }
    sharing::create_store_dir(out, sharing::Sharing::of_dir(dir))
        .map_err(|e| OpsError::io(out, e))?;
    let io = |e| OpsError::io(&marker, e);
    agentlog::internals::files::create_fresh(&marker)
        .and_then(|f| f.sync_all())
        .map_err(io)?;
    sync_folder(out)?;
    let report = log::salvage(&StoreLayout::new(dir).log(), &StoreLayout::new(out).log())?;
    std::fs::remove_file(&marker).map_err(io)?;
    sync_folder(out)?;
    Ok(report)
}

/// The file that marks a `repair --salvage` output as unfinished.
pub const SALVAGE_MARKER: &str = "SALVAGE-UNFINISHED";

fn sync_folder(dir: &Path) -> Result<()> {
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| OpsError::io(dir, e))
}

/// Opens the store at `dir` as the writer in the `CutAtHole` recovery mode
/// (after a power loss: cut the newest segment at a zero hole that valid
/// records follow, saving the rest to `.broken`), then closes it; returns
/// what recovery cut.
pub fn cut_at_hole(dir: &Path) -> Result<log::RecoveryReport> {
    require_store(dir)?;
    let mut opts = StoreOptions::default();
    opts.log.recovery = log::RecoveryMode::CutAtHole;
    let store = Store::open(dir, opts)?;
    let report = store.recovery().clone();
    store.close()?;
    Ok(report)
}

/// Compacts the store at `dir` (docs/behaviour.md §4) judging retention at `now`
/// (default: the clock); a dry run reports what would be dropped and changes
/// nothing (read-only: see [`compact_plan`]). A real run takes the writer lock; the store snapshots the new generation
/// (snapshots of the old one are no longer trusted).
///
/// With `clock` given, a real run refuses a `now` more than
/// [`MAX_FUTURE_SKEW_MS`] after both `clock` and the log's last event time:
/// such a `now` (a typo like 2062 for 2026) would drop unread messages and
/// retire live agents for good. `None` skips the check (forced).
pub fn compact(
    dir: &Path,
    now: Option<Timestamp>,
    dry_run: bool,
    clock: Option<Timestamp>,
) -> Result<agentlog::compact::CompactionReport> {
    if dry_run {
        return compact_plan(dir, now.unwrap_or_else(Timestamp::now));
    }
    let store = open_store(dir, false)?;
    let report = compact_store(&store, now, dry_run, clock);
    let closed = store.close();
    let report = report?;
    closed?;
    Ok(report)
}

/// [`compact`] on an open store (the daemon's, or one the caller opened).
pub fn compact_store(
    store: &Store,
    now: Option<Timestamp>,
    dry_run: bool,
    clock: Option<Timestamp>,
) -> Result<agentlog::compact::CompactionReport> {
    let now = now.unwrap_or_else(Timestamp::now);
    if let (Some(clock), false) = (clock, dry_run) {
        let last = last_event_time(store)?;
        let latest = last.map_or(clock, |t| t.max(clock));
        if now.is_beyond(latest, MAX_FUTURE_SKEW_MS) {
            let last = last.map_or_else(|| "none".to_string(), |t| t.to_string());
            return Err(OpsError::InvalidArgument(format!(
                "compact --now {now} is later than both the clock ({clock}) and the log's \
                 last event ({last}); it would drop unexpired messages and retire live \
                 agents for good. Check the date, or pass --force-now if it is meant"
            )));
        }
    }
    let copts = agentlog::compact::CompactOptions {
        dry_run,
        ..Default::default()
    };
    Ok(store.compact(now, &copts)?)
}

/// `compact --dry-run`: the plan the writer would make (the same
/// [`agentlog::compact::plan`] and retention), computed from the read-only store,
/// so it needs no writer lock, runs beside a writer and changes no file.
fn compact_plan(dir: &Path, now: Timestamp) -> Result<agentlog::compact::CompactionReport> {
    let started = std::time::Instant::now();
    let store = read_only(dir)?;
    let read = store.state()?;
    let opts = agentlog::compact::CompactOptions {
        dry_run: true,
        ..Default::default()
    };
    let plan = agentlog::compact::plan(&store.view(), &read.state, read.lsn, now, &opts)?;
    let mut report = plan.report;
    report.generation_before = store.log().generation();
    report.generation = report.generation_before;
    report.duration_ms = started.elapsed().as_millis() as u64;
    Ok(report)
}

/// The event time of the store's last record, if any.
fn last_event_time(store: &Store) -> Result<Option<Timestamp>> {
    let view = store.view();
    Ok(history::event_time(&view, store.applied_lsn()).map_err(|e| e.into_log_error(&view))?)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The library's errors are wrapped once, as the store's, and read as
    /// they did when each had a variant of its own.
    #[test]
    fn library_errors_are_wrapped_once_through_the_store() {
        let e = OpsError::from(LogError::InvalidArgument("empty batch".into()));
        assert!(matches!(e, OpsError::Store(StoreError::Log(_))), "{e:?}");
        assert_eq!(e.to_string(), "invalid argument: empty batch");
        let e = OpsError::from(RegistryError::NotFound {
            agent: "ghost".into(),
        });
        assert!(
            matches!(e, OpsError::Store(StoreError::Registry(_))),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            RegistryError::NotFound {
                agent: "ghost".into()
            }
            .to_string()
        );
    }

    #[test]
    fn a_missing_store_says_how_to_make_one() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope");
        let e = require_store(&missing).unwrap_err();
        assert!(matches!(e, OpsError::NoStore(_)), "{e:?}");
        assert!(e.to_string().contains("init` first"), "{e}");
        let file = dir.path().join("file");
        std::fs::write(&file, b"x").unwrap();
        assert!(matches!(
            require_store(&file).unwrap_err(),
            OpsError::NotADirectory(_)
        ));
    }
}
