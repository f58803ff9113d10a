//! The Server-Sent Events streams: `/api/events` is the socket's `watch`
//! (same producer, same items, same lag rule) framed as SSE, and
//! `/api/heartbeats` is the heartbeats/s history and then one sample a
//! second.
//!
//! Each `/api/events` item carries `id: <lsn>`, so a browser's EventSource
//! that reconnects (after `lagged`, or a dropped connection) sends
//! `Last-Event-ID` and resumes right after the last item it got: nothing
//! missed, nothing twice. With `latest=true` (changes mode; the page's
//! mode) the watch reads no records: it sends the rows that changed in the
//! served state, at most four times a second, then `present` or `removed`
//! (the watch module's `latest`); ids are still LSNs, so a reconnect resumes
//! the same way. The events of one record (a replica's heartbeat batch,
//! one `Heartbeat` event per beat at the batch's LSN) carry the id on the
//! last one only, so a reconnect inside such a group gets it whole again.

use super::{error_response, Http, SseSlot};
use crate::daemon::watch;
use crate::daemon::{code, ErrorReply};
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::stream::{self, Stream, StreamExt};
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast;

/// Record groups sent in one go at most (then the next batch).
const BATCH: usize = 4096;

fn usage(msg: String) -> ErrorReply {
    ErrorReply::new(code::USAGE, msg, 2)
}

fn flag(q: &HashMap<String, String>, key: &str) -> Result<bool, ErrorReply> {
    match q.get(key).map(String::as_str) {
        None | Some("false") | Some("0") => Ok(false),
        Some("true") | Some("1") | Some("") => Ok(true),
        Some(v) => Err(usage(format!(
            "/api/events: `{key}` must be true or false, not {v:?}"
        ))),
    }
}

/// The `watch` parameters of a query (and `Last-Event-ID`).
fn params(
    q: &HashMap<String, String>,
    headers: &HeaderMap,
) -> Result<Map<String, Value>, ErrorReply> {
    let mut p = Map::new();
    for key in q.keys() {
        // `token` is the caller's credential (`super::auth`), not a parameter.
        if !["from", "agent", "kinds", "changes", "latest", "token"].contains(&key.as_str()) {
            return Err(usage(format!(
                "/api/events: unknown parameter `{key}` (from, agent, kinds, changes, latest)"
            )));
        }
    }
    let lsn = |what: &str, v: &str| {
        v.trim().parse::<u64>().map_err(|_| {
            usage(format!(
                "/api/events: {what} must be an LSN (a non-negative integer), not {v:?}"
            ))
        })
    };
    if let Some(v) = q.get("from") {
        p.insert("from".into(), json!(lsn("`from`", v)?));
    }
    if let Some(last) = headers.get("last-event-id") {
        let v = String::from_utf8_lossy(last.as_bytes()).into_owned();
        // The item after it; no LSN follows the largest one (never wraps).
        let next = lsn("Last-Event-ID", &v)?.checked_add(1).ok_or_else(|| {
            usage(format!(
                "/api/events: Last-Event-ID {v:?} is the largest LSN: no item can follow it"
            ))
        })?;
        p.insert("from".into(), json!(next));
    }
    if let Some(a) = q.get("agent") {
        p.insert("agent".into(), json!(a));
    }
    if let Some(k) = q.get("kinds") {
        let kinds: Vec<&str> = k.split(',').filter(|s| !s.is_empty()).collect();
        p.insert("kinds".into(), json!(kinds));
    }
    if flag(q, "changes")? {
        p.insert("changes".into(), json!(true));
    }
    if flag(q, "latest")? {
        p.insert("latest".into(), json!(true));
    }
    Ok(p)
}

/// One watch item as an SSE event: its key (`change`, `event`, `error`,
/// `present`) is the event name, its LSN the id (`with_id`: the last item
/// of its record's group), the object the data.
fn sse_event(item: &watch::Item, with_id: bool) -> Event {
    let mut ev = Event::default().event(&item.key).data(&item.body);
    if let Some(lsn) = item.lsn.filter(|_| with_id) {
        ev = ev.id(lsn.to_string());
    }
    ev
}

/// `/api/events`: PROTOCOL.md, "HTTP".
pub(super) async fn events(
    State(http): State<Arc<Http>>,
    Query(q): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    let params = match params(&q, &headers) {
        Ok(p) => p,
        Err(e) => return error_response(&e),
    };
    let slot = match SseSlot::take(&http) {
        Ok(s) => s,
        Err(e) => return error_response(&e),
    };
    let watch = match watch::open(&http.shared, &params).await {
        Ok(w) => w,
        Err(e) => return error_response(&e),
    };
    let first = Event::default()
        .event("watching")
        .data(json!({"from": watch.from}).to_string());
    let rest = stream::unfold(Some(watch), move |state| async move {
        let mut watch: watch::Stream = state?;
        let Some(item) = watch.items.recv().await else {
            if watch.failed() {
                // Its last item was the log's error: nothing to add.
                return None;
            }
            let last = match watch.lagged() {
                Some(resume) => Event::default()
                    .event("lagged")
                    .data(json!({"resume_from": resume}).to_string()),
                None => {
                    let e = ErrorReply::new(code::SHUTTING_DOWN, "the daemon is shutting down", 1);
                    Event::default().event("end").data(json!(e).to_string())
                }
            };
            return Some((vec![last], None));
        };
        let mut batch = vec![item];
        while batch.len() < BATCH {
            match watch.items.try_recv() {
                Ok(i) => batch.push(i),
                Err(_) => break,
            }
        }
        let events = batch
            .iter()
            .flat_map(|group| {
                let last = group.items.len().saturating_sub(1);
                group
                    .items
                    .iter()
                    .enumerate()
                    .map(move |(i, item)| sse_event(item, i == last))
            })
            .collect();
        Some((events, Some(watch)))
    })
    .flat_map(stream::iter);
    respond(stream::once(async { first }).chain(rest), slot)
}

/// `/api/heartbeats`: `history` (the samples kept, oldest first), then a
/// `rate` event each second; each sample is `[unix ms, heartbeats]`.
pub(super) async fn heartbeats(State(http): State<Arc<Http>>) -> Response {
    let slot = match SseSlot::take(&http) {
        Ok(s) => s,
        Err(e) => return error_response(&e),
    };
    let rx = http.rate_tx.subscribe();
    let history: Vec<(u64, u64)> = http
        .rates
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .iter()
        .copied()
        .collect();
    let first = Event::default()
        .event("history")
        .data(json!(history).to_string());
    let stop = http.shared.shutdown.clone();
    let rest = stream::unfold((rx, stop), |(mut rx, mut stop)| async move {
        loop {
            let got = tokio::select! {
                _ = stop.wait_for(|s| *s) => None,
                r = rx.recv() => Some(r),
            };
            match got? {
                Ok(sample) => {
                    let ev = Event::default()
                        .event("rate")
                        .data(json!(sample).to_string());
                    return Some((ev, (rx, stop)));
                }
                Err(broadcast::error::RecvError::Lagged(_)) => continue,
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    });
    respond(stream::once(async { first }).chain(rest), slot)
}

/// An SSE response of `events`, with a keep-alive comment every 15 s; the
/// stream holds `slot` until it ends.
fn respond<S>(events: S, slot: SseSlot) -> Response
where
    S: Stream<Item = Event> + Send + 'static,
{
    Sse::new(events.map(move |e| {
        let _held = &slot;
        Ok::<_, Infallible>(e)
    }))
    .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
    .into_response()
}
