//! The live page in a real headless browser (Debian's chromium, driven over
//! WebDriver by chromedriver): opened anonymously it says it needs the token
//! and shows no agent; opened with the token (`/#token=…`) it shows the
//! registered agents, shows a
//! status change made through the CLI within a second with no reload, drops
//! a removed agent's row, and renders hostile names as text. The test installs chromium when
//! it is missing (tests/support/prereq.rs) and fails, never skips, when it
//! cannot.

use crate::support::http::*;
use serde_json::json;
use std::time::{Duration, Instant};

const HOSTILE: &str = "<script>window.__pwned=1</script>";
const HOSTILE_MSG: &str = "<img src=x onerror=\"window.__pwned=2\">";

/// The page's rows as `[name, status, message]`.
const ROWS: &str = "return Array.from(document.querySelectorAll('#agents tbody tr')).map(\
    tr => [tr.cells[0].textContent, tr.cells[2].textContent, tr.cells[3].textContent]);";

#[test]
fn the_live_page_shows_agents_updates_without_reload_and_escapes() {
    let s = Store::new();
    s.ok(&["register", "alpha", "--provider", "claude", "--cwd", "/w"]);
    s.ok(&["register", "beta", "--provider", "codex", "--cwd", "/w"]);
    s.ok(&["register", HOSTILE, "--provider", "claude", "--cwd", "/w"]);
    s.ok(&["status", HOSTILE, "idle", "--message", HOSTILE_MSG]);
    let web = Web::start(&s.dir);
    let browser = Browser::start();

    // Anonymous: the page loads, says why it shows nothing, and has no row.
    browser.goto(&format!("{}/", web.base));
    let locked = eventually("the page to say it needs the token", || {
        let c = browser.eval("return document.getElementById('conn').textContent;");
        c.as_str()
            .filter(|t| t.contains("needs the store's token"))
            .map(str::to_string)
    });
    assert!(locked.contains("#token="), "{locked}");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(browser.eval(ROWS), json!([]));
    let ok = browser.eval("return fetch('/api/agents').then(r => r.status);");
    assert_eq!(ok, json!(401));

    // With the token in the address (its fragment never reaches a server).
    browser.goto(&format!("{}/#token={}", web.base, web.token));

    let rows = eventually("the page to list the agents", || {
        let v = browser.eval(ROWS);
        (v.as_array().map_or(0, Vec::len) == 3).then_some(v)
    });
    let names: Vec<&str> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r[0].as_str().unwrap())
        .collect();
    assert_eq!(names, [HOSTILE, "alpha", "beta"]);
    // The hostile strings are text: shown verbatim, nothing ran, no element
    // was made from them.
    assert_eq!(rows[0][2], HOSTILE_MSG);
    let pwned = browser.eval(
        "return [window.__pwned === undefined, \
         document.querySelectorAll('#agents script, #agents img').length];",
    );
    assert_eq!(pwned, json!([true, 0]));
    eventually("the live stream to connect", || {
        let c = browser.eval("return document.getElementById('conn').textContent;");
        (c == "live").then_some(())
    });
    // The token left the address bar (it stays in this tab's storage).
    let address = browser.eval("return location.href;");
    assert!(!address.as_str().unwrap().contains("token"), "{address}");
    // Mark the document: a reload would lose the mark.
    browser.eval("window.__same_document = 42; return null;");

    s.ok(&["status", "alpha", "busy", "--message", "compiling"]);
    let changed = Instant::now();
    let seen = loop {
        let rows = browser.eval(ROWS);
        let alpha = rows
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r[0] == "alpha")
            .cloned();
        if alpha
            .as_ref()
            .is_some_and(|r| r[1] == "busy" && r[2] == "compiling")
        {
            break changed.elapsed();
        }
        assert!(
            changed.elapsed() < Duration::from_secs(5),
            "the status change never reached the page: {rows}"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(
        seen < Duration::from_secs(1),
        "the change took {seen:?} to show"
    );
    assert_eq!(browser.eval("return window.__same_document;"), json!(42));

    // A removal takes the row away, still without a reload.
    s.ok(&["remove", "beta"]);
    eventually("the removed agent's row to go", || {
        let rows = browser.eval(ROWS);
        let names: Vec<&str> = rows
            .as_array()?
            .iter()
            .filter_map(|r| r[0].as_str())
            .collect();
        (names == [HOSTILE, "alpha"]).then_some(())
    });
    assert_eq!(browser.eval("return window.__same_document;"), json!(42));

    // Filters and the audit timeline.
    browser.eval(
        "const s = document.getElementById('f-status'); s.value = 'busy'; \
         s.dispatchEvent(new Event('input')); return null;",
    );
    let filtered = browser.eval(ROWS);
    assert_eq!(filtered.as_array().unwrap().len(), 1, "{filtered}");
    browser.eval("document.querySelector('#agents tbody tr').click(); return null;");
    let audit = eventually("the audit timeline", || {
        let v = browser.eval(
            "return Array.from(document.querySelectorAll('#audit-list li')).map(li => li.textContent);",
        );
        (v.as_array().map_or(0, Vec::len) == 2).then_some(v)
    });
    assert!(audit[0].as_str().unwrap().contains("busy"), "{audit}");
}

/// The page's attach columns as `[name, controller, observers, outage]`.
const ATTACH: &str = "return Array.from(document.querySelectorAll('#agents tbody tr')).map(\
    tr => [tr.cells[0].textContent, tr.cells[7].textContent, tr.cells[8].textContent, \
    tr.cells[9].textContent]);";

#[test]
fn the_live_page_shows_controller_observers_and_outages() {
    let s = Store::new();
    let gone = s.tmp.path().join("nobody-listens.sock");
    let endpoint = format!("unix:{}", gone.display());
    s.ok(&[
        "register",
        "alpha",
        "--provider",
        "claude",
        "--cwd",
        "/w",
        "--endpoint",
        &endpoint,
    ]);
    s.ok(&["register", "beta", "--provider", "codex", "--cwd", "/w"]);
    let web = Web::start_with(&s.dir, &["--probe-every-ms", "100"]);
    let browser = Browser::start();
    browser.goto(&format!("{}/#token={}", web.base, web.token));
    eventually("the live stream to connect", || {
        let c = browser.eval("return document.getElementById('conn').textContent;");
        (c == "live").then_some(())
    });
    s.ok(&["attach", "alpha", "--controller", "--client", "ui"]);
    s.ok(&["attach", "alpha", "--observer", "--client", "dash"]);
    s.ok(&["attach", "alpha", "--observer", "--client", "<b>tail</b>"]);
    // The attach ended the outage the probe opened; the next probe opens
    // another (nothing listens): the page shows it, and the leases.
    let rows = eventually("the leases and the outage on the page", || {
        let v = browser.eval(ATTACH);
        let alpha = v.as_array()?.iter().find(|r| r[0] == "alpha")?.clone();
        (alpha[1] == "ui" && alpha[3].as_str()?.starts_with("down since")).then_some(v)
    });
    let alpha = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r[0] == "alpha")
        .unwrap();
    assert_eq!(alpha[2], "<b>tail</b>, dash", "{rows}");
    let beta = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r[0] == "beta")
        .unwrap();
    assert_eq!(beta, &json!(["beta", "", "", ""]));
    assert_eq!(
        browser.eval("return document.querySelectorAll('#agents b').length;"),
        json!(0)
    );
    s.ok(&["detach", "alpha", "--client", "ui"]);
    eventually("the controller to go", || {
        let v = browser.eval(ATTACH);
        let alpha = v.as_array()?.iter().find(|r| r[0] == "alpha")?.clone();
        (alpha[1] == "").then_some(())
    });
}
