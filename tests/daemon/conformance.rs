//! The protocol's conformance cases (`tests/conformance/cases/*.json`,
//! format in `tests/conformance/README.md`) spoken raw by the server's own
//! runner: each file against a fresh daemon, every answer checked whole
//! (`id` included) against its pattern. The Python and Node clients run the
//! same files (`clients.rs`).

use crate::support::daemon::{Conn, Daemon, Store};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn cases_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/conformance/cases")
}

fn case_files() -> Vec<PathBuf> {
    let dir = cases_dir();
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    assert!(
        !files.is_empty(),
        "no conformance cases in {}",
        dir.display()
    );
    files
}

fn type_matches(name: &str, v: &Value) -> bool {
    match name {
        "integer" => v.is_i64() || v.is_u64(),
        "number" => v.is_number(),
        "string" => v.is_string(),
        "boolean" => v.is_boolean(),
        "null" => v.is_null(),
        "array" => v.is_array(),
        "object" => v.is_object(),
        other => panic!("unknown $type {other:?} in a conformance case"),
    }
}

fn only_key<'a>(o: &'a serde_json::Map<String, Value>, key: &str) -> Option<&'a Value> {
    (o.len() == 1).then(|| o.get(key)).flatten()
}

/// `None` if `actual` matches `pattern` (README, "Patterns"), else where
/// and why not.
fn mismatch(pattern: &Value, actual: &Value, at: &str) -> Option<String> {
    match pattern {
        Value::Object(p) => {
            if let Some(Value::String(t)) = only_key(p, "$type") {
                return (!type_matches(t, actual))
                    .then(|| format!("{at}: {actual} is not of type {t}"));
            }
            if let Some(Value::String(s)) = only_key(p, "$contains") {
                let ok = actual.as_str().is_some_and(|a| a.contains(s.as_str()));
                return (!ok).then(|| format!("{at}: {actual} does not contain {s:?}"));
            }
            let Value::Object(a) = actual else {
                return Some(format!("{at}: expected an object, got {actual}"));
            };
            for (key, sub) in p {
                let absent = sub
                    .as_object()
                    .and_then(|o| only_key(o, "$absent"))
                    .is_some_and(|v| v == &Value::Bool(true));
                match (absent, a.get(key)) {
                    (true, Some(v)) => {
                        return Some(format!("{at}.{key}: present ({v}), expected absent"))
                    }
                    (true, None) => {}
                    (false, None) => return Some(format!("{at}.{key}: missing")),
                    (false, Some(v)) => {
                        if let Some(m) = mismatch(sub, v, &format!("{at}.{key}")) {
                            return Some(m);
                        }
                    }
                }
            }
            None
        }
        Value::Array(p) => {
            let Some(a) = actual.as_array().filter(|a| a.len() == p.len()) else {
                return Some(format!("{at}: expected {} items, got {actual}", p.len()));
            };
            p.iter()
                .zip(a)
                .enumerate()
                .find_map(|(i, (p, a))| mismatch(p, a, &format!("{at}[{i}]")))
        }
        Value::Number(n) => {
            let same = actual.as_f64().is_some_and(|a| Some(a) == n.as_f64());
            (!same).then(|| format!("{at}: expected {pattern}, got {actual}"))
        }
        _ => (pattern != actual).then(|| format!("{at}: expected {pattern}, got {actual}")),
    }
}

#[track_caller]
fn check(case: &str, step: usize, pattern: &Value, answer: &Value) {
    if let Some(m) = mismatch(pattern, answer, "$") {
        panic!("{case} step {step}: {m}\nanswer: {answer}");
    }
}

fn run_case(path: &Path) {
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    let text = std::fs::read_to_string(path).unwrap();
    let case: Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let steps = case["steps"]
        .as_array()
        .unwrap_or_else(|| panic!("{name}: no `steps` array"));
    let store = Store::new();
    let _daemon = Daemon::start(&store.dir, &[]);
    let mut c = Conn::connect(&store.dir);
    for (i, step) in steps.iter().enumerate() {
        if let Some(raw) = step["raw"].as_str() {
            c.send_raw(raw.as_bytes());
            let answer = c
                .recv()
                .unwrap_or_else(|| panic!("{name} step {i}: no answer"));
            check(&name, i, &step["expect"], &answer);
        } else if step["send"].is_object() {
            c.send(&step["send"]);
            let answer = c
                .recv()
                .unwrap_or_else(|| panic!("{name} step {i}: no answer"));
            check(&name, i, &step["expect"], &answer);
        } else {
            let reqs = step["pipeline"]
                .as_array()
                .unwrap_or_else(|| panic!("{name} step {i}: neither raw, send nor pipeline"));
            let mut batch = Vec::new();
            for r in reqs {
                batch.extend(serde_json::to_vec(r).unwrap());
                batch.push(b'\n');
            }
            c.send_raw(&batch);
            let expect = step["expect"]
                .as_array()
                .expect("a pipeline expects an array");
            assert_eq!(expect.len(), reqs.len(), "{name} step {i}");
            for (j, pattern) in expect.iter().enumerate() {
                let answer = c
                    .recv()
                    .unwrap_or_else(|| panic!("{name} step {i}: no answer {j}"));
                check(&format!("{name}[{j}]"), i, pattern, &answer);
            }
        }
    }
}

#[test]
fn the_daemon_passes_every_conformance_case() {
    for path in case_files() {
        run_case(&path);
    }
}

#[test]
fn the_matcher_fails_what_it_should() {
    use serde_json::json;
    let m = |p: Value, a: Value| mismatch(&p, &a, "$");
    assert_eq!(m(json!({"a": 1}), json!({"a": 1, "b": 2})), None);
    assert!(m(json!({"a": 1}), json!({"a": 2})).is_some());
    assert!(m(json!({"a": {"$absent": true}}), json!({"a": null})).is_some());
    assert!(m(json!({"a": {"$type": "integer"}}), json!({"a": 1.5})).is_some());
    assert!(m(json!([1]), json!([1, 2])).is_some());
    assert!(m(json!(true), json!(1)).is_some());
    assert_eq!(m(json!({"$contains": "b"}), json!("abc")), None);
    assert!(m(json!({"$contains": "x"}), json!("abc")).is_some());
}
