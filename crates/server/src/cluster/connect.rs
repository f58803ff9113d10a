//! How a node connects to the NATS cluster, and how it leaves a server that
//! stops answering (issue 27: failover within the stale bound,
//! docs/scaling.md §8). A paused or hung server keeps its TCP connection
//! open, so only unanswered pings reveal it: the client pings every
//! [`PING_EVERY`] and leaves after three unanswered ones. Each connection
//! attempt is bounded by [`CONNECT_TIMEOUT`] (a hung server accepts the TCP
//! connection and never says hello). A reconnect tries first the servers
//! it did not just leave, those with the fewest failed attempts first, in
//! turn: the client's default shuffle picked the hung server again about
//! every other time, and lost a whole attempt on it. Every connection made
//! is counted in a watch ([`Reconnects`]), so a publish still waiting for
//! its ack from the server the client left is resent at once on the new
//! one (same `Nats-Msg-Id`: stored once) rather than after its 2 s timeout.

use async_nats::{ConnectError, Event, ReconnectToServer, Server, ServerInfo};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::watch;

use super::{CONNECT_TIMEOUT, PING_EVERY};

/// Counts the connections the client made (the first included): a change
/// means the client is on a server again, maybe another one.
pub(crate) type Reconnects = watch::Receiver<u64>;

/// Connects to `servers` (retrying until one answers), with the failover
/// behaviour of the module docs.
pub(crate) async fn connect(
    servers: &[String],
) -> Result<(async_nats::Client, Reconnects), ConnectError> {
    let (connected, reconnects) = watch::channel(0u64);
    // The server the client was last sent to, as a URL.
    let current: Arc<Mutex<Option<String>>> = Arc::default();
    let turn = Arc::new(AtomicUsize::new(0));
    let client = async_nats::ConnectOptions::new()
        .retry_on_initial_connect()
        .ping_interval(PING_EVERY)
        .connection_timeout(CONNECT_TIMEOUT)
        .reconnect_to_server_callback(move |pool: Vec<Server>, _: ServerInfo| {
            let chosen = pick(&pool, &current, &turn);
            async move { chosen }
        })
        .event_callback(move |event| {
            if matches!(event, Event::Connected) {
                connected.send_modify(|n| *n += 1);
            }
            async move {
                // Where a failover's time goes (BENCHMARKS.md, failover).
                tracing::info!(%event, "nats connection");
            }
        })
        .connect(servers.to_vec())
        .await?;
    Ok((client, reconnects))
}

/// The next server to try: fewest failed attempts, then not the one the
/// client was last sent to, then in turn among equals.
fn pick(
    pool: &[Server],
    current: &Mutex<Option<String>>,
    turn: &AtomicUsize,
) -> Option<ReconnectToServer> {
    let mut current = current.lock().unwrap_or_else(|e| e.into_inner());
    let key = |s: &Server| {
        let url = s.addr.as_url_str();
        (s.failed_attempts, current.as_deref() == Some(url))
    };
    let best = pool.iter().map(key).min()?;
    let ties: Vec<&Server> = pool.iter().filter(|s| key(s) == best).collect();
    let chosen = ties[turn.fetch_add(1, Ordering::Relaxed) % ties.len()];
    *current = Some(chosen.addr.as_url_str().to_string());
    Some(ReconnectToServer {
        addr: chosen.addr.clone(),
        // The client's own backoff: none at first, growing with the
        // attempts (4 s at most).
        delay: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(url: &str, failed_attempts: usize) -> Server {
        Server {
            addr: url.parse().unwrap(),
            failed_attempts,
            did_connect: true,
            is_discovered: false,
            last_error: None,
        }
    }

    #[test]
    fn a_reconnect_tries_the_servers_it_did_not_just_leave_first() {
        let pool = [
            server("nats://127.0.0.1:4001", 0),
            server("nats://127.0.0.1:4002", 0),
            server("nats://127.0.0.1:4003", 0),
        ];
        let current = Mutex::new(Some(pool[1].addr.as_url_str().to_string()));
        let turn = AtomicUsize::new(0);
        for _ in 0..6 {
            let left = current.lock().unwrap().clone();
            let next = pick(&pool, &current, &turn).unwrap();
            assert_ne!(Some(next.addr.as_url_str().to_string()), left);
        }
        // A server that failed goes last, even the one just left before it.
        let pool = [
            server("nats://127.0.0.1:4001", 2),
            server("nats://127.0.0.1:4002", 0),
            server("nats://127.0.0.1:4003", 1),
        ];
        let current = Mutex::new(Some(pool[1].addr.as_url_str().to_string()));
        let next = pick(&pool, &current, &turn).unwrap();
        assert_eq!(next.addr.as_url_str(), pool[1].addr.as_url_str());
    }
}
