//! In-memory entry points for the fuzz targets (`tests/fuzz/`) and their
//! stable replay test (`tests/fuzz_regressions.rs`): the daemon's request
//! framing and parsers, which it otherwise reaches only through a socket.
//! (The engine's own entry points, segment recovery and snapshot loading,
//! are `agentlog_core::fuzzing`.)
//!
//! **Not a stable API.** Hidden from the docs; it follows the internals it
//! exposes and may change or go away with them.

/// One frame of the daemon's line reader: a request line (terminator and
/// a trailing `\r` removed), or the over-long line that closes a connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestFrame {
    Line(Vec<u8>),
    TooLong,
}

/// Splits `input` into request lines as a connection reads it, with lines
/// limited to `max` bytes and the reader's buffer `buffer` bytes wide (so
/// lines straddle buffer refills). Stops after an over-long line, as the
/// connection does.
pub fn request_frames(input: &[u8], max: usize, buffer: usize) -> Vec<RequestFrame> {
    use crate::daemon::frame::{read_line, Frame};
    use std::future::Future;
    let mut reader = tokio::io::BufReader::with_capacity(buffer.max(1), input);
    let mut frames = Vec::new();
    let mut line = Vec::new();
    // Reading a byte slice never waits, so one poll of each future suffices.
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    loop {
        let frame = {
            let mut next = std::pin::pin!(read_line(&mut reader, &mut line, max));
            match next.as_mut().poll(&mut cx) {
                std::task::Poll::Ready(frame) => frame.expect("a slice reader does not fail"),
                std::task::Poll::Pending => unreachable!("a slice reader is always ready"),
            }
        };
        match frame {
            Frame::Line => frames.push(RequestFrame::Line(line.clone())),
            Frame::TooLong => {
                frames.push(RequestFrame::TooLong);
                return frames;
            }
            Frame::Eof => return frames,
        }
    }
}

/// What the general request parser made of a line: `(id, method, params)`,
/// or `(id, error code)`.
pub type ParsedRequest = Result<
    (
        serde_json::Value,
        String,
        serde_json::Map<String, serde_json::Value>,
    ),
    (serde_json::Value, String),
>;

/// What the heartbeat decoder took from a line, and the plain reply the
/// daemon writes for it at `reply_lsn`.
#[derive(Debug)]
pub struct HotRequest {
    pub id: serde_json::Value,
    pub name: String,
    pub pid: Option<u32>,
    pub at: Option<crate::time::Timestamp>,
    pub durable: bool,
    pub reply: Vec<u8>,
}

/// Runs one request line through the daemon's general parser and its
/// heartbeat decoder (`src/daemon/heartbeat.rs`).
pub fn parse_request(line: &[u8], reply_lsn: u64) -> (ParsedRequest, Option<HotRequest>) {
    use crate::daemon::conn;
    let general = conn::parse(line)
        .map(|r| (r.id, r.method, r.params))
        .map_err(|(id, e)| (id, e.code));
    let hot = crate::daemon::heartbeat::HeartbeatLine::decode(line).map(|hb| {
        let mut reply = Vec::new();
        crate::daemon::heartbeat::write_result(&hb.id, &hb.params.name, reply_lsn, &mut reply);
        HotRequest {
            id: hb.id.clone(),
            name: hb.params.name.to_string(),
            pid: hb.params.pid,
            at: hb.params.at,
            durable: hb.params.durable,
            reply,
        }
    });
    (general, hot)
}
