//! The CLI's start-up fast path for the one command a fleet runs most from
//! shells: `agentlog [--dir DIR] heartbeat NAME [--pid N]` with a daemon
//! serving the store. It runs before clap builds the grammar or tracing is
//! set up: it recognises exactly that command line (anything else, a
//! `$AGENTLOG_NOW` clock to send, or a name that is not plain UTF-8 goes to
//! the full path), sends the protocol's plain heartbeat, the shape the
//! daemon's hot path answers without a JSON tree, and prints the same line
//! the command prints (`applied`).
//!
//! Invariant: output and exit status are those of the full path. Only a
//! success is printed here; when the daemon answers with an error (unknown
//! agent, wrong pid, an observer's `forbidden`, a shutdown) nothing was
//! appended, so the full path runs the command again and reports it in its
//! own words; no socket, or a refused connection, is the full path's "no
//! daemon" (a direct open). A failure to talk to a daemon that answered the
//! connection also goes to the full path, which reports it.

use super::output;
use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::ExitCode;

/// What the fast path takes from the command line.
#[derive(Debug, PartialEq, Eq)]
struct PlainHeartbeat {
    dir: Option<PathBuf>,
    name: String,
    pid: Option<u32>,
}

/// `Some(exit)` when this process's heartbeat was answered here.
pub fn heartbeat() -> Option<ExitCode> {
    if std::env::var_os("AGENTLOG_NOW").is_some() {
        return None;
    }
    let hb = parse(std::env::args_os().skip(1))?;
    let dir = super::open::store_dir(hb.dir.clone()).ok()?;
    let lsn = send(&dir, &hb)?;
    let mut out = std::io::stdout().lock();
    // A closed stdout is the reader's choice (as in `report`).
    let _ = writeln!(
        out,
        "`{}`: heartbeat (lsn {lsn})",
        output::escaped(&hb.name)
    )
    .and_then(|_| out.flush());
    Some(ExitCode::SUCCESS)
}

/// The command line's heartbeat, when it is exactly the fast path's shape.
fn parse(args: impl Iterator<Item = OsString>) -> Option<PlainHeartbeat> {
    let args: Vec<String> = args.map(|a| a.into_string().ok()).collect::<Option<_>>()?;
    let mut rest = args.as_slice();
    let mut dir = None;
    match rest {
        [flag, d, tail @ ..] if flag == "--dir" => {
            dir = Some(PathBuf::from(d));
            rest = tail;
        }
        [flag, tail @ ..] if flag.starts_with("--dir=") => {
            dir = Some(PathBuf::from(&flag["--dir=".len()..]));
            rest = tail;
        }
        _ => {}
    }
    if dir.as_ref().is_some_and(|d| d.as_os_str().is_empty()) {
        return None;
    }
    let (name, pid) = match rest {
        [cmd, name] if cmd == "heartbeat" => (name, None),
        [cmd, name, flag, pid] if cmd == "heartbeat" && flag == "--pid" => {
            (name, Some(pid.as_str()))
        }
        [cmd, name, flag] if cmd == "heartbeat" && flag.starts_with("--pid=") => {
            (name, Some(&flag["--pid=".len()..]))
        }
        _ => return None,
    };
    if name.is_empty() || name.starts_with('-') {
        return None;
    }
    let pid = match pid {
        None => None,
        Some(p) if !p.is_empty() && p.len() <= 10 && p.bytes().all(|b| b.is_ascii_digit()) => {
            Some(p.parse().ok()?)
        }
        Some(_) => return None,
    };
    Some(PlainHeartbeat {
        dir,
        name: name.clone(),
        pid,
    })
}

/// The heartbeat's LSN, or `None` for anything but a success.
fn send(dir: &std::path::Path, hb: &PlainHeartbeat) -> Option<u64> {
    let mut stream = UnixStream::connect(agentlog::daemon::socket_path(dir)).ok()?;
    let name = serde_json::to_string(&hb.name).ok()?;
    let line = match hb.pid {
        Some(pid) => format!(
            "{{\"id\":1,\"method\":\"heartbeat\",\"params\":{{\"name\":{name},\"pid\":{pid}}}}}\n"
        ),
        None => format!("{{\"id\":1,\"method\":\"heartbeat\",\"params\":{{\"name\":{name}}}}}\n"),
    };
    stream.write_all(line.as_bytes()).ok()?;
    let mut reply = String::new();
    BufReader::new(stream).read_line(&mut reply).ok()?;
    let doc: serde_json::Value = serde_json::from_str(&reply).ok()?;
    if doc["id"] != 1 || doc.get("error").is_some() {
        return None;
    }
    doc["result"]["lsn"].as_u64()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(args: &[&str]) -> Option<PlainHeartbeat> {
        parse(args.iter().map(OsString::from))
    }

    #[test]
    fn only_the_plain_heartbeat_takes_the_fast_path() {
        let hb = |dir: Option<&str>, name: &str, pid| PlainHeartbeat {
            dir: dir.map(PathBuf::from),
            name: name.into(),
            pid,
        };
        assert_eq!(p(&["heartbeat", "w1"]), Some(hb(None, "w1", None)));
        assert_eq!(
            p(&["--dir", "/s", "heartbeat", "w é", "--pid", "42"]),
            Some(hb(Some("/s"), "w é", Some(42)))
        );
        assert_eq!(
            p(&["--dir=/s", "heartbeat", "w1", "--pid=7"]),
            Some(hb(Some("/s"), "w1", Some(7)))
        );
        for other in [
            &["--json", "heartbeat", "w1"][..],
            &["heartbeat", "w1", "--at", "2030-01-01T00:00:00Z"],
            &["heartbeat", "w1", "--pid", "-1"],
            &["heartbeat", "w1", "--pid", "+1"],
            &["heartbeat", "w1", "--pid", "99999999999"],
            &["heartbeat", "--pid", "1", "w1"],
            &["heartbeat", "-w1"],
            &["heartbeat", ""],
            &["heartbeat"],
            &["status", "w1", "busy"],
            &["--dir", "", "heartbeat", "w1"],
            &["--no-daemon", "heartbeat", "w1"],
            &["heartbeat", "w1", "--help"],
        ] {
            assert_eq!(p(other), None, "{other:?}");
        }
    }

    #[test]
    fn no_daemon_means_the_full_path() {
        let dir = tempfile::tempdir().unwrap();
        let hb = p(&["heartbeat", "w1"]).unwrap();
        assert_eq!(send(dir.path(), &hb), None);
    }
}
