//! The client libraries' own suites, run from `cargo test` against this
//! build's daemon (CI runs only the README's test command): the Python
//! package (`clients/python`, its unittest suites: the synchronous and the
//! asyncio client and the conformance cases) and the Node package
//! (`clients/node`, `node --test`). Each suite starts its own daemons from
//! `AGENTLOG_BIN`, one per test class or case file, and stops them. Python
//! and Node are installed by the tests if absent (`support::prereq`), never
//! skipped; a suite that ran nothing, or skipped anything, fails.

use crate::support::prereq;
use std::path::Path;
use std::process::Command;

fn clients_dir(lang: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("clients")
        .join(lang)
}

#[track_caller]
fn passed(what: &str, out: &std::process::Output) -> String {
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "{what} failed ({}):\n{text}",
        out.status
    );
    text
}

#[test]
fn the_python_client_suites_pass_against_a_real_daemon() {
    let python = prereq::python3();
    let out = Command::new(&python)
        .args(["-m", "unittest", "discover", "-v", "-s"])
        .arg(clients_dir("python"))
        .env("AGENTLOG_BIN", env!("CARGO_BIN_EXE_agentlog"))
        .env_remove("AGENTLOG_SERVE_ARGS")
        .env_remove("AGENTLOG_DIR")
        .output()
        .expect("run python3 -m unittest");
    let text = passed("the Python client suites", &out);
    assert!(
        text.contains("\nOK") && !text.contains("skipped"),
        "the Python suites ran nothing or skipped some:\n{text}"
    );
    for suite in [
        "test_agentlog_client",
        "test_async_client",
        "test_conformance",
    ] {
        assert!(text.contains(suite), "{suite} did not run:\n{text}");
    }
}

/// `pip install ./clients/python` into a fresh venv gives an importable
/// package with both clients, used from outside the source tree.
#[test]
fn the_python_package_installs_with_pip() {
    let python = prereq::python3();
    let tmp = tempfile::tempdir().unwrap();
    let venv = tmp.path().join("venv");
    let ok = |cmd: &mut Command, what: &str| passed(what, &cmd.output().expect(what));
    ok(
        Command::new(&python).arg("-m").arg("venv").arg(&venv),
        "python3 -m venv",
    );
    ok(
        Command::new(venv.join("bin/pip"))
            .args(["install", "--quiet"])
            .arg(clients_dir("python")),
        "pip install ./clients/python",
    );
    let text = ok(
        Command::new(venv.join("bin/python"))
            .args([
                "-c",
                "import agentlog_client as a; print(a.__file__); \
                 print(a.Client.heartbeat_many, a.AsyncClient.heartbeat_many, a.Refused)",
            ])
            .current_dir(tmp.path()),
        "import the installed package",
    );
    assert!(text.contains("site-packages"), "{text}");
}

#[test]
fn the_node_client_suites_pass_against_a_real_daemon() {
    let node = prereq::node();
    let dir = clients_dir("node");
    let out = Command::new(&node)
        .arg("--test")
        .arg(dir.join("test"))
        .current_dir(&dir)
        .env("AGENTLOG_BIN", env!("CARGO_BIN_EXE_agentlog"))
        .env_remove("AGENTLOG_DIR")
        .output()
        .expect("run node --test");
    let text = passed("the Node client suites", &out);
    let count = |key: &str| -> Option<u64> {
        text.lines()
            .find_map(|l| l.trim().strip_prefix(&format!("# {key} ")))
            .and_then(|n| n.trim().parse().ok())
    };
    assert!(
        count("pass").is_some_and(|n| n > 0),
        "no Node test passed:\n{text}"
    );
    assert_eq!(count("fail"), Some(0), "{text}");
    assert_eq!(count("skipped"), Some(0), "{text}");
    assert!(
        text.contains("conformance"),
        "the conformance cases did not run:\n{text}"
    );
}
