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
    assert_eq!(agents["agents"][0], w1);

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
    let url = format!("{}/api/events?changes=true&from=2", web.base);
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

    let url = format!("{}/api/events?changes=true&latest=true&from=1", web.base);
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
