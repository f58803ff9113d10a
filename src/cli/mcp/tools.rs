//! The MCP tools of `agentlog mcp`: for each, its name, description, the
//! JSON Schema of its input and of its structured result, and how a call's
//! arguments become one store command (the protocol method and the CLI's
//! argument ids, `backend::Backend::call`).
//!
//! Invariants: a tool takes only the arguments its schema lists (anything
//! else is refused, naming the argument); the values are checked for type
//! here and for meaning by the command itself, so a tool refuses exactly
//! what the CLI refuses, with its message. `register` takes no process
//! identity or transport from the caller: they are the session's
//! ([`Identity`]), so an agent registered through the server is always
//! transport-attached to it.

use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use serde_json::{json, Map, Value};
use std::sync::Arc;
use std::time::Duration;

/// The longest `wait` a read accepts, in seconds (as `read --wait` bounds
/// nothing, a tool call bounds itself: an hour).
pub const MAX_WAIT_SECONDS: f64 = 3600.0;

/// Who the session's registrations are: the MCP host process (the one
/// that started `agentlog mcp`) and the client named in `initialize`.
#[derive(Debug, Clone, Default)]
pub struct Identity {
    pub host_pid: Option<u32>,
    pub host_start_time: Option<u64>,
    /// `NAME[/VERSION]` from the client's `clientInfo`.
    pub transport_client: Option<String>,
}

/// What a tool call asks of the store.
#[derive(Debug, Clone, PartialEq)]
pub enum Request {
    /// One command, answered at once.
    Command {
        method: &'static str,
        params: Map<String, Value>,
    },
    /// `read` with a wait: blocks until mail or the time is up.
    WaitingRead {
        params: Map<String, Value>,
        wait: Duration,
    },
}

/// One tool call, decoded.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    pub request: Request,
    /// The agent this call itself registers or heartbeats: the session's
    /// renewal of heartbeats leaves it out.
    pub renews: Option<String>,
    /// Set for `register`: the agent joins the session once registered.
    pub registers: Option<String>,
}

const STATUSES: [&str; 10] = [
    "spawning",
    "ready",
    "idle",
    "busy",
    "live",
    "restarting",
    "orphaned",
    "failed",
    "exited",
    "permanent_dead",
];

fn text(description: &str) -> Value {
    json!({"type": "string", "description": description})
}

fn schema(properties: Value, required: &[&str]) -> Arc<JsonObject> {
    let mut s = json!({
        "type": "object",
        "properties": properties,
        "additionalProperties": false,
    });
    if !required.is_empty() {
        s["required"] = json!(required);
    }
    Arc::new(s.as_object().cloned().unwrap_or_default())
}

fn output(properties: Value, required: &[&str]) -> Arc<JsonObject> {
    let s = json!({"type": "object", "properties": properties, "required": required});
    Arc::new(s.as_object().cloned().unwrap_or_default())
}

fn tool(name: &'static str, description: &'static str, input: Arc<JsonObject>) -> Tool {
    Tool::new(name, description, input)
}

/// Every tool, in the order `tools/list` gives them.
pub fn all() -> Vec<Tool> {
    let applied = || {
        output(
            json!({"agent": {"type": "string"}, "lsn": {"type": "integer"}}),
            &["agent", "lsn"],
        )
    };
    let read_only = |t: Tool| t.annotate(ToolAnnotations::new().read_only(true));
    vec![
        tool(
            "register",
            "Register an agent, attached to this MCP session: its process is the MCP host \
             and its transport client the one named at initialize. Registering the same name \
             again from the same host renews it.",
            schema(
                json!({
                    "name": text("The agent's name (its key in the registry)"),
                    "provider": text("claude, codex, gemini, …"),
                    "cwd": text("Working directory [default: the server's]"),
                    "role": text("Role"),
                    "parent": text("Parent agent (makes this a child agent)"),
                    "project_root": text("Project root"),
                    "short_id": text("Short id"),
                    "log_path": text("Log file path"),
                }),
                &["name", "provider"],
            ),
        )
        .with_raw_output_schema(output(
            json!({
                "agent": {"type": "string"},
                "lsn": {"type": "integer"},
                "registration": {"type": "string", "enum": ["new", "renewal", "new life"]},
            }),
            &["agent", "lsn", "registration"],
        )),
        tool(
            "heartbeat",
            "Record that an agent is alive (every tool call also renews the heartbeats of \
             the agents this session registered).",
            schema(json!({"name": text("The agent")}), &["name"]),
        )
        .with_raw_output_schema(applied()),
        tool(
            "set_status",
            "Set an agent's status, with an optional message saying why.",
            schema(
                json!({
                    "name": text("The agent"),
                    "status": {"type": "string", "enum": STATUSES},
                    "message": text("Why (kept as the status message)"),
                }),
                &["name", "status"],
            ),
        )
        .with_raw_output_schema(applied()),
        tool(
            "post",
            "Post a message from an agent to one agent, or to all when `to` is left out; \
             returns the message id.",
            schema(
                json!({
                    "from": text("Sender"),
                    "to": text("Recipient [default: broadcast to all]"),
                    "body": text("The message body"),
                    "category": text("Category [default: note]"),
                    "priority": {"type": "string", "enum": ["low", "normal", "high", "critical"]},
                    "privacy": {"type": "string", "enum": ["public", "team", "private"]},
                    "ttl_hours": {"type": "number", "exclusiveMinimum": 0,
                                  "description": "Time to live in hours [default: 12]"},
                    "request_id": text("Idempotency key: the same request again returns the first message's id"),
                    "project_root": text("Project root"),
                }),
                &["from", "body"],
            ),
        )
        .with_raw_output_schema(output(json!({"id": {"type": "integer"}}), &["id"])),
        tool(
            "read",
            "Read an agent's unread messages (oldest first) and mark them read. `budget` \
             bounds the page in bytes of one-line rendering, `limit` in messages; the rest \
             stay unread. With `wait`, blocks until there is mail or the seconds pass \
             (then an empty page, timed_out); cancelling the call leaves the mail unread.",
            schema(
                json!({
                    "name": text("The reader"),
                    "budget": {"type": "integer", "minimum": 1},
                    "limit": {"type": "integer", "minimum": 1},
                    "wait": {"type": "number", "minimum": 0, "maximum": MAX_WAIT_SECONDS},
                    "project_root": text("Only messages of this project"),
                }),
                &["name"],
            ),
        )
        .with_raw_output_schema(output(
            json!({
                "agent": {"type": "string"},
                "messages": {"type": "array", "items": {"type": "object"}},
                "dropped": {"type": "array"},
                "left": {"type": "integer"},
                "timed_out": {"type": "boolean"},
            }),
            &["agent", "messages", "left", "timed_out"],
        )),
        read_only(tool(
            "list",
            "The registry: live agents (all with `all`), filtered by status, provider or project.",
            schema(
                json!({
                    "all": {"type": "boolean", "description": "Include finished agents"},
                    "status": {"type": "string", "enum": STATUSES},
                    "provider": text("Only agents of this provider"),
                    "project_root": text("Only agents of this project"),
                }),
                &[],
            ),
        ))
        .with_raw_output_schema(output(
            json!({"agents": {"type": "array", "items": {"type": "object"}}}),
            &["agents"],
        )),
        read_only(tool(
            "show",
            "One agent: every field, its life, unread and sent counts, the LSN of its last event.",
            schema(json!({"name": text("The agent")}), &["name"]),
        ))
        .with_raw_output_schema(output(
            json!({
                "name": {"type": "string"},
                "status": {"type": "string"},
                "unread": {"type": "integer"},
                "sent": {"type": "integer"},
            }),
            &["name", "status"],
        )),
        read_only(tool(
            "audit",
            "One agent's timeline: each event with its time, LSN and why; heartbeat runs collapsed.",
            schema(
                json!({
                    "name": text("The agent"),
                    "since": {"type": "string", "format": "date-time"},
                    "until": {"type": "string", "format": "date-time"},
                }),
                &["name"],
            ),
        ))
        .with_raw_output_schema(output(
            json!({"agent": {"type": "string"}, "events": {"type": "array"}}),
            &["agent", "events"],
        )),
        read_only(tool(
            "replay",
            "The registry as it was at a time (`at`, RFC 3339 UTC) or an LSN (`lsn`): exactly one.",
            schema(
                json!({
                    "at": {"type": "string", "format": "date-time"},
                    "lsn": {"type": "integer", "minimum": 0},
                }),
                &[],
            ),
        ))
        .with_raw_output_schema(output(
            json!({
                "events": {"type": "integer"},
                "agents": {"type": "array", "items": {"type": "object"}},
                "messages": {"type": "integer"},
            }),
            &["events", "agents"],
        )),
    ]
}

/// A tool call's arguments, taken one by one and checked for type.
struct Args<'a> {
    tool: &'a str,
    given: Map<String, Value>,
    params: Map<String, Value>,
}

impl<'a> Args<'a> {
    fn new(tool: &'a str, given: Option<Map<String, Value>>) -> Args<'a> {
        Args {
            tool,
            given: given.unwrap_or_default(),
            params: Map::new(),
        }
    }

    fn take(&mut self, key: &str) -> Option<Value> {
        self.given.remove(key).filter(|v| !v.is_null())
    }

    fn bad(&self, key: &str, what: &str) -> String {
        format!("tool `{}`: argument `{key}` must be {what}", self.tool)
    }

    /// A string argument, copied to the command's parameter `param`.
    fn string_as(
        &mut self,
        key: &str,
        param: &str,
        required: bool,
    ) -> Result<Option<String>, String> {
        match self.take(key) {
            Some(Value::String(s)) => {
                self.params.insert(param.into(), json!(s));
                Ok(Some(s))
            }
            Some(_) => Err(self.bad(key, "a string")),
            None if required => Err(format!(
                "tool `{}`: argument `{key}` is required",
                self.tool
            )),
            None => Ok(None),
        }
    }

    fn string(&mut self, key: &str, required: bool) -> Result<Option<String>, String> {
        self.string_as(key, key, required)
    }

    fn number(&mut self, key: &str, integer: bool) -> Result<Option<f64>, String> {
        match self.take(key) {
            Some(Value::Number(n)) if !integer || n.is_u64() => {
                self.params.insert(key.into(), Value::Number(n.clone()));
                Ok(n.as_f64())
            }
            Some(_) if integer => Err(self.bad(key, "a non-negative integer")),
            Some(_) => Err(self.bad(key, "a number")),
            None => Ok(None),
        }
    }

    fn flag(&mut self, key: &str) -> Result<(), String> {
        match self.take(key) {
            Some(Value::Bool(b)) => {
                self.params.insert(key.into(), json!(b));
                Ok(())
            }
            Some(_) => Err(self.bad(key, "true or false")),
            None => Ok(()),
        }
    }

    /// The command's parameters; any argument not taken is refused.
    fn finish(self) -> Result<Map<String, Value>, String> {
        match self.given.keys().next() {
            Some(extra) => Err(format!("tool `{}` takes no argument `{extra}`", self.tool)),
            None => Ok(self.params),
        }
    }
}

/// Decodes a call of tool `name` with `arguments` for a session of `who`;
/// `Err` is the message of a refused call (unknown tool, bad argument).
pub fn decode(
    name: &str,
    arguments: Option<Map<String, Value>>,
    who: &Identity,
) -> Result<Call, String> {
    let mut a = Args::new(name, arguments);
    let command = |method: &'static str, params| Request::Command { method, params };
    let call = match name {
        "register" => {
            let agent = a.string("name", true)?;
            a.string("provider", true)?;
            if a.string("cwd", false)?.is_none() {
                let cwd = std::env::current_dir().map_err(|e| {
                    format!("tool `register`: no `cwd` given and the server's is unreadable: {e}")
                })?;
                a.params.insert("cwd".into(), json!(cwd.to_string_lossy()));
            }
            for key in ["role", "parent", "project_root", "short_id", "log_path"] {
                a.string(key, false)?;
            }
            if let Some(pid) = who.host_pid {
                a.params.insert("pid".into(), json!(pid));
            }
            if let Some(start) = who.host_start_time {
                a.params.insert("pid_start_time".into(), json!(start));
            }
            if let Some(client) = &who.transport_client {
                a.params.insert("transport_client".into(), json!(client));
            }
            Call {
                request: command("register", a.finish()?),
                renews: agent.clone(),
                registers: agent,
            }
        }
        "heartbeat" => {
            let agent = a.string("name", true)?;
            if let Some(pid) = who.host_pid {
                a.params.insert("pid".into(), json!(pid));
            }
            Call {
                request: command("heartbeat", a.finish()?),
                renews: agent,
                registers: None,
            }
        }
        "set_status" => {
            a.string("name", true)?;
            a.string("status", true)?;
            a.string("message", false)?;
            plain(command("status", a.finish()?))
        }
        "post" => {
            a.string("from", true)?;
            a.string_as("body", "text", true)?;
            for key in [
                "to",
                "category",
                "priority",
                "privacy",
                "request_id",
                "project_root",
            ] {
                a.string(key, false)?;
            }
            a.number("ttl_hours", false)?;
            plain(command("post", a.finish()?))
        }
        "read" => {
            a.string("name", true)?;
            a.string("project_root", false)?;
            a.number("budget", true)?;
            a.number("limit", true)?;
            let wait = match a.take("wait") {
                Some(Value::Number(n)) => match n.as_f64() {
                    Some(s) if (0.0..=MAX_WAIT_SECONDS).contains(&s) => {
                        Some(Duration::from_secs_f64(s))
                    }
                    _ => return Err(a.bad("wait", "a number of seconds from 0 to 3600")),
                },
                Some(_) => return Err(a.bad("wait", "a number of seconds from 0 to 3600")),
                None => None,
            };
            let params = a.finish()?;
            plain(match wait {
                Some(wait) => Request::WaitingRead { params, wait },
                None => command("read", params),
            })
        }
        "list" => {
            a.flag("all")?;
            for key in ["status", "provider", "project_root"] {
                a.string(key, false)?;
            }
            plain(command("list", a.finish()?))
        }
        "show" => {
            a.string("name", true)?;
            plain(command("show", a.finish()?))
        }
        "audit" => {
            a.string("name", true)?;
            a.string("since", false)?;
            a.string("until", false)?;
            plain(command("audit", a.finish()?))
        }
        "replay" => {
            a.string("at", false)?;
            a.number("lsn", true)?;
            plain(command("replay", a.finish()?))
        }
        other => return Err(format!("no tool `{other}`")),
    };
    Ok(call)
}

fn plain(request: Request) -> Call {
    Call {
        request,
        renews: None,
        registers: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: Value) -> Option<Map<String, Value>> {
        v.as_object().cloned()
    }

    #[test]
    fn every_tool_has_an_object_schema_for_input_and_result() {
        let tools = all();
        let names: Vec<_> = tools.iter().map(|t| t.name.to_string()).collect();
        assert_eq!(
            names,
            [
                "register",
                "heartbeat",
                "set_status",
                "post",
                "read",
                "list",
                "show",
                "audit",
                "replay"
            ]
        );
        for t in &tools {
            assert_eq!(t.input_schema["type"], "object", "{}", t.name);
            let out = t.output_schema.as_ref().expect("an output schema");
            assert_eq!(out["type"], "object", "{}", t.name);
        }
    }

    #[test]
    fn register_carries_the_session_identity_not_the_callers() {
        let who = Identity {
            host_pid: Some(42),
            host_start_time: Some(7),
            transport_client: Some("claude-code/2.0".into()),
        };
        let call = decode(
            "register",
            args(json!({"name": "a", "provider": "claude", "cwd": "/w"})),
            &who,
        )
        .unwrap();
        let Request::Command { method, params } = &call.request else {
            panic!("{call:?}")
        };
        assert_eq!(*method, "register");
        assert_eq!(params["pid"], 42);
        assert_eq!(params["pid_start_time"], 7);
        assert_eq!(params["transport_client"], "claude-code/2.0");
        assert_eq!(call.registers.as_deref(), Some("a"));
        let e = decode(
            "register",
            args(json!({"name": "a", "provider": "claude", "pid": 1})),
            &who,
        )
        .unwrap_err();
        assert!(e.contains("no argument `pid`"), "{e}");
    }

    #[test]
    fn bad_arguments_are_refused_naming_them() {
        let who = Identity::default();
        let e = decode("read", args(json!({"name": "a", "wait": -1})), &who).unwrap_err();
        assert!(e.contains("`wait`"), "{e}");
        let e = decode("read", args(json!({"name": "a", "limit": 1.5})), &who).unwrap_err();
        assert!(e.contains("`limit`"), "{e}");
        let e = decode("post", args(json!({"from": "a"})), &who).unwrap_err();
        assert!(e.contains("`body` is required"), "{e}");
        assert!(decode("nope", None, &who).unwrap_err().contains("no tool"));
        let call = decode("read", args(json!({"name": "a", "wait": 0.5})), &who).unwrap();
        assert!(matches!(call.request, Request::WaitingRead { .. }));
    }
}
