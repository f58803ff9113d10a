//! The CLI and the daemon: the client side of every store command, the
//! [`Dispatch`] that runs a command inside the daemon (served by
//! `cmd::serve`), and the watch stream `watch` and `log --follow` print.
//!
//! A command goes through the daemon when the store's socket answers and is
//! run directly otherwise (`--no-daemon` forces direct). Both ways run the
//! same command code: the client sends the subcommand's arguments as
//! `params` (PROTOCOL.md) with `render: "text"`, the daemon parses them with
//! the same clap grammar, runs the command on its open store with output to
//! a buffer, and the client prints that buffer; so output, messages and exit
//! codes are identical. A client never falls back to a direct write once
//! connected: a busy daemon is waited for, not bypassed.

use super::args::{self, Cli, Command};
use super::cmd::{self, run_command};
use super::open::serving;
use super::output::{self, Ui};
use super::{render, Usage};
use agentlog::daemon::client::{Client, ClientError, WatchItem};
use agentlog::daemon::{code, Dispatch, ErrorReply, Outcome};
use agentlog::model::Agent;
use agentlog::registry::codec::Origin;
use agentlog::registry::{tag, Event, Lsn};
use agentlog::store::Store;
use anyhow::{Context, Result};
use clap::parser::ValueSource;
use clap::{ArgAction, CommandFactory, FromArgMatches};
use serde_json::{json, Map, Value};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

/// Global flags that are not a command's parameters.
const GLOBALS: [&str; 4] = ["dir", "json", "no_daemon", "lock_timeout"];
/// Parameters holding paths (made absolute before they travel).
const PATHS: [&str; 3] = ["out", "file", "export"];
/// Methods an observer may call.
const READ_ONLY: [&str; 9] = [
    "list", "get", "show", "presence", "replay", "audit", "log", "verify", "stats",
];
/// Every operation method (PROTOCOL.md, "Methods"); `init`, `repair`,
/// `demo` and `bench` run only directly.
const METHODS: [&str; 26] = [
    "register",
    "attach",
    "detach",
    "heartbeat",
    "status",
    "update",
    "remove",
    "post",
    "read",
    "sessions.open",
    "sessions.heartbeat",
    "sessions.close",
    "sweep",
    "snapshot",
    "export",
    "import",
    "compact",
    "list",
    "get",
    "show",
    "presence",
    "replay",
    "audit",
    "log",
    "verify",
    "stats",
];

/// Runs `command` through the daemon when one serves `dir`; `None` means
/// run it directly.
pub(super) fn try_daemon(
    ui: &Ui,
    dir: &Path,
    command: &Command,
    no_daemon: bool,
) -> Result<Option<ExitCode>> {
    match command {
        Command::Serve(a) => return cmd::serve::run(dir, a).map(Some),
        Command::Watch(a) => return cmd::watch::run(ui, dir, a).map(Some),
        Command::Init(_) | Command::Repair(_) | Command::Demo(_) | Command::Bench(_) => {
            return Ok(None)
        }
        _ if no_daemon => return Ok(None),
        _ => {}
    }
    let client = match Client::connect(dir) {
        Ok(c) => c,
        Err(ClientError::NoDaemon(_)) => return Ok(None),
        // A socket this user may not open (a group member before the
        // socket had the store's group): what only reads is read directly,
        // as the files allow; a write says why it cannot go through.
        Err(ClientError::Io { source, .. })
            if source.kind() == std::io::ErrorKind::PermissionDenied
                && READ_ONLY.contains(&this_invocation()?.0.as_str()) =>
        {
            return Ok(None)
        }
        Err(e) => return Err(e.into()),
    };
    let (method, mut params) = this_invocation()?;
    match command {
        Command::Log(a) if a.follow => return follow(ui, dir, client, a.from).map(Some),
        // Read-only commands that write a file the user names run here, so
        // the file is written with the user's authority, never the daemon's.
        Command::Export(cmd::export::Export { out: Some(_), .. })
        | Command::Replay(cmd::replay::Replay {
            export: Some(_), ..
        }) => return Ok(None),
        Command::Import(a) if !daemon_opens(dir, &a.file) => {
            send_content(&mut params, &a.file)?;
        }
        _ => {}
    }
    params.insert("render".into(), json!("text"));
    // This invocation's stand-in clock travels with it (README, "Time").
    if let Ok(now) = std::env::var("AGENTLOG_NOW") {
        params.insert("clock".into(), json!(now));
    }
    if ui.json {
        params.insert("json".into(), json!(true));
    }
    Ok(Some(call_and_print(client, &method, params)?))
}

/// Whether the daemon may open `file` for this import itself: it runs as
/// this user (the socket is its, [`agentlog::daemon::access`]) and `file`
/// is a regular file (the daemon opens nothing else).
fn daemon_opens(dir: &Path, file: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let ours = std::fs::metadata(agentlog::daemon::socket_path(dir))
        .is_ok_and(|m| m.uid() == rustix::process::geteuid().as_raw());
    ours && std::fs::metadata(file).is_ok_and(|m| m.is_file())
}

/// Reads `file` here (bounded, as a direct import reads it) and puts its
/// content in `params` in place of the path: the daemon then never opens
/// what this user named. A file the import would refuse is refused here,
/// with the same message, before anything is sent.
fn send_content(params: &mut Map<String, Value>, file: &Path) -> Result<()> {
    let bytes = agentlog::import::read_registry_bytes(
        file,
        std::time::Duration::from_secs(10),
        agentlog::import::InputKind::Any,
    )?;
    agentlog::import::parse_registry(&bytes, file)?;
    let text =
        String::from_utf8(bytes).with_context(|| format!("{}: not UTF-8 text", file.display()))?;
    let name = params.remove("file").unwrap_or_else(|| json!(file));
    params.insert("source".into(), name);
    params.insert("content".into(), json!(text));
    Ok(())
}

fn call_and_print(
    mut client: Client,
    method: &str,
    params: Map<String, Value>,
) -> Result<ExitCode> {
    let params_had_content = params.contains_key("content");
    match client.call(method, Value::Object(params)) {
        Ok(reply) => {
            let text = reply.result["text"].as_str().unwrap_or_default();
            let mut out = std::io::stdout().lock();
            out.write_all(text.as_bytes())?;
            out.flush()?;
            eprint!("{}", reply.result["stderr"].as_str().unwrap_or_default());
            Ok(ExitCode::from(reply.exit))
        }
        Err(ClientError::Server(e)) => {
            eprintln!("agentlog: {}", e.message);
            if e.code == code::LINE_TOO_LONG && params_had_content {
                eprintln!(
                    "agentlog: the file's content is sent in one request; a larger file \
                     is imported by the daemon's own user, whose path the daemon opens"
                );
            }
            Ok(ExitCode::from(e.exit))
        }
        Err(e) => Err(e.into()),
    }
}

/// The method and parameters of this process's own command line.
fn this_invocation() -> Result<(String, Map<String, Value>)> {
    let root = Cli::command();
    let m = root.clone().try_get_matches_from(std::env::args_os())?;
    let (mut cmd, mut m, mut path) = (&root, &m, Vec::new());
    while let Some((name, sub)) = m.subcommand() {
        cmd = cmd
            .find_subcommand(name)
            .expect("clap matched this subcommand");
        path.push(name.to_string());
        m = sub;
    }
    let cwd = std::env::current_dir().context("reading the current directory")?;
    let mut params = Map::new();
    for arg in cmd.get_arguments() {
        let id = arg.get_id().as_str();
        if GLOBALS.contains(&id) || matches!(id, "help" | "version") {
            continue;
        }
        if !matches!(
            m.value_source(id),
            Some(ValueSource::CommandLine | ValueSource::EnvVariable)
        ) {
            continue;
        }
        let value = if matches!(arg.get_action(), ArgAction::SetTrue) {
            json!(true)
        } else {
            let raw: Vec<String> = m
                .get_raw(id)
                .into_iter()
                .flatten()
                .map(|v| {
                    let v = v
                        .to_str()
                        .ok_or_else(|| Usage(format!("--{id}: not UTF-8")))?;
                    Ok(if PATHS.contains(&id) && Path::new(v).is_relative() {
                        cwd.join(v).to_string_lossy().into_owned()
                    } else {
                        v.to_string()
                    })
                })
                .collect::<Result<_>>()?;
            if matches!(arg.get_action(), ArgAction::Append) {
                json!(raw)
            } else {
                json!(raw.into_iter().next().unwrap_or_default())
            }
        };
        params.insert(id.to_string(), value);
    }
    Ok((path.join("."), params))
}

/// The command line that `method` with `params` stands for; `root` is the
/// built grammar (positional indices assigned).
pub(super) fn argv_of(
    root: &clap::Command,
    dir: &Path,
    method: &str,
    params: &Map<String, Value>,
) -> Result<Vec<String>, String> {
    let mut cmd = root;
    let mut argv = vec![
        "agentlog".to_string(),
        "--dir".into(),
        dir.to_string_lossy().into_owned(),
    ];
    // Structured results unless the CLI's text is asked for.
    let text = params.get("render") == Some(&json!("text"));
    if !text || params.get("json") == Some(&Value::Bool(true)) {
        argv.push("--json".into());
    }
    for part in method.split('.') {
        cmd = cmd
            .find_subcommand(part)
            .ok_or_else(|| format!("unknown method `{method}`"))?;
        argv.push(part.to_string());
    }
    let mut positionals: Vec<(usize, Vec<String>)> = Vec::new();
    for (key, value) in params {
        if matches!(key.as_str(), "render" | "json" | "clock") {
            continue;
        }
        let arg = cmd
            .get_arguments()
            .find(|a| a.get_id().as_str() == key && !GLOBALS.contains(&key.as_str()))
            .ok_or_else(|| format!("unknown parameter `{key}` for `{method}`"))?;
        let values: Vec<String> = match value {
            Value::Array(vs) => vs.iter().map(scalar).collect(),
            v => vec![scalar(v)],
        };
        if let Some(i) = arg.get_index() {
            positionals.push((i, values));
        } else if matches!(arg.get_action(), ArgAction::SetTrue) {
            if value != &Value::Bool(false) {
                argv.push(format!("--{}", arg.get_long().unwrap_or(key)));
            }
        } else {
            for v in values {
                argv.push(format!("--{}={v}", arg.get_long().unwrap_or(key)));
            }
        }
    }
    positionals.sort();
    argv.push("--".into());
    argv.extend(positionals.into_iter().flat_map(|(_, v)| v));
    Ok(argv)
}

pub(super) fn scalar(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The daemon side: CLI commands against the served store.
pub(super) struct CliDispatch {
    dir: PathBuf,
    /// The CLI grammar, built once: building it costs more than running a
    /// small command, and every request is parsed with it.
    grammar: std::sync::Mutex<clap::Command>,
}

impl CliDispatch {
    pub(super) fn new(dir: &Path) -> CliDispatch {
        let mut grammar = Cli::command();
        grammar.build(); // assigns positional indices
        CliDispatch {
            dir: dir.to_path_buf(),
            grammar: std::sync::Mutex::new(grammar),
        }
    }
}

impl CliDispatch {
    /// `params` of `method` read by the CLI grammar, and the client's
    /// `clock`; or the usage error for them.
    fn parse(
        &self,
        method: &str,
        params: &Map<String, Value>,
    ) -> Result<(Cli, Option<agentlog::time::Timestamp>), ErrorReply> {
        let usage = |msg: String| ErrorReply::new(code::USAGE, msg, 2);
        let cli = {
            let mut grammar = self.grammar.lock().unwrap_or_else(|e| e.into_inner());
            let argv = argv_of(&grammar, &self.dir, method, params).map_err(usage)?;
            grammar
                .try_get_matches_from_mut(&argv)
                .and_then(|m| Cli::from_arg_matches(&m))
                .map_err(|e| usage(super::clap_message(&e)))?
        };
        let client_clock = match params.get("clock") {
            None => None,
            Some(v) => Some(
                v.as_str()
                    .and_then(|t| agentlog::time::Timestamp::parse_rfc3339(t).ok())
                    .ok_or_else(|| usage(format!("`clock` must be an RFC 3339 time, got {v}")))?,
            ),
        };
        Ok((cli, client_clock))
    }
}

impl Dispatch for CliDispatch {
    fn knows(&self, method: &str) -> bool {
        METHODS.contains(&method)
    }

    fn read_only(&self, method: &str) -> bool {
        READ_ONLY.contains(&method)
    }

    /// An observer may take an observer lease and detach: the command
    /// binds the lease to its uid and lets only that uid (or the daemon's
    /// owner, root) renew or release it. A controller needs write access.
    fn open_to_observers(&self, method: &str, params: &Map<String, Value>) -> bool {
        match method {
            "attach" => params.get("observer") == Some(&json!(true)),
            "detach" => true,
            _ => false,
        }
    }

    fn call(&self, store: &Arc<Store>, method: &str, params: &Map<String, Value>) -> Outcome {
        if method == "get" {
            return get(store, params);
        }
        let usage = |msg: String| ErrorReply::new(code::USAGE, msg, 2);
        let (content, params) = match sent_content(method, params)? {
            Some((bytes, rest)) => (Some(bytes), std::borrow::Cow::Owned(rest)),
            None => (None, std::borrow::Cow::Borrowed(params)),
        };
        let params = params.as_ref();
        if method == "log" && params.get("follow").is_some_and(|f| f != &json!(false)) {
            return Err(usage(
                "log: `follow` is not a request: use the `watch` method".into(),
            ));
        }
        let (cli, client_clock) = self.parse(method, params)?;
        let ui = Ui {
            json: cli.json,
            quiet: true,
        };
        let mut buf = Vec::new();
        let (ran, stderr) = output::capturing_errors(|| {
            args::with_client_clock(client_clock, || {
                serving(store.clone(), || {
                    let run = || run_command(&mut buf, &ui, self.dir.clone(), cli.command);
                    match content {
                        Some(bytes) => cmd::import::with_sent_content(bytes, run),
                        None => run(),
                    }
                })
            })
        });
        let code = match ran {
            Ok(code) => code,
            Err(e) if e.downcast_ref::<cmd::read::MailTaken>().is_some() => {
                return Err(ErrorReply::new(code::MAIL_TAKEN, e.to_string(), 1))
            }
            Err(e) => {
                let mut reply = ErrorReply::from_error(&*e, e.downcast_ref::<Usage>().is_some());
                // The operations' error forwards a registry refusal whole
                // (`transparent`), so the chain above cannot see it.
                let refused = e.chain().any(|c| {
                    matches!(
                        c.downcast_ref::<crate::ops::OpsError>(),
                        Some(crate::ops::OpsError::Store(
                            agentlog::store::StoreError::Registry(_)
                        ))
                    )
                });
                if refused && reply.code == code::FAILED {
                    reply.code = code::REFUSED.to_string();
                }
                return Err(reply);
            }
        };
        let exit = if code == ExitCode::SUCCESS { 0 } else { 1 };
        let text = String::from_utf8_lossy(&buf).into_owned();
        let result = if params.get("render") == Some(&json!("text")) {
            json!({"text": text, "stderr": stderr})
        } else if method == "log" {
            let lines: Result<Vec<Value>, _> = text.lines().map(serde_json::from_str).collect();
            lines.map(Value::Array).unwrap_or(json!({"text": text}))
        } else {
            serde_json::from_str(&text).unwrap_or(json!({"text": text}))
        };
        Ok((result, exit))
    }

    fn event_json(&self, lsn: Lsn, event: &Event, origin: Option<Origin>) -> Value {
        event_doc(lsn, event, origin)
    }

    fn agent_json(&self, agent: &Agent) -> Value {
        render::agent(agent)
    }

    fn refusal(&self, method: &str, params: &Map<String, Value>) -> Option<ErrorReply> {
        self.parse(method, params).err()
    }

    /// The command's own output function, so the text is the command's.
    fn applied_text(&self, agent: &str, lsn: Lsn, what: &str, json: bool) -> String {
        let mut buf = Vec::new();
        let ui = Ui { json, quiet: true };
        // Writing to a Vec does not fail.
        let _ = cmd::applied(&mut buf, &ui, agent, lsn, what);
        String::from_utf8_lossy(&buf).into_owned()
    }

    fn path_param(&self, _method: &str, params: &Map<String, Value>) -> Option<String> {
        PATHS
            .iter()
            .find(|k| params.contains_key(**k))
            .map(|k| k.to_string())
    }
}

/// An import's content and the parameters left for the command line.
type SentContent = (Vec<u8>, Map<String, Value>);

/// `import`'s `content` (the file's text, read by the client) taken out of
/// `params`, with the client's `source` name for it standing in as `file`
/// (only a name in messages: nothing opens it); `None` when absent.
fn sent_content(
    method: &str,
    params: &Map<String, Value>,
) -> Result<Option<SentContent>, ErrorReply> {
    let usage = |msg: &str| ErrorReply::new(code::USAGE, msg, 2);
    let Some(content) = params.get("content").filter(|_| method == "import") else {
        return Ok(None);
    };
    let Value::String(text) = content else {
        return Err(usage(
            "import: `content` must be a string (the file's text)",
        ));
    };
    if params.contains_key("file") {
        return Err(usage(
            "import: pass `file` (a path the daemon opens) or `content` (the file's text), not both",
        ));
    }
    let mut rest = params.clone();
    rest.remove("content");
    let source = match rest.remove("source") {
        None => json!("(content sent by the client)"),
        Some(Value::String(s)) => json!(s),
        Some(_) => return Err(usage("import: `source` must be a string (the file's name)")),
    };
    rest.insert("file".into(), source);
    Ok(Some((text.clone().into_bytes(), rest)))
}

/// `get`: one agent's row (`list --json`'s form), from the served state.
fn get(store: &Store, params: &Map<String, Value>) -> Outcome {
    let name = match (params.get("name"), params.len()) {
        (Some(Value::String(n)), 1) => n,
        _ => {
            let msg = "get takes exactly one parameter, `name` (a string)";
            return Err(ErrorReply::new(code::USAGE, msg, 2));
        }
    };
    store
        .with_state(|s, _| {
            s.agent(name).map(|a| {
                let viewer = render::viewer(store.dir());
                render::agent_with_runtime(a, s.runtime(name), args::clock(), &viewer)
            })
        })
        .map(|row| (row, 0))
        .ok_or_else(|| {
            let msg = format!("agent `{name}` is not registered");
            ErrorReply::new(code::NOT_FOUND, msg, 1)
        })
}

/// An event as `log --json` prints it, plus its one-line description (what
/// `log` prints) and, when recorded, who asked for it.
fn event_doc(lsn: Lsn, ev: &Event, origin: Option<Origin>) -> Value {
    let d = crate::ops::describe::describe(&ev.kind, lsn, None);
    let mut doc = json!({
        "lsn": lsn,
        "at": render::time(ev.at),
        "kind": tag::name(ev.kind.tag()),
        "event": ev.kind,
        "what": d.what,
        "why": d.why,
    });
    if let Some(o) = origin {
        doc["origin"] = json!(o);
    }
    doc
}

/// Connects to the daemon of `dir` for a command that needs one.
pub(super) fn need_daemon(dir: &Path, what: &str) -> Result<Client> {
    match Client::connect(dir) {
        Ok(c) => Ok(c),
        Err(ClientError::NoDaemon(_)) => Err(anyhow::anyhow!(
            "{what} needs a running daemon: no daemon serves {} (start `agentlog serve`)",
            dir.display()
        )),
        Err(e) => Err(e.into()),
    }
}

/// `log --follow` with a daemon: the same lines as the direct path, from a
/// watch (resumed after `lagged`).
fn follow(ui: &Ui, dir: &Path, client: Client, from: u64) -> Result<ExitCode> {
    let mut from = from.max(1);
    let mut client = Some(client);
    loop {
        let c = match client.take() {
            Some(c) => c,
            None => need_daemon(dir, "log --follow")?,
        };
        match stream(ui, c, json!({"from": from}), true)? {
            Some(resume) => from = resume,
            None => return Ok(ExitCode::SUCCESS),
        }
    }
}

/// Prints a watch stream; returns the LSN to resume from after `lagged`, or
/// `None` when the daemon ended it. `as_log` prints events as `log` does.
pub(super) fn stream(ui: &Ui, client: Client, params: Value, as_log: bool) -> Result<Option<u64>> {
    let mut out = std::io::stdout().lock();
    for item in client.watch(params)? {
        match item? {
            WatchItem::Lagged(resume) => return Ok(Some(resume)),
            WatchItem::Event(e) if as_log => {
                let lsn = e["lsn"].as_u64().unwrap_or(0);
                let at = e["at"]
                    .as_str()
                    .and_then(|t| agentlog::time::Timestamp::parse_rfc3339(t).ok());
                let kind = serde_json::from_value(e["event"].clone());
                let origin = serde_json::from_value(e["origin"].clone()).ok();
                let event = match (at, kind) {
                    (Some(at), Ok(kind)) => Ok(Event { at, kind }),
                    (_, Err(err)) => Err(err.to_string()),
                    (None, _) => Err("event without a valid time".to_string()),
                };
                cmd::log::log_entry(
                    &mut out,
                    ui,
                    lsn,
                    event.as_ref().map_err(|e| e as &dyn std::fmt::Display),
                    origin,
                )?;
            }
            WatchItem::Event(e) if ui.json => output::json_line(&mut out, &json!({"event": e}))?,
            WatchItem::Event(e) => {
                let why = e["why"]
                    .as_str()
                    .map(|y| format!("  ({y})"))
                    .unwrap_or_default();
                let lsn = e["lsn"].as_u64().unwrap_or(0);
                writeln!(
                    out,
                    "{lsn:>8}  {}  {}{why}",
                    scalar(&e["at"]),
                    scalar(&e["what"])
                )?;
            }
            WatchItem::Change(c) if ui.json => output::json_line(&mut out, &json!({"change": c}))?,
            WatchItem::Change(c) => writeln!(
                out,
                "{:>8}  {:<8} {}",
                c["lsn"].as_u64().unwrap_or(0),
                scalar(&c["type"]),
                scalar(&c["agent"])
            )?,
            WatchItem::Compacted(c) if ui.json => {
                output::json_line(&mut out, &json!({"compacted": c}))?
            }
            WatchItem::Compacted(c) => {
                let rows = c["rows"].as_array().map_or(&[][..], Vec::as_slice);
                writeln!(
                    out,
                    "{:>8}  compacted  records before lsn {} were compacted; the registry there has {} agents:",
                    c["lsn"].as_u64().unwrap_or(0),
                    c["resume_from"].as_u64().unwrap_or(0),
                    rows.len()
                )?;
                for row in rows {
                    writeln!(
                        out,
                        "{:>8}  {:<8} {}",
                        c["lsn"].as_u64().unwrap_or(0),
                        "present",
                        scalar(&row["name"])
                    )?;
                }
            }
            WatchItem::Present(p) if ui.json => {
                output::json_line(&mut out, &json!({"present": p}))?
            }
            WatchItem::Present(p) => {
                for name in p["agents"].as_array().map_or(&[][..], Vec::as_slice) {
                    writeln!(
                        out,
                        "{:>8}  {:<8} {}",
                        p["lsn"].as_u64().unwrap_or(0),
                        "present",
                        scalar(name)
                    )?;
                }
            }
            WatchItem::Error(e) if ui.json => output::json_line(&mut out, &json!({"error": e}))?,
            WatchItem::Error(e) => writeln!(
                out,
                "{:>8}  undecodable: {}",
                e["lsn"].as_u64().unwrap_or(0),
                scalar(&e["message"])
            )?,
        }
        out.flush()?;
    }
    Ok(None)
}
