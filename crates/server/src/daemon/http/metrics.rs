//! `/metrics`: the Prometheus text format, rendered by
//! `metrics-exporter-prometheus` from the process's global `metrics`
//! recorder (installed once, by the first `serve --http` of the process).
//!
//! Two kinds of figures: what the writer records as it goes
//! ([`crate::telemetry`]: events by kind, latencies, batch sizes) and the
//! daemon's refusals ([`REFUSED`]), and what is read here at scrape time
//! from the store and the daemon (agents by status, messages, sessions,
//! connections, log size, snapshot age): those cost nothing until scraped.
//! README.md, "Metrics", lists every one; keep the two in step.

use super::super::server::Shared;
use super::super::{ServeError, ServeResult};
use crate::model::Status;
use crate::telemetry as t;
use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use std::sync::atomic::Ordering;
use std::sync::OnceLock;
use std::time::{Duration, SystemTime};

/// Requests answered with an error, by the error's code
/// (`agentlog_requests_refused_total{reason}`).
pub const REFUSED: &str = "agentlog_requests_refused_total";

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// Latency buckets, seconds: 1 µs to 5 s.
const SECONDS: &[f64] = &[
    1e-6, 2.5e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 0.01, 0.025,
    0.05, 0.1, 0.25, 0.5, 1.0, 5.0,
];
/// Records per group-commit sync.
const RECORDS: &[f64] = &[
    1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0, 512.0, 1024.0, 4096.0, 16384.0,
];

/// Installs the global recorder (once per process) and turns the writer's
/// hooks on; returns the handle that renders.
pub(crate) fn install() -> ServeResult<PrometheusHandle> {
    if let Some(h) = HANDLE.get() {
        return Ok(h.clone());
    }
    let buckets = |e: metrics_exporter_prometheus::BuildError| ServeError::Metrics(e.to_string());
    let recorder = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_duration_seconds".into()), SECONDS)
        .map_err(buckets)?
        .set_buckets_for_metric(Matcher::Full(t::GROUP_COMMIT_RECORDS.into()), RECORDS)
        .map_err(buckets)?
        .build_recorder();
    let handle = recorder.handle();
    metrics::set_global_recorder(recorder).map_err(|e| ServeError::Metrics(e.to_string()))?;
    describe();
    t::enable();
    Ok(HANDLE.get_or_init(|| handle).clone())
}

fn describe() {
    describe_counter!(t::EVENTS_APPENDED, "Events appended to the log, by kind.");
    describe_histogram!(
        t::APPEND_SECONDS,
        Unit::Seconds,
        "Time under the writer lock to encode, append and apply one command's events."
    );
    describe_histogram!(
        t::DURABLE_ACK_SECONDS,
        Unit::Seconds,
        "Time a durable write waited, after its append, for the fsync covering it."
    );
    describe_histogram!(
        t::FSYNC_SECONDS,
        Unit::Seconds,
        "Time of one group-commit msync of the active segment."
    );
    describe_histogram!(
        t::GROUP_COMMIT_RECORDS,
        "Records made durable by one group-commit sync."
    );
    describe_gauge!("agentlog_agents", "Registered agents, by status.");
    describe_gauge!(
        "agentlog_messages_live",
        "Messages held (not yet dropped or expired)."
    );
    describe_counter!(
        "agentlog_messages_dropped_total",
        "Messages the live-message cap dropped, over the log's life."
    );
    describe_gauge!("agentlog_sessions_open", "Open logical sessions.");
    describe_gauge!(
        "agentlog_outages_open",
        "Agents whose endpoint does not answer the daemon's probe (open outages)."
    );
    describe_gauge!(
        "agentlog_leases",
        "Attach leases held, by role (controller, observer)."
    );
    describe_counter!(
        crate::daemon::reach::PROBE_FAILURES,
        "Endpoint probes that failed since the daemon started."
    );
    describe_gauge!("agentlog_connections", "Open socket connections.");
    describe_gauge!(
        "agentlog_watchers",
        "Running watch streams (socket and HTTP)."
    );
    describe_counter!(
        "agentlog_watchers_lagged_total",
        "Watch streams ended with `lagged` since the daemon started."
    );
    describe_counter!(REFUSED, "Requests answered with an error, by error code.");
    describe_gauge!(
        "agentlog_log_bytes",
        Unit::Bytes,
        "Bytes of records in the log."
    );
    describe_gauge!("agentlog_log_segments", "Segment files of the log.");
    describe_gauge!("agentlog_last_lsn", "The last LSN applied.");
    describe_gauge!(
        "agentlog_snapshot_age_seconds",
        Unit::Seconds,
        "Age of the newest snapshot file (absent while there is none)."
    );
    describe_gauge!(
        t::COMPACTION_SECONDS,
        Unit::Seconds,
        "Wall time of the last compaction that changed the log."
    );
    describe_gauge!(
        t::COMPACTION_RECLAIMED,
        Unit::Bytes,
        "Log bytes the last compaction reclaimed."
    );
}

/// Reads the scrape-time figures into the recorder, then renders (blocking:
/// reads the state under its read lock and lists the snapshot folder).
pub(crate) fn render(handle: &PrometheusHandle, shared: &Shared) -> ServeResult<String> {
    let store = &shared.store;
    let (mut by_status, live, dropped, sessions, last) = store.with_state(|s, lsn| {
        let mut by_status = [0u64; Status::ALL.len()];
        for a in s.agents().iter() {
            if let Some(i) = Status::ALL.iter().position(|x| *x == a.status) {
                by_status[i] += 1;
            }
        }
        let live = s.messages().len();
        (by_status, live, s.drops_total(), s.sessions().len(), lsn)
    });
    let (outages, controllers, observers) = store.with_state(|s, _| {
        let mut counts = (0u64, 0u64, 0u64);
        for (_, rt) in s.runtimes().iter() {
            counts.0 += u64::from(rt.outage.as_ref().is_some_and(|o| o.is_open()));
            counts.1 += u64::from(rt.controller.is_some());
            counts.2 += rt.observers.len() as u64;
        }
        counts
    });
    metrics::gauge!("agentlog_outages_open").set(outages as f64);
    metrics::gauge!("agentlog_leases", "role" => "controller").set(controllers as f64);
    metrics::gauge!("agentlog_leases", "role" => "observer").set(observers as f64);
    for (i, st) in Status::ALL.iter().enumerate() {
        let n = std::mem::take(&mut by_status[i]);
        metrics::gauge!("agentlog_agents", "status" => st.as_str()).set(n as f64);
    }
    metrics::gauge!("agentlog_messages_live").set(live as f64);
    metrics::counter!("agentlog_messages_dropped_total").absolute(dropped);
    metrics::gauge!("agentlog_sessions_open").set(sessions as f64);
    metrics::gauge!("agentlog_last_lsn").set(last as f64);
    let conns = shared.connections.load(Ordering::Relaxed);
    metrics::gauge!("agentlog_connections").set(conns as f64);
    let watchers = shared.watchers.load(Ordering::Relaxed);
    metrics::gauge!("agentlog_watchers").set(watchers as f64);
    let lagged = shared.lagged.load(Ordering::Relaxed) as u64;
    metrics::counter!("agentlog_watchers_lagged_total").absolute(lagged);
    let log = store.log().stats();
    metrics::gauge!("agentlog_log_bytes").set(log.bytes as f64);
    metrics::gauge!("agentlog_log_segments").set(log.segments as f64);
    if let Some(age) = snapshot_age(store)? {
        metrics::gauge!("agentlog_snapshot_age_seconds").set(age.as_secs_f64());
    }
    Ok(handle.render())
}

/// Age of the newest snapshot file, from its modification time.
fn snapshot_age(store: &crate::store::Store) -> ServeResult<Option<Duration>> {
    let dir = store.snapshot_dir();
    let Some(newest) = agentlog_core::support::list_snapshots(&dir)?.pop() else {
        return Ok(None);
    };
    let modified = match std::fs::metadata(&newest.path).and_then(|m| m.modified()) {
        Ok(m) => m,
        // Replaced by a newer one meanwhile: the next scrape sees that.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(ServeError::file("reading", &newest.path)(e)),
    };
    Ok(Some(
        SystemTime::now()
            .duration_since(modified)
            .unwrap_or(Duration::ZERO),
    ))
}
