//! A minimal client of etcd's v3 JSON gateway (grpc-gateway over HTTP/1.1),
//! the etcd side of `bench cluster`: lease grant and keep-alive, put, and a
//! prefix watch read as a stream of JSON lines.
//!
//! Keys and values travel base64-encoded and 64-bit integers as decimal
//! strings, as the gateway's JSON mapping of the protobuf messages says.
//! One [`EtcdClient`] keeps one HTTP connection alive (a `ureq` agent), so a
//! worker thread pays no connection setup per request. Every error names the
//! URL and what the server answered.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use serde_json::Value;
use std::io::{BufRead, BufReader, Read};
use std::time::Duration;

/// One connection to one etcd member.
pub struct EtcdClient {
    agent: ureq::Agent,
    base: String,
}

/// The `result` of a JSON-gateway reply, or why there is none.
fn result_of(text: &str, url: &str) -> Result<Value, String> {
    let v: Value =
        serde_json::from_str(text).map_err(|e| format!("{url}: not JSON ({e}): {text:?}"))?;
    if let Some(err) = v.get("error") {
        return Err(format!("{url}: {err}"));
    }
    Ok(v)
}

/// A gateway int64 (a decimal string, or a number).
fn int_of(v: &Value) -> Option<i64> {
    v.as_str()
        .and_then(|s| s.parse().ok())
        .or_else(|| v.as_i64())
}

impl EtcdClient {
    /// A client of the member at `base` (`http://127.0.0.1:PORT`); requests
    /// time out after 10 s.
    pub fn new(base: &str) -> EtcdClient {
        let config = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_secs(10)))
            .build();
        EtcdClient {
            agent: ureq::Agent::new_with_config(config),
            base: base.trim_end_matches('/').to_string(),
        }
    }

    fn post(&self, path: &str, body: &str) -> Result<Value, String> {
        let url = format!("{}{path}", self.base);
        let mut resp = self
            .agent
            .post(&url)
            .content_type("application/json")
            .send(body)
            .map_err(|e| format!("POST {url}: {e}"))?;
        let text = resp
            .body_mut()
            .read_to_string()
            .map_err(|e| format!("POST {url}: reading the reply: {e}"))?;
        result_of(&text, &url)
    }

    /// `GET /health` says `"health": "true"`.
    pub fn healthy(&self) -> Result<bool, String> {
        let url = format!("{}/health", self.base);
        let mut resp = self
            .agent
            .get(&url)
            .call()
            .map_err(|e| format!("GET {url}: {e}"))?;
        let text = resp
            .body_mut()
            .read_to_string()
            .map_err(|e| format!("GET {url}: {e}"))?;
        Ok(result_of(&text, &url)?
            .get("health")
            .and_then(Value::as_str)
            == Some("true"))
    }

    /// Grants a lease of `ttl_s` seconds; returns its id.
    pub fn grant(&self, ttl_s: u64) -> Result<i64, String> {
        let v = self.post("/v3/lease/grant", &format!("{{\"TTL\":{ttl_s}}}"))?;
        v.get("ID")
            .and_then(int_of)
            .ok_or_else(|| format!("{}/v3/lease/grant: no lease id in {v}", self.base))
    }

    /// Renews lease `id` once (one request, one reply); an expired lease
    /// (no TTL left) is an error.
    pub fn keepalive(&self, id: i64) -> Result<(), String> {
        let v = self.post("/v3/lease/keepalive", &format!("{{\"ID\":\"{id}\"}}"))?;
        let ttl = v.get("result").and_then(|r| r.get("TTL")).and_then(int_of);
        match ttl {
            Some(t) if t > 0 => Ok(()),
            _ => Err(format!(
                "{}/v3/lease/keepalive: lease {id} not renewed: {v}",
                self.base
            )),
        }
    }

    /// Puts `key` = `value` attached to `lease` (0: none); returns the
    /// store revision that holds it (the put is committed by a quorum).
    pub fn put(&self, key: &str, value: &str, lease: i64) -> Result<i64, String> {
        let body = format!(
            "{{\"key\":\"{}\",\"value\":\"{}\",\"lease\":\"{lease}\"}}",
            B64.encode(key),
            B64.encode(value)
        );
        let v = self.post("/v3/kv/put", &body)?;
        v.get("header")
            .and_then(|h| h.get("revision"))
            .and_then(int_of)
            .ok_or_else(|| format!("{}/v3/kv/put: no revision in {v}", self.base))
    }

    /// Watches every key starting with `prefix`; returns once etcd
    /// confirmed the watch is created, so no later put is missed.
    pub fn watch_prefix(&self, prefix: &str) -> Result<Watch, String> {
        let mut end = prefix.as_bytes().to_vec();
        let last = end.last_mut().ok_or("an empty watch prefix")?;
        *last += 1;
        let body = format!(
            "{{\"create_request\":{{\"key\":\"{}\",\"range_end\":\"{}\"}}}}",
            B64.encode(prefix),
            B64.encode(&end)
        );
        let url = format!("{}/v3/watch", self.base);
        // A watch streams for as long as it runs: no overall timeout.
        let agent = ureq::Agent::new_with_defaults();
        let resp = agent
            .post(&url)
            .content_type("application/json")
            .send(&body)
            .map_err(|e| format!("POST {url}: {e}"))?;
        let mut w = Watch {
            lines: BufReader::new(Box::new(resp.into_body().into_reader())),
            url,
            line: String::new(),
        };
        let first = w.next_message()?;
        if first.get("created").and_then(Value::as_bool) != Some(true) {
            return Err(format!("{}: watch not created: {first}", w.url));
        }
        Ok(w)
    }
}

/// A running watch: one JSON message per line.
pub struct Watch {
    lines: BufReader<Box<dyn Read + Send>>,
    url: String,
    line: String,
}

impl Watch {
    fn next_message(&mut self) -> Result<Value, String> {
        self.line.clear();
        match self.lines.read_line(&mut self.line) {
            Ok(0) => Err(format!("{}: the watch stream ended", self.url)),
            Ok(_) => {
                let v = result_of(&self.line, &self.url)?;
                v.get("result")
                    .cloned()
                    .ok_or_else(|| format!("{}: a watch message without result: {v}", self.url))
            }
            Err(e) => Err(format!("{}: reading the watch stream: {e}", self.url)),
        }
    }

    /// The next batch of put events, as (key, value) pairs.
    pub fn next_puts(&mut self) -> Result<Vec<(String, String)>, String> {
        let msg = self.next_message()?;
        let Some(events) = msg.get("events").and_then(Value::as_array) else {
            return Ok(Vec::new());
        };
        let text = |v: Option<&Value>| -> Result<String, String> {
            let b = B64
                .decode(v.and_then(Value::as_str).unwrap_or(""))
                .map_err(|e| format!("{}: a watch event not in base64: {e}", self.url))?;
            Ok(String::from_utf8_lossy(&b).into_owned())
        };
        events
            .iter()
            .filter_map(|e| e.get("kv"))
            .map(|kv| Ok((text(kv.get("key"))?, text(kv.get("value"))?)))
            .collect()
    }
}
