//! `/metrics` after a known workload: exact counter values, agents by
//! status, messages and drops, watchers, refusals, log figures.

use crate::support::http::*;

#[test]
fn metrics_count_a_known_workload_exactly() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("store");
    let out = bin()
        .arg("--dir")
        .arg(&dir)
        .args(["init", "--max-messages", "2"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let s = Store { tmp, dir };
    let web = Web::start(&s.dir);
    let before = web.get("/metrics").1;
    assert_eq!(
        must(
            &before,
            r#"agentlog_events_appended_total{kind="Heartbeat"}"#
        ),
        0.0
    );

    s.ok(&["register", "a", "--provider", "claude", "--cwd", "/w"]);
    s.ok(&["register", "b", "--provider", "codex", "--cwd", "/w"]);
    for _ in 0..5 {
        s.ok(&["heartbeat", "a"]);
    }
    s.ok(&["status", "a", "busy", "--message", "building"]);
    for i in 0..3 {
        s.ok(&["post", "--from", "a", "--to", "b", &format!("m{i}")]);
    }
    let refused = s.run(&["heartbeat", "ghost"]);
    assert!(!refused.status.success());

    let (status, page) = web.get("/metrics");
    assert_eq!(status, 200);
    let kind = |k: &str| {
        must(
            &page,
            &format!(r#"agentlog_events_appended_total{{kind="{k}"}}"#),
        )
    };
    assert_eq!(kind("AgentRegistered"), 2.0);
    assert_eq!(kind("Heartbeat"), 5.0);
    assert_eq!(kind("StatusChanged"), 1.0);
    assert_eq!(kind("MessagePosted"), 3.0);
    assert_eq!(kind("MessagesDropped"), 1.0, "the cap of 2 dropped one");
    assert_eq!(kind("AgentRemoved"), 0.0);
    // 2 + 5 + 1 + 3 + 1 events above, and one `last_message_at` stamp on
    // b: the three posts share the store's fixed time, and a stamp never
    // repeats or goes back (docs/upstream.md, "last_message_at").
    assert_eq!(must(&page, "agentlog_last_lsn"), 13.0);
    assert_eq!(must(&page, r#"agentlog_agents{status="busy"}"#), 1.0);
    let agents: f64 = agentlog::model::Status::ALL
        .iter()
        .map(|st| {
            let st = st.as_str();
            must(&page, &format!(r#"agentlog_agents{{status="{st}"}}"#))
        })
        .sum();
    assert_eq!(agents, 2.0);
    assert_eq!(must(&page, "agentlog_messages_live"), 2.0);
    assert_eq!(must(&page, "agentlog_messages_dropped_total"), 1.0);
    assert_eq!(must(&page, "agentlog_sessions_open"), 0.0);
    assert_eq!(
        must(
            &page,
            r#"agentlog_requests_refused_total{reason="refused"}"#
        ),
        1.0
    );
    // Every write but the lazy heartbeats waited for its fsync: 2 registers,
    // 1 status, 3 posts (each post and its drop are one append).
    assert_eq!(
        must(&page, "agentlog_durable_ack_duration_seconds_count"),
        6.0
    );
    assert_eq!(must(&page, "agentlog_append_duration_seconds_count"), 11.0);
    let fsyncs = must(&page, "agentlog_fsync_duration_seconds_count");
    assert!(fsyncs >= 6.0, "{fsyncs} syncs for 6 durable writes");
    let synced = must(&page, "agentlog_group_commit_records_sum");
    // At most every record (13, the stamp included) rides a sync.
    assert!((6.0..=13.0).contains(&synced), "{synced} records synced");
    assert!(must(&page, "agentlog_log_bytes") > 0.0);
    assert!(must(&page, "agentlog_log_segments") >= 1.0);
    assert!(page.contains("# TYPE agentlog_append_duration_seconds histogram"));
    assert!(page.contains("# TYPE agentlog_events_appended_total counter"));
    assert!(page.contains("# TYPE agentlog_agents gauge"));

    // A watcher over HTTP counts while it runs.
    assert_eq!(must(&page, "agentlog_watchers"), 0.0);
    let url = web.url("/api/events?from=1");
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let reader = std::thread::spawn(move || {
        let mut r = ureq::get(&url).call().unwrap();
        let mut first = [0u8; 16];
        std::io::Read::read_exact(&mut r.body_mut().as_reader(), &mut first).unwrap();
        // Hold the stream open until the count was seen.
        let _ = done_rx.recv();
    });
    eventually("the HTTP watcher to count", || {
        let p = web.get("/metrics").1;
        (sample(&p, "agentlog_watchers") == Some(1.0)).then_some(())
    });
    done_tx.send(()).unwrap();
    reader.join().unwrap();
    eventually("the watcher to end", || {
        let p = web.get("/metrics").1;
        (sample(&p, "agentlog_watchers") == Some(0.0)).then_some(())
    });
}
