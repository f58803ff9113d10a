//! `/healthz`, `/readyz`, `/api/agents`, `/api/agents/NAME/audit`,
//! `/api/events` (SSE), the page's files and their escaping of hostile
//! registry strings.

use crate::support::http::*;
use std::io::{BufRead, BufReader};

const HOSTILE: &str = "<script>alert(1)</script>";

#[test]
fn health_readiness_agents_audit_and_events() {
    let s = Store::new();
    s.ok(&["register", "w1", "--provider", "claude", "--cwd", "/w"]);
    s.ok(&["register", HOSTILE, "--provider", "<b>x</b>", "--cwd", "/w"]);
    let web = Web::start(&s.dir);

    assert_eq!(web.json("/healthz")["ok"], true);
    let ready = web.json("/readyz");
    assert_eq!(ready["ready"], true, "{ready}");
    assert_eq!(ready["last_lsn"], 2);

    let agents = web.json("/api/agents");
    assert_eq!(agents["lsn"], 2);
    let names: Vec<&str> = agents["agents"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["w1", HOSTILE]);
    // The rows are `list --json`'s rows.
    let listed: serde_json::Value = serde_json::from_str(&s.ok(&["--json", "list"])).unwrap();
    let w1 = listed
        .as_array()
        .or_else(|| listed["agents"].as_array())
        .unwrap()
        .iter()
        .find(|r| r["name"] == "w1")
        .unwrap()
        .clone();
    // Over HTTP every reader only observes; the CLI's row says what its
    // caller may do. Everything else is the same.
    let mut api_row = agents["agents"][0].clone();
    assert_eq!(api_row["actions"], serde_json::json!(["observe"]));
    let mut w1 = w1;
    for row in [&mut api_row, &mut w1] {
        row.as_object_mut().unwrap().remove("actions");
    }
    assert_eq!(api_row, w1);

    s.ok(&[
        "status",
        "w1",
        "busy",
        "--message",
        "<img src=x onerror=alert(1)>",
    ]);
    let audit = web.json("/api/agents/w1/audit");
    assert_eq!(audit["agent"], "w1");
    let kinds: Vec<&str> = audit["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["AgentRegistered", "StatusChanged"]);
    let last = web.json("/api/agents/w1/audit?limit=1");
    assert_eq!(last["events"].as_array().unwrap().len(), 1);
    assert_eq!(last["events"][0]["lsn"], 3);
    let encoded = "/api/agents/%3Cscript%3Ealert(1)%3C%2Fscript%3E/audit";
    assert_eq!(web.json(encoded)["agent"], HOSTILE);
    let (status, body) = web.get("/api/agents/w1/audit?limit=x");
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("`limit`"), "{body}");

    // SSE: history from LSN 2, then live; ids are LSNs.
    let (status, body) = web.get("/api/events?from=nope");
    assert_eq!(status, 400);
    assert!(body.contains("`from`"), "{body}");
    let url = web.url("/api/events?changes=true&from=2");
    let mut r = ureq::get(&url).call().unwrap();
    assert_eq!(
        r.headers()["content-type"].to_str().unwrap(),
        "text/event-stream"
    );
    let mut lines = BufReader::new(r.body_mut().as_reader()).lines();
    let mut next_event = || {
        let mut ev = Vec::new();
        for l in lines.by_ref() {
            let l = l.unwrap();
            if l.is_empty() {
                if !ev.is_empty() {
                    return ev;
                }
                continue;
            }
            if !l.starts_with(':') {
                ev.push(l);
            }
        }
        panic!("the stream ended");
    };
    assert_eq!(next_event(), ["event: watching", r#"data: {"from":2}"#]);
    let added = next_event();
    assert_eq!(added[0], "event: change");
    assert_eq!(added[2], "id: 2");
    assert!(added[1].contains(r#""type":"added""#), "{added:?}");
    let updated = next_event();
    assert_eq!(updated[2], "id: 3");
    s.ok(&["heartbeat", "w1"]);
    let live = next_event();
    assert_eq!(live[2], "id: 4", "{live:?}");
    assert!(live[1].contains(r#""agent":"w1""#));
}

#[test]
fn the_page_is_self_contained_and_never_builds_markup_from_data() {
    let s = Store::new();
    let web = Web::start(&s.dir);
    let (status, html) = web.get("/");
    assert_eq!(status, 200);
    assert!(html.contains(r#"<script src="/page.js" defer></script>"#));
    // Nothing comes from another origin.
    for page in ["/", "/page.js", "/page.css"] {
        let (status, text) = web.get(page);
        assert_eq!(status, 200, "{page}");
        assert!(
            !text.contains("http://") && !text.contains("https://"),
            "{page}"
        );
    }
    let js = web.get("/page.js").1;
    assert!(js.contains("textContent"));
    for sink in [
        "innerHTML",
        "outerHTML",
        "insertAdjacentHTML",
        "document.write",
        "eval(",
    ] {
        assert!(!js.contains(sink), "page.js uses {sink}");
    }
    let r = ureq::get(&format!("{}/", web.base)).call().unwrap();
    let csp = r.headers()["content-security-policy"].to_str().unwrap();
    assert!(csp.contains("script-src 'self'"), "{csp}");
}

#[test]
fn latest_sends_each_agents_newest_row_once() {
    let s = Store::new();
    s.ok(&["register", "a", "--provider", "claude", "--cwd", "/w"]);
    s.ok(&["register", "b", "--provider", "claude", "--cwd", "/w"]);
    for _ in 0..3 {
        s.ok(&["heartbeat", "a"]);
        s.ok(&["heartbeat", "b"]);
    }
    s.ok(&["status", "a", "busy"]);
    let web = Web::start(&s.dir);
    let (status, body) = web.get("/api/events?latest=true");
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("needs `changes"), "{body}");

    let url = web.url("/api/events?changes=true&latest=true&from=1");
    let mut r = ureq::get(&url).call().unwrap();
    let mut lines = BufReader::new(r.body_mut().as_reader()).lines();
    let mut data = Vec::new();
    for l in lines.by_ref() {
        let l = l.unwrap();
        if let Some(d) = l.strip_prefix("data: ") {
            data.push(serde_json::from_str::<serde_json::Value>(d).unwrap());
            if data.len() == 3 {
                break;
            }
        }
    }
    assert_eq!(data[0], serde_json::json!({"from": 1}));
    // 9 records, two agents: one `added` each, with the row after LSN 9.
    let got: Vec<_> = data[1..]
        .iter()
        .map(|c| {
            (
                c["agent"].as_str().unwrap(),
                c["type"].as_str().unwrap(),
                c["lsn"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(got, [("b", "added", 8), ("a", "added", 9)]);
    assert_eq!(data[2]["row"]["status"], "busy");
    assert_eq!(data[1]["row"]["last_event_lsn"], 8);
}

/// The time of the `i`th heartbeat of a burst: `i` seconds after [`NOW`].
fn second(i: u64) -> String {
    format!("2030-01-01T00:{:02}:{:02}Z", i / 60, i % 60)
}

#[test]
fn latest_merges_a_live_burst_sends_removals_and_resumes_after_last_event_id() {
    use serde_json::json;
    let s = Store::new();
    for n in ["a", "b"] {
        s.ok(&["register", n, "--provider", "claude", "--cwd", "/w"]);
    }
    let web = Web::start(&s.dir);
    let url = web.url("/api/events?changes=true&latest=true");
    let mut sse = Sse::open(&url, None);
    assert_eq!(sse.next(), ("watching".into(), json!({"from": 3}), None));
    let first = sse.next();
    assert_eq!(
        first,
        (
            "present".into(),
            json!({"lsn": 2, "agents": ["a", "b"]}),
            Some(2)
        )
    );

    // A burst of heartbeats pipelined on one connection, then a removal.
    const N: u64 = 300;
    let mut c = Conn::connect(&s.dir);
    let mut burst = Vec::new();
    for i in 1..=N {
        let t = second(i);
        let req =
            json!({"id": i, "method": "heartbeat", "params": {"name": "a", "at": t, "clock": t}});
        burst.extend(serde_json::to_vec(&req).unwrap());
        burst.push(b'\n');
    }
    c.send_raw(&burst);
    let mut last = 0;
    for _ in 1..=N {
        let r = c.recv().unwrap();
        let lsn = r["result"]["lsn"].as_u64();
        last = last.max(lsn.unwrap_or_else(|| panic!("heartbeat: {r}")));
    }
    assert_eq!(last, 2 + N);
    s.ok(&["remove", "b"]);

    // The stream sends `a`'s row as of each look, not each heartbeat, and
    // `b`'s removal once.
    let mut updates: Vec<serde_json::Value> = Vec::new();
    let mut removed = None;
    while removed.is_none() || updates.last().map(|u| u["lsn"].clone()) != Some(json!(last)) {
        let (name, data, id) = sse.next();
        assert_eq!(name, "change", "{data}");
        assert_eq!(id, data["lsn"].as_u64(), "{data}");
        match (data["type"].as_str(), data["agent"].as_str()) {
            (Some("updated"), Some("a")) => updates.push(data),
            (Some("removed"), Some("b")) if removed.is_none() => removed = id,
            _ => panic!("unexpected change: {data}"),
        }
    }
    assert!(removed.unwrap() > last, "{removed:?}");
    assert!(
        updates.len() < (N / 10) as usize,
        "{} row updates for {N} heartbeats: the stream did not merge them",
        updates.len()
    );
    let lsns: Vec<u64> = updates.iter().map(|u| u["lsn"].as_u64().unwrap()).collect();
    assert!(lsns.windows(2).all(|w| w[0] < w[1]), "{lsns:?}");
    let newest = &updates.last().unwrap()["row"];
    assert!(
        newest["last_active"]
            .as_str()
            .unwrap()
            .starts_with(&second(N)[..19]),
        "{newest}"
    );
    let mut listed = web.json("/api/agents");
    assert_eq!(listed["agents"].as_array().unwrap().len(), 1);
    // `/api/agents` also says what its (observer) reader may do.
    let listed_row = listed["agents"][0].as_object_mut().unwrap();
    assert_eq!(listed_row.remove("actions"), Some(json!(["observe"])));
    assert_eq!(&listed["agents"][0], newest);

    // EventSource's reconnect: after the last row seen, nothing changed but
    // `b` went, which `present` says.
    let mut again = Sse::open(&url, Some(last));
    assert_eq!(
        again.next(),
        ("watching".into(), json!({"from": last + 1}), None)
    );
    let (name, data, _) = again.next();
    assert_eq!((name.as_str(), &data["agents"]), ("present", &json!(["a"])));
    // From before the burst: `a`'s newest row once, then `present`.
    let mut early = Sse::open(&url, Some(2));
    assert_eq!(early.next().1, json!({"from": 3}));
    let (name, data, id) = early.next();
    assert_eq!((name.as_str(), id), ("change", Some(last)));
    assert_eq!((&data["type"], &data["row"]), (&json!("added"), newest));
    let (name, data, _) = early.next();
    assert_eq!((name.as_str(), &data["agents"]), ("present", &json!(["a"])));
}
