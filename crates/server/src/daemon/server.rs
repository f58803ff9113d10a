//! The daemon's life: raise the descriptor limit and fit the connection caps
//! to it, bind the socket (replacing a stale one), accept connections up to
//! the cap of each class (writers, observers; watchers and HTTP have their
//! own), run the periodic duties (sweep on the clock, debounced
//! `registry.json` publication, auto-compaction; snapshots are the store's
//! own thread), and shut down gracefully on SIGTERM/SIGINT: remove the
//! socket (a new client waits for the next daemon instead of talking to one
//! that is leaving), stop accepting, let connections finish the request in
//! hand for at most `drain` (5 s; a peer that reads nothing is dropped after
//! `write_timeout`, 5 s), sync, export, then close the store (snapshot,
//! release the lock). With the defaults a stop takes the drain bound plus
//! the final sync, export and snapshot: well inside systemd's
//! `TimeoutStopSec=30` of the README's unit.
//!
//! The caller opens the store first, so the writer lock is held before the
//! socket is touched: a socket file found then is stale by construction (its
//! daemon no longer holds the lock) and is replaced, never trusted.

use super::access::Access;
use super::replica::Replica;
use super::{code, conn, Dispatch, ErrorReply, ServeError, ServeOptions, ServeResult};
use crate::cluster::own_origin;
use crate::compact::{AutoCompactor, AutoPolicy, CompactOptions};
use crate::probe::ProcProbe;
use crate::store::{with_origin, Store};
use crate::time::Timestamp;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::UnixListener;
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::{watch, Notify};

/// What every connection shares.
pub(crate) struct Shared {
    pub store: Arc<Store>,
    pub dispatch: Arc<dyn Dispatch>,
    pub opts: ServeOptions,
    pub access: Access,
    /// Woken after every write, so watchers read the new records.
    pub committed: Notify,
    /// Becomes `true` when the daemon starts shutting down.
    pub shutdown: watch::Receiver<bool>,
    pub store_id: String,
    pub connections: AtomicUsize,
    /// Open socket connections of observers (within `connections`).
    pub observers: AtomicUsize,
    /// Open socket connections of writers (within `connections`).
    pub writers: AtomicUsize,
    /// Watchers that got `lagged` so far (reported by `hello`).
    pub lagged: AtomicUsize,
    /// The group commit of the hot path's durable writes.
    pub syncer: Arc<super::durable::Syncer>,
    /// Running watch streams (socket and HTTP).
    pub watchers: AtomicUsize,
    /// Where `serve --http` listens (reported by `hello`).
    pub http_addr: Option<SocketAddr>,
    /// Waiting reads blocked now (reported by `hello`).
    pub waiting_reads: AtomicUsize,
    /// Auto-compaction checks finished (reported by `hello`).
    pub compaction_rounds: AtomicU64,
    /// Periodic publish checks finished (reported by `hello`): a check
    /// that begins after a write has published it when it ends.
    pub publish_rounds: AtomicU64,
    /// The replicated mode's node and lease (`serve --nats`).
    pub replica: Option<Arc<Replica>>,
}

/// Counts a connection (and an observer's, apart) while it is open.
struct Counted {
    shared: Arc<Shared>,
    observer: bool,
}

impl Counted {
    fn new(shared: &Arc<Shared>, observer: bool) -> (Counted, usize) {
        shared.connections.fetch_add(1, Ordering::AcqRel);
        let class = if observer {
            &shared.observers
        } else {
            &shared.writers
        };
        let n = class.fetch_add(1, Ordering::AcqRel);
        let counted = Counted {
            shared: shared.clone(),
            observer,
        };
        (counted, n)
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.shared.connections.fetch_sub(1, Ordering::AcqRel);
        let class = if self.observer {
            &self.shared.observers
        } else {
            &self.shared.writers
        };
        class.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Descriptors kept for the store (log segments, snapshots, exports, the
/// blocking pool's files, NATS) beyond the connection caps (a quarter of a
/// smaller limit).
const RESERVED_FDS: usize = 128;

/// Raises the soft `RLIMIT_NOFILE` to the hard limit, and fits the caps of
/// `opts` into it: writers' connections shrink first (observers, HTTP and
/// watchers keep at most an eighth each), so no `accept` can fail for want
/// of a descriptor while the caps hold. What changed is logged.
fn fit_descriptors(opts: &mut ServeOptions) {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let mut lim = getrlimit(Resource::Nofile);
    if lim.current != lim.maximum {
        let raised = rustix::process::Rlimit {
            current: lim.maximum,
            maximum: lim.maximum,
        };
        match setrlimit(Resource::Nofile, raised) {
            Ok(()) => lim = getrlimit(Resource::Nofile),
            Err(e) => tracing::warn!("cannot raise the descriptor limit to the hard limit: {e}"),
        }
    }
    let fds = lim.current.map_or(usize::MAX, |n| n as usize);
    let reserved = RESERVED_FDS.min(fds / 4);
    let share = (fds.saturating_sub(reserved) / 8).max(1);
    opts.max_observers = opts.max_observers.min(share);
    opts.http_max_connections = opts.http_max_connections.min(share);
    opts.max_watchers = opts.max_watchers.min(share);
    let http = if opts.http.is_some() {
        opts.http_max_connections
    } else {
        0
    };
    let room = fds
        .saturating_sub(RESERVED_FDS + opts.max_observers + http)
        .max(1);
    if opts.max_connections > room {
        tracing::warn!(
            "{fds} file descriptors allowed: connections of writers capped at {room} \
             (not {}), observers at {}, HTTP at {}",
            opts.max_connections,
            opts.max_observers,
            http
        );
        opts.max_connections = room;
    }
}

/// `"<dev>:<ino>"` of the store directory.
fn store_id(dir: &Path) -> std::io::Result<String> {
    let m = std::fs::metadata(dir)?;
    Ok(format!("{}:{}", m.dev(), m.ino()))
}

/// Binds the socket of `dir`, replacing a stale file (the caller holds the
/// writer lock, so no live daemon owns it), with mode `mode`.
fn bind(path: &Path, mode: u32) -> ServeResult<UnixListener> {
    match std::fs::remove_file(path) {
        Ok(()) => tracing::warn!("replaced the stale socket {}", path.display()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(ServeError::file("removing stale socket", path)(e)),
    }
    let listener = UnixListener::bind(path).map_err(ServeError::file("binding", path))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(ServeError::file("setting the mode of", path))?;
    // A group-shared store's socket is for the directory's group, whatever
    // the daemon's primary group is (a set-group-ID directory already gave
    // it that group; an older store's may not have).
    if mode & 0o070 != 0 {
        if let Some(dir) = path.parent().and_then(|d| std::fs::metadata(d).ok()) {
            let group = rustix::fs::Gid::from_raw(dir.gid());
            if let Err(e) = rustix::fs::chown(path, None, Some(group)) {
                tracing::warn!(socket = %path.display(), error = %e, "cannot give the socket the store's group");
            }
        }
    }
    Ok(listener)
}

/// Serves `store` until SIGTERM or SIGINT; then shuts down gracefully and
/// closes the store. `ready` is called with the socket path (and the HTTP
/// address, with `opts.http`; and what `hello` says of the replication, with
/// `opts.replica`) once it accepts.
pub fn serve(
    store: Store,
    dispatch: Arc<dyn Dispatch>,
    mut opts: ServeOptions,
    ready: impl FnOnce(&Path, Option<SocketAddr>, Option<&serde_json::Value>),
) -> ServeResult<()> {
    fit_descriptors(&mut opts);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("agentlog-serve")
        .build()
        .map_err(ServeError::system("starting the tokio runtime"))?;
    let dir = store.dir().to_path_buf();
    let path = super::socket_path(&dir);
    let (store, replica) = match opts.replica.take() {
        Some(r) => {
            let replica = Arc::new(rt.block_on(Replica::start(store, r))?);
            (replica.store(), Some(replica))
        }
        None => (Arc::new(store), None),
    };
    let served = rt.block_on(run(
        store.clone(),
        replica.clone(),
        dispatch,
        opts,
        &path,
        ready,
    ));
    // The socket goes while the writer lock is still held, so a daemon
    // started meanwhile never has its fresh socket removed by us.
    let closed = match replica {
        Some(replica) => {
            // The node closes its store on the runtime; every other holder
            // is gone once `run` returned (else the store is synced instead).
            drop(store);
            let removed = remove_socket(&path);
            let closed = rt.block_on(async move {
                match Arc::try_unwrap(replica) {
                    Ok(r) => r.close().await,
                    Err(r) => (r.store().sync()).map_err(ServeError::store("syncing the replica")),
                }
            });
            drop(rt);
            removed.and(closed)
        }
        None => {
            drop(rt); // joins the blocking pool: no request still holds the store
            let removed = remove_socket(&path);
            let closed = match Arc::try_unwrap(store) {
                Ok(store) => {
                    (store.close().map(drop)).map_err(ServeError::store("closing the store"))
                }
                Err(store) => store.sync().map_err(ServeError::store("syncing the store")),
            };
            removed.and(closed)
        }
    };
    served?;
    closed
}

fn remove_socket(path: &Path) -> ServeResult<()> {
    std::fs::remove_file(path)
        .or_else(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                Ok(())
            } else {
                Err(e)
            }
        })
        .map_err(ServeError::file("removing", path))
}

async fn run(
    store: Arc<Store>,
    replica: Option<Arc<Replica>>,
    dispatch: Arc<dyn Dispatch>,
    opts: ServeOptions,
    path: &Path,
    ready: impl FnOnce(&Path, Option<SocketAddr>, Option<&serde_json::Value>),
) -> ServeResult<()> {
    let mut term = signal(SignalKind::terminate())
        .map_err(ServeError::system("installing the SIGTERM handler"))?;
    let mut int = signal(SignalKind::interrupt())
        .map_err(ServeError::system("installing the SIGINT handler"))?;
    let web = match opts.http {
        Some(addr) => Some(super::http::bind(addr, store.dir()).await?),
        None => None,
    };
    let http_addr = match &web {
        Some(bound) => Some(
            bound
                .local_addr()
                .map_err(ServeError::system("reading the HTTP address"))?,
        ),
        None => None,
    };
    let listener = bind(path, opts.socket_mode)?;
    let (stop, shutdown) = watch::channel(false);
    let owner = rustix::process::geteuid().as_raw();
    let shared = Arc::new(Shared {
        store_id: store_id(store.dir()).map_err(ServeError::file("reading", store.dir()))?,
        syncer: Arc::new(super::durable::Syncer::new(store.log().synced_lsn())),
        access: Access::new(owner, opts.allow_uids.clone(), opts.allow_gids.clone()),
        store,
        dispatch,
        opts,
        committed: Notify::new(),
        shutdown,
        connections: AtomicUsize::new(0),
        observers: AtomicUsize::new(0),
        writers: AtomicUsize::new(0),
        lagged: AtomicUsize::new(0),
        watchers: AtomicUsize::new(0),
        http_addr,
        waiting_reads: AtomicUsize::new(0),
        compaction_rounds: AtomicU64::new(0),
        publish_rounds: AtomicU64::new(0),
        replica,
    });
    first_publish(&shared).await;
    let mut duties = start_duties(&shared);
    if let Some(r) = &shared.replica {
        duties.extend(r.start_duties(&shared));
    }
    duties.push(tokio::spawn(
        shared.syncer.clone().run(shared.store.clone()),
    ));
    if let Some(bound) = web {
        duties.extend(super::http::start(bound, shared.clone()));
    }
    let described = shared.replica.as_ref().map(|r| r.describe());
    ready(path, http_addr, described.as_ref());
    let mut backoff = super::accept::Backoff::new("the socket listener");
    loop {
        let accepted = tokio::select! {
            _ = term.recv() => break,
            _ = int.recv() => break,
            accepted = listener.accept() => accepted,
        };
        let stream = match accepted {
            Ok((stream, _)) => {
                backoff.succeeded();
                stream
            }
            Err(e) => {
                backoff.failed(&e).await;
                continue;
            }
        };
        let peer = conn::peer_of(&stream);
        let observer = !shared.access.may_write(&peer);
        let (counted, n) = Counted::new(&shared, observer);
        let cap = if observer {
            shared.opts.max_observers
        } else {
            shared.opts.max_connections
        };
        if n >= cap {
            refuse(&stream, n, observer);
            continue;
        }
        tokio::spawn(async move {
            conn::run(stream, counted.shared.clone(), peer, !observer).await;
            drop(counted);
        });
    }
    // New clients find no socket (they wait for the next daemon, or read
    // the store directly) while this one drains.
    drop(listener);
    if let Err(e) = remove_socket(path) {
        tracing::warn!("{e}");
    }
    let _ = stop.send(true);
    shared.committed.notify_waiters();
    // In-flight requests finish; idle connections close at once; a peer
    // that reads nothing is dropped after the write timeout.
    let deadline = tokio::time::Instant::now() + shared.opts.drain;
    while shared.connections.load(Ordering::Acquire) > 0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let left = shared.connections.load(Ordering::Acquire);
    if left > 0 {
        tracing::warn!(
            "{left} connection(s) still busy after the {} s drain: closed",
            shared.opts.drain.as_secs_f64()
        );
    }
    for d in &duties {
        d.abort();
    }
    for d in duties {
        let _ = d.await;
    }
    let store = shared.store.clone();
    let wait = shared.opts.publish_lock_wait;
    tokio::task::spawn_blocking(move || -> ServeResult<()> {
        store.sync().map_err(ServeError::store("syncing the log"))?;
        if store.options().export_path.is_some() {
            final_publish(&store, wait)?;
        }
        Ok(())
    })
    .await
    .map_err(|source| ServeError::Task {
        what: "final sync",
        source,
    })?
}

/// The shutdown publish: foreign writes ingested, then the fold published,
/// waiting at most `wait` for the registry locks. The log is already
/// durable, so locks still held after that are logged as a warning (who
/// holds which lock, and that the next start publishes) and are not a
/// failure; any other error is.
fn final_publish(store: &Store, wait: Duration) -> ServeResult<()> {
    let first = wait.min(Duration::from_secs(10));
    let late = |e: &crate::store::StoreError| {
        matches!(
            e,
            crate::store::StoreError::Export(crate::export::ExportError::Lock(
                agentlog_core::LockError::Timeout { .. }
            ))
        )
    };
    let mut result = store.publish_registry(first);
    if let (Err(e), true) = (&result, wait > first) {
        if late(e) {
            tracing::warn!(
                "shutdown: {e} (another writer holds the registry lock); waiting up to {}s more",
                (wait - first).as_secs()
            );
            result = store.publish_registry(wait - first);
        }
    }
    match result {
        Ok(p) => {
            warn_state_problems(&p.state_problems, &HashMap::new());
            Ok(())
        }
        Err(e) if late(&e) => {
            tracing::warn!(
                "shutdown: registry.json not republished: {e}; the log is durable up to LSN {}, \
                 and the next start publishes it",
                store.applied_lsn()
            );
            Ok(())
        }
        Err(e) => Err(ServeError::store("publishing registry.json")(e)),
    }
}

/// Warns about each `state.json` a publish left as it is, unless the same
/// bytes were warned about last time (`before`); what to remember next.
fn warn_state_problems(
    problems: &[crate::store::StateProblem],
    before: &HashMap<PathBuf, Vec<u8>>,
) -> HashMap<PathBuf, Vec<u8>> {
    let mut now = HashMap::new();
    for p in problems {
        let seen = p
            .bytes
            .as_ref()
            .is_some_and(|b| before.get(&p.file) == Some(b));
        if !seen {
            tracing::warn!(file = %p.file.display(), "state.json not published: {}", p.why);
        }
        if let Some(b) = &p.bytes {
            now.insert(p.file.clone(), b.clone());
        }
    }
    now
}

/// Publishes once before serving: a `registry.json` found there (another
/// writer's, or one published before a crash) is ingested first, so no
/// later publish overwrites it unread.
async fn first_publish(shared: &Arc<Shared>) {
    if shared.store.options().export_path.is_none() {
        return;
    }
    let store = shared.store.clone();
    let done = tokio::task::spawn_blocking(move || {
        store.publish_registry(crate::export::PublishOptions::default().lock_timeout)
    })
    .await;
    match done {
        Ok(Ok(p)) => {
            if p.ingested > 0 {
                tracing::info!(
                    changes = p.ingested,
                    "ingested another writer's registry.json and state.json changes"
                )
            }
            warn_state_problems(&p.state_problems, &HashMap::new());
        }
        Ok(Err(e)) => tracing::warn!("publishing registry.json at start failed: {e}"),
        Err(e) => tracing::warn!("publishing registry.json at start failed: {e}"),
    }
}

/// The `too_many_connections` line, in one non-blocking write, and close: a
/// refusal costs no task and never waits on the peer.
fn refuse(stream: &tokio::net::UnixStream, n: usize, observer: bool) {
    let class = if observer { "observer" } else { "writer" };
    let msg = format!("too many {class} connections ({n} open): try again later");
    let e = ErrorReply::new(code::TOO_MANY_CONNECTIONS, msg, 1);
    let mut line = serde_json::to_vec(&conn::error_doc(serde_json::Value::Null, &e))
        .expect("a JSON value always serializes");
    line.push(b'\n');
    let _ = stream.try_write(&line);
}

/// The daemon's own origin for the events its duties append.
/// Runs `f` on the blocking pool every `every` (first after one period).
fn every(
    every: Duration,
    shared: &Arc<Shared>,
    f: impl Fn(&Shared) + Send + Sync + 'static,
) -> tokio::task::JoinHandle<()> {
    let shared = shared.clone();
    let f = Arc::new(f);
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            tick.tick().await;
            let (s, f) = (shared.clone(), f.clone());
            let _ = tokio::task::spawn_blocking(move || f(&s)).await;
        }
    })
}

fn start_duties(shared: &Arc<Shared>) -> Vec<tokio::task::JoinHandle<()>> {
    let mut duties = Vec::new();
    // A replica sweeps under the fleet's lease (`replica::Replica::start_duties`);
    // it publishes registry.json locally, and its auto-compaction compacts
    // the fleet's stream under the fleet's compactor lock (docs/scaling.md §6).
    let local = shared.replica.is_none();
    if let (Some(p), true) = (shared.opts.sweep_every, local) {
        duties.push(every(p, shared, |s| {
            match with_origin(own_origin(), || s.store.sweep(None, &ProcProbe)) {
                Ok(changes) if !changes.is_empty() => s.committed.notify_waiters(),
                Ok(_) => {}
                Err(e) => tracing::warn!("periodic sweep failed: {e}"),
            }
        }));
    }
    if let Some(p) = shared.opts.probe_every {
        duties.push(super::reach::start(shared, p));
    }
    if let (Some(p), Some(_)) = (
        shared.opts.publish_every,
        shared.store.options().export_path.as_ref(),
    ) {
        // Published by `first_publish` at this LSN; the state.json files
        // it left as they were (warned about once per content).
        let published = Mutex::new((shared.store.applied_lsn(), HashMap::new()));
        duties.push(every(p, shared, move |s| {
            let lsn = s.store.applied_lsn();
            let mut guard = published.lock().unwrap_or_else(|e| e.into_inner());
            let (last, bad) = &mut *guard;
            // Another writer's change is ingested within one period too
            // (files read only when the fold alone does not call for it).
            let due =
                lsn != *last || s.store.registry_changed() || s.store.state_files_changed(bad);
            if due {
                match s
                    .store
                    .publish_registry(crate::export::PublishOptions::default().lock_timeout)
                {
                    Ok(p) => {
                        if p.ingested > 0 {
                            s.committed.notify_waiters();
                        }
                        *last = p.lsn;
                        *bad = warn_state_problems(&p.state_problems, bad);
                    }
                    Err(e) => tracing::warn!("publishing registry.json failed: {e}"),
                }
            }
            s.publish_rounds.fetch_add(1, Ordering::Relaxed);
        }));
    }
    if let Some(p) = shared.opts.compact_every {
        let auto = Mutex::new(AutoCompactor::new(
            AutoPolicy::default(),
            CompactOptions::default(),
        ));
        duties.push(every(p, shared, move |s| {
            let mut auto = auto.lock().unwrap_or_else(|e| e.into_inner());
            let now = Timestamp::now();
            // A replica's markers name this daemon as who asked.
            match with_origin(own_origin(), || s.store.maybe_compact(&mut auto, now)) {
                Ok(Some(_)) => s.committed.notify_waiters(),
                Ok(None) => {}
                Err(e) => tracing::warn!("auto-compaction failed: {e}"),
            }
            s.compaction_rounds.fetch_add(1, Ordering::Relaxed);
        }));
    }
    duties
}
