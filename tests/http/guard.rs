//! HTTP under hostile callers (issue 30, findings 1 and 15): an anonymous
//! caller (here a real second uid) gets no registry data and cannot read
//! the token; `Host` must name the server; unknown agents are 404;
//! `Last-Event-ID` never wraps; idle, slow and surplus connections are
//! closed, and an event stream nobody reads is dropped after the write
//! timeout.

use crate::support::cli::as_neighbour;
use crate::support::http::*;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

const SECRET: &str = "the launch code is 4711";

/// `curl` as the neighbour uid: the status code and the body.
fn curl_as_neighbour(url: &str) -> (String, String) {
    let out = as_neighbour(
        "curl",
        &[
            "-sS".as_ref(),
            "-m".as_ref(),
            "10".as_ref(),
            "-w".as_ref(),
            "\n%{http_code}".as_ref(),
            url.as_ref(),
        ],
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
    (code.to_string(), body.to_string())
}

#[test]
fn an_anonymous_caller_gets_no_registry_data_and_cannot_read_the_token() {
    let s = Store::new();
    for n in ["alice", "bob"] {
        s.ok(&["register", n, "--provider", "claude", "--cwd", "/w"]);
    }
    s.ok(&["post", "--from", "alice", "--to", "bob", SECRET]);
    let web = Web::start(&s.dir);

    // Another uid, no token: every path that shows registry data is 401.
    for path in [
        "/api/agents/bob/audit",
        "/api/agents",
        "/api/events?from=1",
        "/api/events?from=1&kinds=MessagePosted",
    ] {
        let (code, body) = curl_as_neighbour(&format!("{}{path}", web.base));
        assert_eq!(code, "401", "{path}: {body}");
        assert!(
            !body.contains("4711") && !body.contains("alice"),
            "{path}: {body}"
        );
        assert!(
            body.contains("unauthorized") && body.contains("http.token"),
            "{body}"
        );
    }
    // A wrong token is no token.
    let wrong = with_token(&format!("{}/api/agents", web.base), &"0".repeat(64));
    assert_eq!(curl_as_neighbour(&wrong).0, "401");
    // What an anonymous caller does see: health, readiness, metrics, the
    // page (which loads no data without the token).
    for path in ["/healthz", "/readyz", "/metrics", "/", "/page.js"] {
        let (code, body) = curl_as_neighbour(&format!("{}{path}", web.base));
        assert_eq!(code, "200", "{path}: {body}");
        assert!(!body.contains("4711"), "{path}");
    }
    // The token is the owner's alone.
    let token_file = s.dir.join("http.token");
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(&token_file).unwrap().permissions(),
    );
    assert_eq!(mode & 0o777, 0o600);
    let cat = as_neighbour("cat", &[token_file.as_os_str()]);
    assert!(!cat.status.success(), "the neighbour read the token");
    assert!(cat.stdout.is_empty());

    // The owner, with the token (header or query), reads it all.
    let audit = web.json("/api/agents/bob/audit");
    assert!(audit.to_string().contains("4711"), "{audit}");
    let (status, body) = get(&web.url("/api/agents"));
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("alice"));
}

/// A raw HTTP/1.1 exchange (the client closes after one request).
fn raw(addr: &str, request: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

fn status_of(response: &str) -> &str {
    response.split(' ').nth(1).unwrap_or("")
}

#[test]
fn the_host_header_must_name_this_server() {
    let s = Store::new();
    let web = Web::start_with(&s.dir, &["--http-host", "agents.example"]);
    let addr = web.base.trim_start_matches("http://").to_string();
    let port = addr.rsplit_once(':').unwrap().1;
    let ask = |host: Option<&str>| {
        let host = host.map_or(String::new(), |h| format!("Host: {h}\r\n"));
        let req = format!("GET /healthz HTTP/1.1\r\n{host}Connection: close\r\n\r\n");
        raw(&addr, &req)
    };
    // A page that rebinds its own name to this address sends that name.
    let rebound = ask(Some("attacker.example"));
    assert_eq!(status_of(&rebound), "421", "{rebound}");
    assert!(rebound.contains("misdirected"), "{rebound}");
    assert_eq!(
        status_of(&ask(Some(&format!("attacker.example:{port}")))),
        "421"
    );
    assert_eq!(status_of(&ask(None)), "421");
    for ok in [
        addr.clone(),
        format!("localhost:{port}"),
        "127.0.0.1".to_string(),
        format!("agents.example:{port}"),
    ] {
        let r = ask(Some(&ok));
        assert_eq!(status_of(&r), "200", "Host {ok}: {r}");
    }
}

#[test]
fn unknown_agents_are_404_and_last_event_id_never_wraps() {
    let s = Store::new();
    s.ok(&["register", "w1", "--provider", "claude", "--cwd", "/w"]);
    let web = Web::start(&s.dir);
    let (status, body) = web.get("/api/agents/nobody/audit");
    assert_eq!(status, 404, "{body}");
    assert!(body.contains("nobody"), "{body}");

    let auth = format!("Bearer {}", web.token);
    let url = format!("{}/api/events?from=1", web.base);
    let (status, body) = get_with(
        &url,
        &[
            ("authorization", &auth),
            ("last-event-id", &u64::MAX.to_string()),
        ],
    );
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("Last-Event-ID"), "{body}");
}

/// The daemon's open file descriptors.
fn fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count()
}

#[test]
fn idle_slow_and_surplus_http_connections_are_closed() {
    let s = Store::new();
    s.ok(&["register", "w1", "--provider", "claude", "--cwd", "/w"]);
    let web = Web::start_with(
        &s.dir,
        &["--http-idle-timeout", "1", "--max-http-connections", "4"],
    );
    let addr = web.base.trim_start_matches("http://").to_string();
    // Settled: the start-up's own connection is closed.
    let before = eventually("the daemon's descriptors to settle", || {
        let a = fds(web.daemon.pid());
        std::thread::sleep(Duration::from_millis(300));
        (fds(web.daemon.pid()) == a).then_some(a)
    });

    // Four idle connections fill the cap; the fifth is refused at once.
    let idle: Vec<TcpStream> = (0..4).map(|_| TcpStream::connect(&addr).unwrap()).collect();
    eventually("the daemon to hold the idle connections", || {
        (fds(web.daemon.pid()) >= before + 4).then_some(())
    });
    let refused = raw(&addr, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    assert_eq!(status_of(&refused), "503", "{refused}");
    assert!(refused.contains("too many HTTP connections"), "{refused}");
    // The socket's clients are not affected: the owner's writes go on.
    let mut c = Conn::connect(&s.dir);
    let hb = c.call(serde_json::json!({"id": 1, "method": "heartbeat", "params": {"name": "w1"}}));
    assert!(hb["result"]["lsn"].is_u64(), "{hb}");
    drop(c);

    // Idle ones are closed after the idle timeout.
    let started = Instant::now();
    for mut conn in idle {
        conn.set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut buf = [0u8; 64];
        let n = conn.read(&mut buf).unwrap_or(0);
        assert_eq!(n, 0, "an idle connection got {:?}", &buf[..n]);
    }
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );

    // A request whose headers trickle in is closed too.
    let mut slow = TcpStream::connect(&addr).unwrap();
    slow.write_all(b"GET /healthz HTTP/1.1\r\n").unwrap();
    let trickle = Instant::now();
    let closed = loop {
        if slow.write_all(b"X-Slow: 1\r\n").is_err() {
            break trickle.elapsed();
        }
        slow.set_read_timeout(Some(Duration::from_millis(250)))
            .unwrap();
        let mut buf = [0u8; 256];
        match slow.read(&mut buf) {
            Ok(_) => break trickle.elapsed(),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(_) => break trickle.elapsed(),
        }
        assert!(trickle.elapsed() < Duration::from_secs(10), "never closed");
    };
    assert!(closed < Duration::from_secs(5), "{closed:?}");

    // Everything is given back, and a new client is served.
    eventually("the daemon to close them", || {
        (fds(web.daemon.pid()) <= before).then_some(())
    });
    assert_eq!(web.json("/healthz")["ok"], true);
}

#[test]
fn an_event_stream_nobody_reads_is_closed_after_the_write_timeout() {
    let s = Store::new();
    s.ok(&["register", "w1", "--provider", "claude", "--cwd", "/w"]);
    // Enough history to fill every buffer between the daemon and a client
    // that never reads.
    {
        let store = agentlog::store::Store::open(&s.dir, Default::default()).unwrap();
        for _ in 0..40_000 {
            store.heartbeat("w1", Some(4242), None).unwrap();
        }
        store.close().unwrap();
    }
    let web = Web::start_with(&s.dir, &["--write-timeout", "1"]);
    let addr = web.base.trim_start_matches("http://").to_string();
    let mut stuck = TcpStream::connect(&addr).unwrap();
    let req = format!(
        "GET /api/events?from=1&token={} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
        web.token
    );
    stuck.write_all(req.as_bytes()).unwrap();
    let metric = |name: &str| sample(&web.get("/metrics").1, name);
    eventually("the stream to start", || {
        (metric("agentlog_watchers") == Some(1.0)).then_some(())
    });
    // Nothing is read: the daemon gives up on it within about the timeout.
    eventually_within(
        "the stuck stream to be dropped",
        Duration::from_secs(8),
        || (metric("agentlog_watchers") == Some(0.0)).then_some(()),
    );
    // What it had sent arrives, then the end: the connection is closed.
    stuck
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut sink = Vec::new();
    match stuck.read_to_end(&mut sink) {
        Ok(_) => {}
        Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::ConnectionReset, "{e}"),
    }
    assert!(!sink.is_empty());
}
