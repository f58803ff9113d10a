//! Shared harness of the HTTP tests: a daemon started with
//! `serve --http 127.0.0.1:0` (its address read from `hello`), plain GETs
//! through `ureq` (as the owner, with the store's token, or anonymous), the
//! Prometheus text parsed into samples, and a WebDriver

//! session on Debian's chromium through chromedriver (killed on drop).

#[allow(unused_imports)] // not every test group uses each
pub use super::daemon::{bin, eventually, eventually_within, Conn, Daemon, Store, NOW};
use super::prereq::{CHROMEDRIVER, CHROMIUM};
use serde_json::{json, Value};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A daemon serving HTTP, its base URL and the store's token.
pub struct Web {
    pub daemon: Daemon,
    pub base: String,
    pub token: String,
}

/// The HTTP token of the store in `dir` (`serve --http` makes it).
pub fn token(dir: &Path) -> String {
    let path = dir.join("http.token");
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .trim()
        .to_string()
}

/// `url` with `token` in its query (as the page's event streams send it).
pub fn with_token(url: &str, token: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}token={token}")
}

impl Web {
    pub fn start(dir: &Path) -> Web {
        Web::start_with(dir, &[])
    }

    /// [`Web::start`] with more `serve` arguments.
    pub fn start_with(dir: &Path, args: &[&str]) -> Web {
        let mut all = vec!["--http", "127.0.0.1:0"];
        all.extend_from_slice(args);
        let daemon = Daemon::start(dir, &all);
        let mut c = Conn::try_connect(dir).expect("connect");
        let hello = c.call(json!({"id": 1, "method": "hello"}));
        let addr = hello["result"]["http"]
            .as_str()
            .unwrap_or_else(|| panic!("hello names no http address: {hello}"))
            .to_string();
        Web {
            daemon,
            base: format!("http://{addr}"),
            token: token(dir),
        }
    }

    /// The URL of `path` as the owner's (the token in the query).
    pub fn url(&self, path: &str) -> String {
        with_token(&format!("{}{path}", self.base), &self.token)
    }

    /// GET `path` as the owner (`Authorization: Bearer`): status and body.
    pub fn get(&self, path: &str) -> (u16, String) {
        let auth = format!("Bearer {}", self.token);
        get_with(&format!("{}{path}", self.base), &[("authorization", &auth)])
    }

    /// GET `path` with no token: status and body.
    pub fn get_anon(&self, path: &str) -> (u16, String) {
        get(&format!("{}{path}", self.base))
    }

    #[track_caller]
    pub fn json(&self, path: &str) -> Value {
        let (status, body) = self.get(path);
        assert_eq!(status, 200, "GET {path}: {body}");
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("GET {path}: {e}: {body}"))
    }
}

fn agent() -> ureq::Agent {
    let config = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(20)))
        .build();
    ureq::Agent::new_with_config(config)
}

pub fn get(url: &str) -> (u16, String) {
    get_with(url, &[])
}

/// GET `url` with extra `headers`: status and body.
pub fn get_with(url: &str, headers: &[(&str, &str)]) -> (u16, String) {
    let mut req = agent().get(url);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let mut r = req.call().unwrap_or_else(|e| panic!("GET {url}: {e}"));
    let status = r.status().as_u16();
    (status, r.body_mut().read_to_string().unwrap())
}

fn send(method: &str, url: &str, body: &Value) -> Value {
    let a = agent();
    let mut r = match method {
        "POST" => a
            .post(url)
            .header("content-type", "application/json")
            .send(body.to_string()),
        "DELETE" => a.delete(url).call(),
        _ => a.get(url).call(),
    }
    .unwrap_or_else(|e| panic!("{method} {url}: {e}"));
    let text = r.body_mut().read_to_string().unwrap();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{method} {url}: {e}: {text}"))
}

/// An open Server-Sent Events stream, read one event at a time.
pub struct Sse {
    lines: std::io::Lines<std::io::BufReader<ureq::BodyReader<'static>>>,
}

/// One event: its name, its data (JSON) and its id, if it has one.
pub type SseEvent = (String, Value, Option<u64>);

impl Sse {
    /// GETs `url` (with `Last-Event-ID: last` when given) and checks that
    /// the answer is an event stream.
    pub fn open(url: &str, last_event_id: Option<u64>) -> Sse {
        let mut req = agent().get(url);
        if let Some(id) = last_event_id {
            req = req.header("Last-Event-ID", id.to_string());
        }
        let r = req.call().unwrap_or_else(|e| panic!("GET {url}: {e}"));
        let kind = r.headers()["content-type"].to_str().unwrap().to_string();
        assert_eq!(kind, "text/event-stream", "GET {url}");
        let reader = std::io::BufReader::new(r.into_body().into_reader());
        Sse {
            lines: std::io::BufRead::lines(reader),
        }
    }

    /// The next event (keep-alive comments skipped); panics at the end.
    pub fn next(&mut self) -> SseEvent {
        let (mut name, mut data, mut id) = (String::new(), None, None);
        for line in self.lines.by_ref() {
            let line = line.expect("read the event stream");
            if line.is_empty() {
                if let Some(d) = data.take() {
                    return (name, d, id);
                }
                continue;
            }
            if let Some(v) = line.strip_prefix("event: ") {
                name = v.to_string();
            } else if let Some(v) = line.strip_prefix("data: ") {
                data = Some(serde_json::from_str(v).unwrap_or_else(|e| panic!("{e}: {v}")));
            } else if let Some(v) = line.strip_prefix("id: ") {
                id = Some(v.parse().unwrap());
            }
        }
        panic!("the event stream ended");
    }
}

/// The value of the sample `series` (name and labels exactly as rendered,
/// e.g. `agentlog_agents{status="busy"}`) in a Prometheus text page.
pub fn sample(page: &str, series: &str) -> Option<f64> {
    page.lines().filter(|l| !l.starts_with('#')).find_map(|l| {
        l.strip_prefix(series)?
            .strip_prefix(' ')?
            .trim()
            .parse()
            .ok()
    })
}

#[track_caller]
pub fn must(page: &str, series: &str) -> f64 {
    sample(page, series).unwrap_or_else(|| panic!("no sample {series} in:\n{page}"))
}

/// chromedriver driving a headless chromium, and one session.
pub struct Browser {
    driver: Child,
    url: String,
    session: String,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Starts chromedriver and a headless session. Installs Debian's
    /// chromium when it is missing (`super::prereq`), and fails (never
    /// skips) when that cannot be done.
    pub fn start() -> Browser {
        super::prereq::chromium();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let driver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        let url = format!("http://127.0.0.1:{port}");
        let profile = tempfile::tempdir().unwrap();
        let mut b = Browser {
            driver,
            url,
            session: String::new(),
            _profile: profile,
        };
        eventually("chromedriver to answer", || {
            let r = agent().get(&format!("{}/status", b.url)).call().ok()?;
            (r.status().as_u16() == 200).then_some(())
        });
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": CHROMIUM,
                "args": [
                    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                    "--no-first-run", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync",
                    "--window-size=1280,900",
                    format!("--user-data-dir={}", b._profile.path().display()),
                ]
            }
        }}});
        let created = send("POST", &format!("{}/session", b.url), &caps);
        b.session = created["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("chromedriver made no session: {created}"))
            .to_string();
        b
    }

    fn cmd(&self, method: &str, path: &str, body: &Value) -> Value {
        let url = format!("{}/session/{}{path}", self.url, self.session);
        let r = send(method, &url, body);
        assert!(r["value"].get("error").is_none(), "{method} {path}: {r}");
        r["value"].clone()
    }

    pub fn goto(&self, url: &str) {
        self.cmd("POST", "/url", &json!({ "url": url }));
    }

    /// Runs `script` (a function body; `return` gives the value) in the page.
    pub fn eval(&self, script: &str) -> Value {
        self.cmd(
            "POST",
            "/execute/sync",
            &json!({"script": script, "args": []}),
        )
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let _ = agent()
                .delete(&format!("{}/session/{}", self.url, self.session))
                .call();
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}
