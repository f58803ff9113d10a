//! `agentlog mcp`: the registry as an MCP server over stdio, on the
//! official Rust SDK (`rmcp`), for coding agents (Claude Code, Codex,
//! Cursor, Gemini CLI, …) that use tools through the Model Context
//! Protocol.
//!
//! Each tool call and resource read is one store command, run as the CLI
//! runs it: through the daemon when one serves the store, else directly
//! (`backend`). The tools and their schemas are in `tools`, the resources
//! and their subscriptions in `resources`, the protocol handler in
//! `server`, and how presence follows the session in `session`.
//!
//! Invariants: stdout carries only the protocol (commands print into
//! buffers; logs go to stderr); the server serves one client and ends when
//! its stdin closes or on SIGTERM, SIGINT or SIGHUP, and then, always,
//! ends the presence of the agents the session registered.

mod backend;
mod resources;
mod server;
mod session;
mod tools;

use anyhow::{Context, Result};
use clap::Args;
use rmcp::ServiceExt;
use server::Server;
use session::Session;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, Args)]
pub struct McpArgs {
    /// The MCP host's pid, recorded as the process of the agents registered
    /// through this server [default: the process that started it]
    #[arg(long, value_name = "PID")]
    pub host_pid: Option<u32>,
}

/// Serves the store of `dir` to the MCP client on stdin/stdout until it
/// goes away.
pub fn run(dir: PathBuf, args: McpArgs) -> Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("agentlog-mcp")
        .enable_all()
        .build()
        .context("starting the MCP server's runtime")?;
    let backend = Arc::new(backend::Backend::new(&dir));
    let session = Arc::new(Session::new(args.host_pid));
    let server = Server {
        backend: Arc::clone(&backend),
        session: Arc::clone(&session),
        subscriptions: resources::Subscriptions::new(dir),
    };
    let served = runtime.block_on(async move {
        let service = server
            .serve(rmcp::transport::stdio_pipes())
            .await
            .context("the MCP client's initialize")?;
        let stop = service.cancellation_token();
        tokio::select! {
            quit = service.waiting() => {
                tracing::debug!("mcp: session over: {quit:?}");
            }
            signal = terminated() => {
                tracing::debug!("mcp: {signal}: ending the session");
                stop.cancel();
            }
        }
        anyhow::Ok(())
    });
    // The client is gone (or never initialized): its agents' presence ends.
    let ended = session.end(&backend);
    tracing::debug!("mcp: marked idle: {ended:?}");
    // A blocking call still running (a direct read's last slice) is not
    // waited for: the process ends now.
    runtime.shutdown_timeout(Duration::from_millis(200));
    served.map(|()| ExitCode::SUCCESS)
}

/// Resolves on SIGTERM, SIGINT or SIGHUP (naming it).
async fn terminated() -> &'static str {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int), Ok(mut hup)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
        signal(SignalKind::hangup()),
    ) else {
        // No signal handling: the session ends only with stdin.
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = int.recv() => "SIGINT",
        _ = hup.recv() => "SIGHUP",
    }
}
