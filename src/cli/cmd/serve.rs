//! `agentlog serve`: one process owns the store and serves PROTOCOL.md over
//! `<DIR>/agentlog.sock` (optionally HTTP), running every CLI command sent
//! to it with the same code ([`CliDispatch`]); `--nats` makes the store the
//! mirror of a fleet's stream (docs/scaling.md).

use crate::cli::remote::{scalar, CliDispatch};
use crate::cli::Usage;
use agentlog::cluster::{ClusterOptions, FleetSubjects};
use agentlog::daemon::{server, ReplicaOptions, ServeOptions};
use agentlog::store::StoreOptions;
use anyhow::{Context, Result};
use clap::Args;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, Args)]
pub struct Serve {
    /// Also let this uid write (repeatable); others only observe
    #[arg(long, value_name = "UID")]
    pub allow_uid: Vec<u32>,
    /// Also let members of this gid write (repeatable)
    #[arg(long, value_name = "GID")]
    pub allow_gid: Vec<u32>,
    /// Longest request line, bytes
    #[arg(long, value_name = "BYTES", default_value_t = 1 << 20)]
    pub max_line: usize,
    /// Socket connections of writers (fitted to the descriptors available)
    #[arg(long, value_name = "N", default_value_t = 4096)]
    pub max_connections: usize,
    /// Socket connections of observers (peers that may not write)
    #[arg(long, value_name = "N", default_value_t = 256)]
    pub max_observers: usize,
    /// Open watches (socket and /api/events)
    #[arg(long, value_name = "N", default_value_t = 1024)]
    pub max_watchers: usize,
    /// Open HTTP connections
    #[arg(long, value_name = "N", default_value_t = 256)]
    pub max_http_connections: usize,
    /// Open HTTP event streams
    #[arg(long, value_name = "N", default_value_t = 64)]
    pub max_sse: usize,
    /// Close connections idle this long
    #[arg(long, value_name = "SECS", default_value_t = 300)]
    pub idle_timeout: u64,
    /// Close a connection whose peer reads nothing this long while a reply waits
    #[arg(long, value_name = "SECS", default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..))]
    pub write_timeout: u64,
    /// An HTTP request's headers must arrive within this (also the keep-alive idle time)
    #[arg(long, value_name = "SECS", default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..))]
    pub http_idle_timeout: u64,
    /// Also accept this name in HTTP's Host header (repeatable; IP
    /// addresses and localhost always are)
    #[arg(long, value_name = "NAME")]
    pub http_host: Vec<String>,
    /// Items a watcher may have unsent before it gets `lagged`
    #[arg(long, value_name = "N", default_value_t = 4096)]
    pub watch_buffer: usize,
    /// Seconds between sweeps (0: never)
    #[arg(long, value_name = "SECS", default_value_t = 5)]
    pub sweep_every: u64,
    /// Probe agents' http:// and unix: endpoints this often, ms (0: never);
    /// outages are recorded when they start and end
    #[arg(long, value_name = "MS", default_value_t = 30_000)]
    pub probe_every_ms: u64,
    /// Give each endpoint probe this long, ms
    #[arg(long, value_name = "MS", default_value_t = 2_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub probe_timeout_ms: u64,
    /// Republish registry.json after a change at most this often, ms (0: never)
    #[arg(long, value_name = "MS", default_value_t = 1000)]
    pub publish_every_ms: u64,
    /// At shutdown, wait at most this long for registry locks another writer
    /// holds, then exit 0 with a warning (the log is durable), secs
    #[arg(long, value_name = "SECS", default_value_t = 30)]
    pub publish_lock_wait: u64,
    /// Also serve /metrics, /healthz, /readyz, the live page and /api over
    /// HTTP at this address (e.g. 127.0.0.1:9464; port 0 picks one)
    #[arg(long, value_name = "ADDR:PORT")]
    pub http: Option<std::net::SocketAddr>,
    /// Replicated mode: NATS servers of the cluster whose JetStream stream is
    /// the log of record; the store becomes its mirror (docs/scaling.md)
    #[arg(
        long,
        value_name = "URL[,URL...]",
        value_delimiter = ',',
        requires = "stream"
    )]
    pub nats: Vec<String>,
    /// Replicated mode: the fleet (its stream is AGENTLOG_<FLEET>)
    #[arg(long, alias = "fleet", value_name = "FLEET", requires = "nats")]
    pub stream: Option<String>,
    /// Replicated mode: this host's id (message ids, the sweeper lease)
    /// [default: the hostname]
    #[arg(long, value_name = "ID", requires = "nats")]
    pub host_id: Option<String>,
    /// Replicated mode: seconds the sweeper lease outlives its holder's
    /// last renewal (another host sweeps after that)
    #[arg(long, value_name = "SECS", default_value_t = 15, value_parser = clap::value_parser!(u64).range(1..))]
    pub lease_ttl: u64,
    /// Replicated mode: replicas of the stream when this daemon creates it
    #[arg(long, value_name = "N", default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=5))]
    pub replicas: u64,
}

/// `agentlog serve`.
pub fn run(dir: &Path, a: &Serve) -> Result<ExitCode> {
    // Request times come from the clients (`--at`, their AGENTLOG_NOW), never
    // from the daemon's environment. Done before any thread starts.
    // The heartbeat path bounds `at` by the clock the daemon started
    // with (its `$AGENTLOG_NOW`, captured here, else the system clock).
    let _ = agentlog::time::process_clock();
    std::env::remove_var("AGENTLOG_NOW");
    // A group-shared store's files, and the socket, keep its group.
    crate::ops::sharing::inherit_group(dir);
    let opts = StoreOptions {
        export_path: Some(agentlog::StoreLayout::new(dir).registry_json()),
        export_schema: agentlog::store::config::registry_schema(dir)
            .with_context(|| format!("cannot serve {}", dir.display()))?,
        ..StoreOptions::default()
    };
    let store = crate::ops::open_store_with(dir, false, opts)
        .with_context(|| format!("cannot serve {}", dir.display()))?;
    let replica = replica_options(dir, a)?;
    let group = std::fs::metadata(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .permissions()
        .mode()
        & 0o070
        != 0;
    let secs = |s: u64| (s > 0).then(|| Duration::from_secs(s));
    let sopts = ServeOptions {
        max_line: a.max_line,
        max_connections: a.max_connections,
        max_observers: a.max_observers,
        max_watchers: a.max_watchers,
        http_max_connections: a.max_http_connections,
        max_sse: a.max_sse,
        idle_timeout: Duration::from_secs(a.idle_timeout.max(1)),
        write_timeout: Duration::from_secs(a.write_timeout),
        http_idle_timeout: Duration::from_secs(a.http_idle_timeout),
        http_hosts: a.http_host.clone(),
        watch_buffer: a.watch_buffer,
        sweep_every: secs(a.sweep_every),
        publish_every: (a.publish_every_ms > 0).then(|| Duration::from_millis(a.publish_every_ms)),
        publish_lock_wait: Duration::from_secs(a.publish_lock_wait),
        probe_every: (a.probe_every_ms > 0).then(|| Duration::from_millis(a.probe_every_ms)),
        probe_timeout: Duration::from_millis(a.probe_timeout_ms),
        allow_uids: a.allow_uid.clone(),
        allow_gids: a.allow_gid.clone(),
        socket_mode: if group { 0o660 } else { 0o600 },
        http: a.http,
        replica,
        ..ServeOptions::default()
    };
    let dispatch = Arc::new(CliDispatch::new(dir));
    server::serve(store, dispatch, sopts, |path, http, replica| {
        println!(
            "agentlog serve: listening on {} (pid {})",
            path.display(),
            std::process::id()
        );
        if let Some(addr) = http {
            println!(
                "agentlog serve: http://{addr}/ (metrics at /metrics; registry data needs the \
                 token in {}: open http://{addr}/#token=TOKEN)",
                agentlog::daemon::http_token_path(dir).display()
            );
        }
        if let Some(r) = replica {
            println!(
                "agentlog serve: replica of fleet `{}` (stream {}) as host `{}`: local log at \
                 sequence {}, {} events folded on open; mirroring from sequence {}",
                scalar(&r["fleet"]),
                scalar(&r["stream"]),
                scalar(&r["host"]),
                r["resumed_at"],
                r["open"],
                r["resumed_at"].as_u64().unwrap_or(0) + 1
            );
        }
        let _ = std::io::stdout().flush();
    })?;
    Ok(ExitCode::SUCCESS)
}

/// `serve --nats`: how to join the cluster; a replica's store is refused
/// without it (its writes go through the stream only).
fn replica_options(dir: &Path, a: &Serve) -> Result<Option<ReplicaOptions>> {
    let Some(fleet) = &a.stream else {
        if let Some(fleet) = agentlog::store::replica_of(dir)? {
            return Err(Usage(format!(
                "{} is a replica of fleet `{fleet}`: serve it with --nats URLS --stream {fleet}",
                dir.display()
            ))
            .into());
        }
        return Ok(None);
    };
    FleetSubjects::new(fleet).map_err(|e| Usage(format!("--stream: {e}")))?;
    let host_id = match &a.host_id {
        Some(h) => h.clone(),
        None => std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .ok()
            .filter(|h| !h.is_empty())
            .ok_or_else(|| Usage("cannot read the hostname: pass --host-id ID".into()))?,
    };
    let mut cluster = ClusterOptions::new(a.nats.clone(), fleet, &host_id);
    cluster.replicas = a.replicas as usize;
    Ok(Some(ReplicaOptions {
        cluster,
        lease_ttl: Duration::from_secs(a.lease_ttl),
    }))
}
