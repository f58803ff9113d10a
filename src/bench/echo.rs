//! The protocol's own bound for `bench clients --echo`: a bare tokio
//! JSON-lines server on a Unix socket that speaks the daemon's framing and
//! request grammar and answers every request with a heartbeat-shaped
//! result, touching no store. It decodes and answers a heartbeat line with
//! the daemon's own hot-path code (any other line with the general request
//! parser), and buffers replies, flushing when no further request is
//! already buffered, as the daemon does: so the ratio daemon / echo is the
//! share of the socket round trip the store itself costs.

use agentlog::internals::wire::{
    self as frame, error_doc, parse, send, write_result, Frame, HeartbeatLine,
};
use anyhow::Context;
use serde_json::{json, Value};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::io::{AsyncWriteExt, BufReader, BufWriter};
use tokio::net::{UnixListener, UnixStream};
use tokio::signal::unix::{signal, SignalKind};

/// Longest request line the echo server reads (the daemon's default).
const MAX_LINE: usize = 1 << 20;

/// Serves the echo protocol on `socket` until SIGTERM or SIGINT; `ready` is
/// called once it accepts. The socket file is removed on the way out.
pub fn serve_echo(socket: &Path, ready: impl FnOnce(&Path)) -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("agentlog-echo")
        .build()
        .context("starting the tokio runtime")?;
    let served = rt.block_on(async {
        let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
        let mut int = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
        let listener =
            UnixListener::bind(socket).with_context(|| format!("binding {}", socket.display()))?;
        let answered = Arc::new(AtomicU64::new(0));
        ready(socket);
        loop {
            tokio::select! {
                _ = term.recv() => break,
                _ = int.recv() => break,
                accepted = listener.accept() => {
                    let Ok((stream, _)) = accepted else { continue };
                    tokio::spawn(echo_conn(stream, answered.clone()));
                }
            }
        }
        anyhow::Ok(())
    });
    drop(rt);
    let removed =
        std::fs::remove_file(socket).with_context(|| format!("removing {}", socket.display()));
    served?;
    removed
}

/// One connection: parse each line as the daemon does, answer it in order.
async fn echo_conn(stream: UnixStream, answered: Arc<AtomicU64>) {
    let (rd, wr) = stream.into_split();
    let mut rd = BufReader::with_capacity(64 << 10, rd);
    let mut wr = BufWriter::with_capacity(64 << 10, wr);
    let mut line = Vec::new();
    let mut reply = Vec::with_capacity(128);
    loop {
        if rd.buffer().is_empty() && wr.flush().await.is_err() {
            return;
        }
        match frame::read_line(&mut rd, &mut line, MAX_LINE).await {
            Ok(Frame::Line) => {}
            Ok(Frame::Eof) => {
                let _ = wr.flush().await;
                return;
            }
            Ok(Frame::TooLong) | Err(_) => return,
        }
        if let Some(hb) = HeartbeatLine::decode(&line) {
            reply.clear();
            let lsn = answered.fetch_add(1, Ordering::Relaxed) + 1;
            write_result(&hb.id, &hb.params.name, lsn, &mut reply);
            if wr.write_all(&reply).await.is_err() {
                return;
            }
            continue;
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let doc = match parse(&line) {
            Ok(req) => {
                let lsn = answered.fetch_add(1, Ordering::Relaxed) + 1;
                let agent = req.params.get("name").cloned().unwrap_or(Value::Null);
                json!({"id": req.id, "result": {"agent": agent, "lsn": lsn}})
            }
            Err((id, e)) => error_doc(id, &e),
        };
        if send(&mut wr, &doc).await.is_err() {
            return;
        }
    }
}
