//! The blocking client of the daemon protocol (PROTOCOL.md).
//!
//! [`Client::connect`] tells "no daemon" (no socket file, or a socket nobody
//! listens on: connection refused) from every other failure; once connected
//! a call waits for its answer however long the daemon takes, so a busy
//! daemon never looks absent. Requests may be pipelined with
//! [`Client::send`] / [`Client::recv`].

use super::ErrorReply;
use serde_json::{json, Value};
use std::io::{self, BufRead, BufReader, BufWriter, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// No daemon serves the store (no socket, or connection refused).
    #[error("no daemon serves {}", .0.display())]
    NoDaemon(PathBuf),
    #[error("daemon socket {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// The daemon sent something that is not a response line.
    #[error("daemon socket {}: bad response: {what}", path.display())]
    Protocol { path: PathBuf, what: String },
    /// The daemon answered with an error.
    #[error("{}", .0.message)]
    Server(ErrorReply),
}

/// A successful answer: the result and the CLI's exit status for it.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    pub result: Value,
    pub exit: u8,
}

/// A connection to the daemon of one store.
pub struct Client {
    path: PathBuf,
    reader: BufReader<UnixStream>,
    writer: BufWriter<UnixStream>,
    next_id: u64,
    line: String,
}

impl Client {
    /// Connects to the daemon serving the store in `dir`. No socket file, a
    /// path that is not a directory, or a socket nobody listens on (a daemon
    /// that died) is [`ClientError::NoDaemon`].
    pub fn connect(dir: &Path) -> Result<Client, ClientError> {
        let path = super::socket_path(dir);
        let stream = match UnixStream::connect(&path) {
            Ok(s) => s,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::NotFound
                        | io::ErrorKind::ConnectionRefused
                        | io::ErrorKind::NotADirectory
                ) =>
            {
                return Err(ClientError::NoDaemon(dir.to_path_buf()))
            }
            Err(source) => return Err(ClientError::Io { path, source }),
        };
        let io = |source| ClientError::Io {
            path: path.clone(),
            source,
        };
        let writer = BufWriter::new(stream.try_clone().map_err(io)?);
        Ok(Client {
            reader: BufReader::new(stream),
            writer,
            path,
            next_id: 1,
            line: String::new(),
        })
    }

    fn io(&self, source: io::Error) -> ClientError {
        ClientError::Io {
            path: self.path.clone(),
            source,
        }
    }

    /// Queues a request (written on the next [`Client::recv`] or
    /// [`Client::flush`]); returns its id.
    pub fn send(&mut self, method: &str, params: Value) -> Result<u64, ClientError> {
        let id = self.next_id;
        self.next_id += 1;
        let mut bytes = serde_json::to_vec(&json!({"id": id, "method": method, "params": params}))
            .expect("a JSON value always serializes");
        bytes.push(b'\n');
        self.writer
            .write_all(&bytes)
            .map_err(|e| self.write_failed(e))?;
        Ok(id)
    }

    /// Queues already-encoded request lines (each ending in `\n`) as they
    /// are: for load generators that must not pay a JSON encoding per call.
    pub fn send_encoded(&mut self, lines: &[u8]) -> Result<(), ClientError> {
        self.writer
            .write_all(lines)
            .map_err(|e| self.write_failed(e))
    }

    pub fn flush(&mut self) -> Result<(), ClientError> {
        self.writer.flush().map_err(|e| self.write_failed(e))
    }

    /// A failed write, explained: a daemon that refuses a connection (too
    /// many of its class, shutting down) sends one error line and closes,
    /// possibly before this client wrote, so the write fails with a broken
    /// pipe while the reason waits unread in the socket. That reason, when
    /// there is one, is the error; otherwise the write's own.
    fn write_failed(&mut self, source: io::Error) -> ClientError {
        if matches!(
            source.kind(),
            io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset
        ) {
            // The peer has closed: this read returns at once.
            let mut line = String::new();
            if self.reader.read_line(&mut line).is_ok_and(|n| n > 0) {
                if let Ok(doc) = serde_json::from_str::<Value>(&line) {
                    if let Err(e @ ClientError::Server(_)) = reply_of(&self.path, doc) {
                        return e;
                    }
                }
            }
        }
        self.io(source)
    }

    /// Reads the next response line into `self.line` (flushing queued
    /// requests); the daemon closing the connection is an error.
    fn read_line(&mut self) -> Result<(), ClientError> {
        self.flush()?;
        self.line.clear();
        let n = self
            .reader
            .read_line(&mut self.line)
            .map_err(|e| self.io(e))?;
        if n == 0 {
            return Err(ClientError::Protocol {
                path: self.path.clone(),
                what: "the daemon closed the connection".into(),
            });
        }
        Ok(())
    }

    /// The next response line, undecoded (with its `\n`).
    pub fn recv_line(&mut self) -> Result<&str, ClientError> {
        self.read_line()?;
        Ok(&self.line)
    }

    /// Reads the next response line as JSON (flushing queued requests).
    pub fn recv_raw(&mut self) -> Result<Value, ClientError> {
        self.read_line()?;
        serde_json::from_str(&self.line).map_err(|e| ClientError::Protocol {
            path: self.path.clone(),
            what: format!("{e}"),
        })
    }

    /// Splits a response line into a reply or an error (see [`Client::recv`]).
    pub fn reply_of_line(&self, line: &str) -> Result<Reply, ClientError> {
        let doc = serde_json::from_str(line).map_err(|e| ClientError::Protocol {
            path: self.path.clone(),
            what: format!("{e}"),
        })?;
        reply_of(&self.path, doc)
    }

    /// Reads the next response and splits it into a reply or an error.
    pub fn recv(&mut self) -> Result<Reply, ClientError> {
        let doc = self.recv_raw()?;
        reply_of(&self.path, doc)
    }

    /// One request and its answer.
    pub fn call(&mut self, method: &str, params: Value) -> Result<Reply, ClientError> {
        self.send(method, params)?;
        self.recv()
    }

    /// A second handle on this connection's socket, to shut it down from
    /// another thread: a call blocked in a waiting read then returns an
    /// error, and the daemon, seeing its client gone, records no receipt
    /// (PROTOCOL.md, "Waiting reads"). `agentlog mcp` cancels a tool call so.
    pub fn shutdown_handle(&self) -> Result<UnixStream, ClientError> {
        self.reader.get_ref().try_clone().map_err(|e| self.io(e))
    }

    /// Starts a watch (PROTOCOL.md, "Watch"); the connection then carries
    /// only its stream.
    pub fn watch(mut self, params: Value) -> Result<Watch, ClientError> {
        self.call("watch", params)?;
        Ok(Watch {
            client: self,
            done: false,
        })
    }
}

fn reply_of(path: &Path, mut doc: Value) -> Result<Reply, ClientError> {
    if let Some(e) = doc.get_mut("error") {
        let e: ErrorReply =
            serde_json::from_value(e.take()).map_err(|e| ClientError::Protocol {
                path: path.to_path_buf(),
                what: format!("bad error object: {e}"),
            })?;
        return Err(ClientError::Server(e));
    }
    let exit = doc.get("exit").and_then(Value::as_u64).unwrap_or(0);
    match doc.get_mut("result") {
        Some(r) => Ok(Reply {
            result: r.take(),
            exit: u8::try_from(exit).unwrap_or(1),
        }),
        None => Err(ClientError::Protocol {
            path: path.to_path_buf(),
            what: "response has neither `result` nor `error`".into(),
        }),
    }
}

/// One item of a watch stream.
#[derive(Debug, Clone, PartialEq)]
pub enum WatchItem {
    Event(Value),
    Change(Value),
    /// An error inside the stream (the stream goes on).
    Error(Value),
    /// The watch began inside a compacted range: the registry there
    /// (`rows`, as of `lsn`) to restart from; the stream goes on after it.
    Compacted(Value),
    /// A `latest` watch's look at who is there (`lsn`, `agents`: names).
    Present(Value),
    /// The watcher fell behind; reconnect with `from` = this LSN.
    Lagged(u64),
}

/// A watch stream: an iterator of items, ending after `lagged` or when the
/// daemon closes the connection.
pub struct Watch {
    client: Client,
    done: bool,
}

impl Iterator for Watch {
    type Item = Result<WatchItem, ClientError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let doc = match self.client.recv_raw() {
            Ok(d) => d,
            Err(ClientError::Protocol { .. }) => {
                self.done = true;
                return None;
            }
            Err(e) => {
                self.done = true;
                return Some(Err(e));
            }
        };
        let item = if let Some(e) = doc.get("event") {
            WatchItem::Event(e.clone())
        } else if let Some(c) = doc.get("change") {
            WatchItem::Change(c.clone())
        } else if let Some(c) = doc.get("compacted") {
            WatchItem::Compacted(c.clone())
        } else if let Some(p) = doc.get("present") {
            WatchItem::Present(p.clone())
        } else if let Some(l) = doc.get("lagged") {
            self.done = true;
            WatchItem::Lagged(l["resume_from"].as_u64().unwrap_or(0))
        } else if let Some(e) = doc.get("error") {
            // A stream error names an LSN; a final one (shutdown) does not.
            if e.get("lsn").is_none() {
                self.done = true;
                return Some(
                    reply_of(&self.client.path, doc).map(|_| WatchItem::Error(Value::Null)),
                );
            }
            WatchItem::Error(e.clone())
        } else {
            self.done = true;
            return Some(Err(ClientError::Protocol {
                path: self.client.path.clone(),
                what: format!("unexpected watch line {doc}"),
            }));
        };
        Some(Ok(item))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixListener;

    /// A daemon that refuses a connection writes its reason and closes
    /// before the client sends anything: the client's write then fails
    /// (broken pipe), and the error it reports is the daemon's reason.
    #[test]
    fn a_refusal_sent_before_the_request_is_the_error() {
        let dir = tempfile::tempdir().unwrap();
        let listener = UnixListener::bind(crate::daemon::socket_path(dir.path())).unwrap();
        let refuse = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            s.write_all(
                b"{\"id\":null,\"error\":{\"code\":\"too_many_connections\",\
                  \"message\":\"too many observer connections (2 open)\",\"exit\":1}}\n",
            )
            .unwrap();
        });
        let mut c = Client::connect(dir.path()).unwrap();
        // The daemon's end is closed before the request goes out.
        refuse.join().unwrap();
        match c.call("hello", json!({})) {
            Err(ClientError::Server(e)) => {
                assert!(e.message.contains("too many observer connections"), "{e:?}")
            }
            other => panic!("expected the daemon's refusal, got {other:?}"),
        }
    }
}
