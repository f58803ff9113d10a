//! `serve --http ADDR`: the operator's view, on axum over the daemon's tokio
//! runtime. `/metrics` (Prometheus text), `/healthz`, `/readyz`, the live
//! page at `/` (files embedded with `include_str!`, no build step, nothing
//! fetched from elsewhere), and the same data for scripts under `/api/`
//! (PROTOCOL.md, "HTTP").
//!
//! Invariants: nothing here writes; nothing of the registry reaches a
//! caller the daemon cannot name ([`auth`]: the owner's token, else only the
//! public paths), and every request must name this server in `Host`; the
//! page puts every registry string into the DOM as text, never as markup,
//! and its Content-Security-Policy forbids inline script; connections are
//! capped and timed out ([`listen`]); a slow HTTP client is a watcher like
//! any other and never makes the writer wait.

pub mod auth;
mod listen;
mod metrics;
mod sse;

use super::server::Shared;
use super::{code, ErrorReply, ServeError, ServeResult};
use axum::extract::{Path, Query, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use metrics_exporter_prometheus::PrometheusHandle;
use serde_json::{json, Map, Value};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::net::TcpListener;
use tokio::sync::broadcast;

pub(crate) use metrics::REFUSED;

/// Seconds of heartbeats/s history kept for the page's chart.
pub const RATE_HISTORY: usize = 300;

/// What the HTTP handlers share.
pub(crate) struct Http {
    shared: Arc<Shared>,
    prometheus: PrometheusHandle,
    /// `(unix ms, heartbeats in the second before)`, oldest first.
    rates: Mutex<VecDeque<(u64, u64)>>,
    rate_tx: broadcast::Sender<(u64, u64)>,
    /// The owner's token (`auth`).
    token: String,
    /// Open event streams (`/api/events`, `/api/heartbeats`).
    sse: AtomicUsize,
}

/// What `bind` prepares: the listener, the metrics recorder and the token.
pub(crate) struct Bound {
    listener: TcpListener,
    prometheus: PrometheusHandle,
    token: String,
}

impl Bound {
    pub fn local_addr(&self) -> std::io::Result<std::net::SocketAddr> {
        self.listener.local_addr()
    }
}

/// Binds `addr` (before the daemon reports ready, so a bad address fails
/// `serve`), installs the metrics recorder and loads (or makes) the store's
/// token file.
pub(crate) async fn bind(addr: std::net::SocketAddr, dir: &std::path::Path) -> ServeResult<Bound> {
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|source| ServeError::Http {
            addr,
            what: "cannot listen",
            source,
        })?;
    let token = auth::load_or_create(dir)?;
    Ok(Bound {
        listener,
        prometheus: metrics::install()?,
        token,
    })
}

/// Serves until the daemon starts shutting down; also samples heartbeats/s
/// and keeps the recorder's histograms bounded. Returns the tasks to abort
/// at shutdown.
pub(crate) fn start(bound: Bound, shared: Arc<Shared>) -> Vec<tokio::task::JoinHandle<()>> {
    let (rate_tx, _) = broadcast::channel(64);
    let http = Arc::new(Http {
        shared: shared.clone(),
        prometheus: bound.prometheus,
        rates: Mutex::new(VecDeque::with_capacity(RATE_HISTORY)),
        rate_tx,
        token: bound.token,
        sse: AtomicUsize::new(0),
    });
    let app = Router::new()
        .route("/", get(page_html))
        .route("/page.js", get(page_js))
        .route("/page.css", get(page_css))
        .route("/metrics", get(metrics_text))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/api/agents", get(agents))
        .route("/api/agents/{name}/audit", get(audit))
        .route("/api/events", get(sse::events))
        .route("/api/heartbeats", get(sse::heartbeats))
        .layer(axum::middleware::from_fn_with_state(http.clone(), guard))
        .with_state(http.clone());
    let server = tokio::spawn(listen::accept_loop(
        bound.listener,
        app,
        shared,
        Arc::new(AtomicUsize::new(0)),
    ));
    vec![server, tokio::spawn(sample_rates(http))]
}

/// Every request: `Host` must name this server (421 otherwise), and a
/// path that is not public needs the owner's token (401 otherwise).
async fn guard(State(http): State<Arc<Http>>, req: Request, next: Next) -> Response {
    let host = req
        .headers()
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .or_else(|| req.uri().authority().map(|a| a.as_str()));
    let hosts = &http.shared.opts.http_hosts;
    if !host.is_some_and(|h| auth::host_allowed(h, hosts)) {
        let msg = format!(
            "Host {:?} does not name this server: use its IP address or localhost \
             (serve --http-host NAME allows a name)",
            host.unwrap_or("")
        );
        return error_response(&ErrorReply::new(code::MISDIRECTED, msg, 1));
    }
    if !auth::is_public(req.uri().path()) {
        let shown = auth::shown_token(
            req.headers()
                .get(header::AUTHORIZATION)
                .map(HeaderValue::as_bytes),
            req.uri().query(),
        );
        if !shown.is_some_and(|t| auth::same_token(t, http.token.as_bytes())) {
            let msg = format!(
                "{} shows registry data: it needs the store's token (the file {} in the \
                 store folder, readable by its owner) as `Authorization: Bearer TOKEN`, \
                 or open the page as /#token=TOKEN",
                req.uri().path(),
                auth::TOKEN_FILE
            );
            let mut r = error_response(&ErrorReply::new(code::UNAUTHORIZED, msg, 1));
            r.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            return r;
        }
    }
    next.run(req).await
}

/// One open event stream, counted against `max_sse` while it lives.
pub(crate) struct SseSlot(Arc<Http>);

impl SseSlot {
    /// A slot, or the `too_many_connections` error when all are taken.
    pub fn take(http: &Arc<Http>) -> Result<SseSlot, ErrorReply> {
        let n = http.sse.fetch_add(1, Ordering::AcqRel);
        let slot = SseSlot(http.clone());
        if n >= http.shared.opts.max_sse {
            let msg = format!("too many event streams ({n} open): try again later");
            return Err(ErrorReply::new(code::TOO_MANY_CONNECTIONS, msg, 1));
        }
        Ok(slot)
    }
}

impl Drop for SseSlot {
    fn drop(&mut self) {
        self.0.sse.fetch_sub(1, Ordering::AcqRel);
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Every second: heartbeats appended in the last second, into the history
/// and to the page's streams; then the recorder's upkeep (drains histogram
/// samples into buckets, so memory stays bounded without scrapes).
async fn sample_rates(http: Arc<Http>) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last = crate::telemetry::heartbeats();
    loop {
        tick.tick().await;
        let now = crate::telemetry::heartbeats();
        let sample = (now_ms(), now - last);
        last = now;
        {
            let mut r = http.rates.lock().unwrap_or_else(|e| e.into_inner());
            if r.len() == RATE_HISTORY {
                r.pop_front();
            }
            r.push_back(sample);
        }
        let _ = http.rate_tx.send(sample);
        http.prometheus.run_upkeep();
    }
}

/// The page's files, with a policy that allows only this origin's script
/// and style: a registry string that slipped into markup could not run.
fn page_file(body: &'static str, kind: &'static str) -> Response {
    let mut r = (StatusCode::OK, body).into_response();
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'",
        ),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    r
}

async fn page_html() -> Response {
    page_file(include_str!("page/index.html"), "text/html; charset=utf-8")
}
async fn page_js() -> Response {
    page_file(
        include_str!("page/page.js"),
        "text/javascript; charset=utf-8",
    )
}
async fn page_css() -> Response {
    page_file(include_str!("page/page.css"), "text/css; charset=utf-8")
}

/// An error as JSON, with the HTTP status its code maps to.
fn error_response(e: &ErrorReply) -> Response {
    let status = match e.code.as_str() {
        code::USAGE | code::BAD_REQUEST => StatusCode::BAD_REQUEST,
        code::NOT_FOUND | code::REFUSED => StatusCode::NOT_FOUND,
        code::UNAUTHORIZED => StatusCode::UNAUTHORIZED,
        code::MISDIRECTED => StatusCode::MISDIRECTED_REQUEST,
        code::SHUTTING_DOWN | code::TOO_MANY_CONNECTIONS => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    (status, Json(json!({ "error": e }))).into_response()
}

/// Runs blocking work on the blocking pool; a panic becomes a 500.
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, ErrorReply> + Send + 'static,
) -> Result<T, Response> {
    match tokio::task::spawn_blocking(f).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(error_response(&e)),
        Err(e) => Err(error_response(&ErrorReply::new(
            code::FAILED,
            format!("internal error: {e}"),
            1,
        ))),
    }
}

async fn metrics_text(State(http): State<Arc<Http>>) -> Response {
    let h = http.clone();
    let text = blocking(move || {
        metrics::render(&h.prometheus, &h.shared).map_err(|e| ErrorReply::from_error(&e, false))
    })
    .await;
    match text {
        Ok(t) => (
            [(
                header::CONTENT_TYPE,
                "text/plain; version=0.0.4; charset=utf-8",
            )],
            t,
        )
            .into_response(),
        Err(r) => r,
    }
}

/// Alive: the process answers.
async fn healthz() -> Json<Value> {
    Json(json!({"ok": true}))
}

/// Ready: the store is open (the daemon is not closing it) and its writer
/// is not poisoned; otherwise 503 with the reasons.
async fn readyz(State(http): State<Arc<Http>>) -> Response {
    let shared = &http.shared;
    let closing = *shared.shutdown.borrow();
    match readiness(closing, shared.store.log().poisoned()) {
        Ok(()) => {
            let lsn = shared.store.applied_lsn();
            let mut body = json!({"ready": true, "last_lsn": lsn});
            // A replica that refused stream records serves on (refusing the
            // fleet's traffic on every host would stop it), and says so.
            if let Some(r) = &shared.replica {
                body["refused"] = r.refused();
            }
            (StatusCode::OK, Json(body)).into_response()
        }
        Err(reasons) => {
            let mut body = json!({"ready": false, "reasons": reasons});
            if let Some(r) = &shared.replica {
                body["refused"] = r.refused();
            }
            (StatusCode::SERVICE_UNAVAILABLE, Json(body)).into_response()
        }
    }
}

/// Why the daemon is not ready, if it is not.
fn readiness(closing: bool, poisoned: Option<&str>) -> Result<(), Vec<String>> {
    let mut reasons = Vec::new();
    if closing {
        reasons.push("the daemon is shutting down: the store is being closed".to_string());
    }
    if let Some(why) = poisoned {
        reasons.push(format!(
            "the log's writer is poisoned (a sync failed; restart the daemon to recover): {why}"
        ));
    }
    if reasons.is_empty() {
        Ok(())
    } else {
        Err(reasons)
    }
}

/// Every agent (finished ones too) as `list --json` rows, with the LSN they
/// are current at: `/api/events?changes=true&from=<lsn + 1>` continues them.
async fn agents(State(http): State<Arc<Http>>) -> Response {
    let shared = http.shared.clone();
    let doc = blocking(move || {
        let d = shared.dispatch.clone();
        Ok(shared.store.with_state(|s, lsn| {
            let rows: Vec<Value> = s
                .agents()
                .iter()
                .map(|a| {
                    let mut row = d.agent_json(a);
                    crate::registry::runtime::json::merge_into(&mut row, s.runtime(&a.name), a.pid);
                    // HTTP serves only what an observer may see.
                    row["actions"] = json!(["observe"]);
                    row
                })
                .collect();
            json!({"lsn": lsn, "agents": rows})
        }))
    })
    .await;
    match doc {
        Ok(v) => Json(v).into_response(),
        Err(r) => r,
    }
}

/// `audit --json` of one agent (`?limit=N` keeps the newest N entries).
async fn audit(
    State(http): State<Arc<Http>>,
    Path(name): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let shared = http.shared.clone();
    let limit = match q.get("limit").map(|l| l.parse::<usize>()) {
        None => None,
        Some(Ok(n)) => Some(n),
        Some(Err(_)) => {
            let msg = format!(
                "/api/agents/{name}/audit: `limit` must be a non-negative integer, not {:?}",
                q["limit"]
            );
            return error_response(&ErrorReply::new(code::USAGE, msg, 2));
        }
    };
    let doc = blocking(move || {
        let mut params = Map::new();
        params.insert("name".into(), Value::String(name));
        let (mut doc, _) = shared.dispatch.call(&shared.store, "audit", &params)?;
        if let (Some(n), Some(entries)) = (limit, doc["events"].as_array_mut()) {
            let cut = entries.len().saturating_sub(n);
            entries.drain(..cut);
        }
        Ok(doc)
    })
    .await;
    match doc {
        Ok(v) => Json(v).into_response(),
        Err(r) => r,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::server::Shared;
    use crate::daemon::{access::Access, durable::Syncer, Dispatch, Outcome, ServeOptions};
    use crate::model::Agent;
    use crate::registry::codec::Origin;
    use crate::registry::{Event, Lsn, Registration};
    use crate::store::{Store, StoreOptions};
    use tokio::sync::Notify;

    /// `/readyz` needs no operation methods.
    struct NoMethods;

    impl Dispatch for NoMethods {
        fn knows(&self, _: &str) -> bool {
            false
        }
        fn read_only(&self, _: &str) -> bool {
            true
        }
        fn call(&self, _: &Arc<Store>, m: &str, _: &Map<String, Value>) -> Outcome {
            Err(ErrorReply::new(
                code::FAILED,
                format!("{m}: no methods here"),
                1,
            ))
        }
        fn event_json(&self, _: Lsn, _: &Event, _: Option<Origin>) -> Value {
            Value::Null
        }
        fn agent_json(&self, a: &Agent) -> Value {
            json!(a.name)
        }
        fn applied_text(&self, agent: &str, lsn: Lsn, what: &str, _: bool) -> String {
            format!("{agent}: {what} {lsn}")
        }
    }

    async fn ready(http: &Arc<Http>) -> (StatusCode, Value) {
        let r = readyz(State(http.clone())).await;
        let status = r.status();
        let body = axum::body::to_bytes(r.into_body(), 1 << 20).await.unwrap();
        (status, serde_json::from_slice(&body).unwrap())
    }

    /// A real poisoning: the log's injected sync failure (the path a failed
    /// `msync`/`fsync` takes) under a durable command, then `/readyz`.
    #[tokio::test]
    async fn readyz_is_503_with_the_reason_once_a_sync_failure_poisons_the_writer() {
        let dir = tempfile::tempdir().unwrap();
        let mut opts = StoreOptions::default();
        opts.log.faults.fail_syncs = true;
        let store = Arc::new(Store::open(dir.path(), opts).unwrap());
        let (_stop, shutdown) = tokio::sync::watch::channel(false);
        let shared = Arc::new(Shared {
            syncer: Arc::new(Syncer::new(store.log().synced_lsn())),
            store: store.clone(),
            dispatch: Arc::new(NoMethods),
            opts: ServeOptions::default(),
            access: Access::new(0, Vec::new(), Vec::new()),
            committed: Notify::new(),
            shutdown,
            store_id: "test".into(),
            connections: AtomicUsize::new(0),
            observers: AtomicUsize::new(0),
            writers: AtomicUsize::new(0),
            lagged: AtomicUsize::new(0),
            watchers: AtomicUsize::new(0),
            http_addr: None,
            waiting_reads: AtomicUsize::new(0),
            compaction_rounds: std::sync::atomic::AtomicU64::new(0),
            publish_rounds: std::sync::atomic::AtomicU64::new(0),
            replica: None,
        });
        let prometheus = metrics_exporter_prometheus::PrometheusBuilder::new()
            .build_recorder()
            .handle();
        let (rate_tx, _) = broadcast::channel(1);
        let http = Arc::new(Http {
            shared,
            prometheus,
            rates: Mutex::default(),
            rate_tx,
            token: "t".into(),
            sse: AtomicUsize::new(0),
        });
        assert_eq!(
            ready(&http).await,
            (StatusCode::OK, json!({"ready": true, "last_lsn": 0}))
        );

        let failed = store.register(Registration::new("w1", "claude", "/w"), None);
        assert!(failed.is_err(), "the durable register must fail its sync");
        let (status, body) = ready(&http).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{body}");
        assert_eq!(body["ready"], false, "{body}");
        let reasons = body["reasons"].as_array().unwrap();
        assert_eq!(reasons.len(), 1, "{body}");
        let why = reasons[0].as_str().unwrap();
        assert!(why.contains("poisoned") && why.contains("restart"), "{why}");
        assert!(why.contains(store.log().poisoned().unwrap()), "{why}");
    }

    #[test]
    fn not_ready_says_why() {
        assert_eq!(readiness(false, None), Ok(()));
        let r = readiness(false, Some("msync of log/0001.seg: EIO")).unwrap_err();
        assert_eq!(r.len(), 1);
        assert!(r[0].contains("poisoned") && r[0].contains("EIO"), "{r:?}");
        assert_eq!(readiness(true, Some("x")).unwrap_err().len(), 2);
    }
}
