//! Dispatch: each subcommand calls one library function and prints the
//! result (text or `--json`). Returns the exit code for outcomes that are not
//! errors (`verify` finding damage prints its report and exits 1).

use super::args::{self, Cli, Command};
use super::output::{self, Ui};
use super::{reports, view, Usage};
use agentlog::ops::{self, Flow, Point};
use agentlog::registry::{
    FieldUpdates, PostMessage, ProcProbe, Registration, RegistrationKind, SessionKey, SessionOp,
};
use agentlog::store::Store;
use anyhow::{Context, Result};
use indicatif::ProgressBar;
use serde_json::json;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

/// The store directory: `--dir`, else `$AGENTLOG_DIR` (both via clap), else
/// `~/.agentlog`.
fn store_dir(dir: Option<PathBuf>) -> Result<PathBuf> {
    if let Some(d) = dir {
        return Ok(d);
    }
    match std::env::var_os("HOME") {
        Some(home) if !home.is_empty() => Ok(PathBuf::from(home).join(".agentlog")),
        _ => Err(Usage(
            "no store directory: pass --dir DIR or set AGENTLOG_DIR (HOME is not set)".into(),
        )
        .into()),
    }
}

/// Draws library progress on an indicatif bar (when the UI allows one).
pub(super) struct Bar(Option<ProgressBar>);

impl Bar {
    pub(super) fn new(ui: &Ui, what: &str) -> Bar {
        Bar(ui.progress(0, what))
    }
}

impl ops::Progress for Bar {
    fn start(&mut self, total: u64) {
        if let Some(b) = &self.0 {
            b.set_length(total);
        }
    }
    fn advance(&mut self, pos: u64) {
        if let Some(b) = &self.0 {
            b.set_position(pos);
        }
    }
    fn finish(&mut self) {
        if let Some(b) = self.0.take() {
            b.finish_and_clear();
        }
    }
}

pub fn run(cli: Cli) -> Result<ExitCode> {
    let ui = Ui {
        json: cli.json,
        quiet: false,
    };
    commands_setup(&cli);
    // The demo and the benchmarks write fresh stores: temporary ones unless
    // a directory is given explicitly; never the default ~/.agentlog.
    let command = match cli.command {
        Command::Demo(a) => return super::demo::run(&ui, cli.dir, a),
        Command::Bench(b) => return super::bench::run(&ui, cli.dir, b),
        c => c,
    };
    let dir = store_dir(cli.dir)?;
    if let Some(code) = super::remote::try_daemon(&ui, &dir, &command, cli.no_daemon)? {
        return Ok(code);
    }
    let mut out = std::io::stdout().lock();
    let code = run_command(&mut out, &ui, dir, command)?;
    out.flush()?;
    Ok(code)
}

/// Runs one store command, printing to `w` (stdout, or a daemon's reply
/// buffer).
pub(super) fn run_command(w: &mut W, ui: &Ui, dir: PathBuf, command: Command) -> Result<ExitCode> {
    let ui = *ui;
    let code = match command {
        Command::Init(a) => init(w, &ui, dir, a)?,
        Command::Register(a) => register(w, &ui, dir, a)?,
        Command::Heartbeat(a) => {
            let lsn = with_store(&dir, |s| Ok(s.heartbeat(&a.name, a.pid, a.at.at)?))?;
            applied(w, &ui, &a.name, lsn, "heartbeat")?
        }
        Command::Status(a) => {
            let lsn = with_store(&dir, |s| {
                Ok(s.set_status(&a.name, a.status, a.message.clone(), a.at.at)?)
            })?;
            applied(w, &ui, &a.name, lsn, &format!("status {}", a.status))?
        }
        Command::Update(a) => update(w, &ui, dir, a)?,
        Command::Remove(a) => {
            let lsn = with_store(&dir, |s| Ok(s.remove(&a.name, a.at.at)?))?;
            applied(w, &ui, &a.name, lsn, "removed")?
        }
        Command::Post(a) => post(w, &ui, dir, a)?,
        Command::Read(a) => read(w, &ui, dir, a)?,
        Command::Sessions(a) => sessions(w, &ui, dir, a)?,
        Command::Sweep(a) => sweep(w, &ui, dir, a)?,
        Command::Snapshot => snapshot(w, &ui, dir)?,
        Command::Export(a) => export(w, &ui, dir, a)?,
        Command::Import(a) => import(w, &ui, dir, a)?,
        Command::Stats => reports::stats(w, &ui, dir)?,
        Command::Compact(a) => reports::compact(w, &ui, dir, a)?,
        Command::Demo(_) | Command::Bench(_) => unreachable!("handled above"),
        Command::List(a) => list(w, &ui, dir, a)?,
        Command::Replay(a) => replay(w, &ui, dir, a)?,
        Command::Audit(a) => audit(w, &ui, dir, a)?,
        Command::Log(a) => dump(w, &ui, dir, a)?,
        Command::Verify => verify(w, &ui, dir)?,
        Command::Repair(a) => repair(w, &ui, dir, a)?,
        Command::Serve(_) | Command::Watch(_) => unreachable!("handled by remote"),
    };
    Ok(code)
}

pub(super) type W<'a> = dyn Write + 'a;

thread_local! {
    /// The store a daemon serves, while it runs a command on this thread.
    static SERVED: std::cell::RefCell<Option<std::sync::Arc<Store>>> = const { std::cell::RefCell::new(None) };
}

thread_local! {
    /// Error lines of a command run inside the daemon, for its reply.
    static ERROR_LINES: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// Prints `agentlog: <msg>` on stderr (the client's, when run by a daemon)
/// for an outcome reported with an exit code rather than an error.
fn error_line(msg: &str) {
    let line = format!("agentlog: {msg}\n");
    let kept = ERROR_LINES.with(|e| match e.borrow_mut().as_mut() {
        Some(buf) => {
            buf.push_str(&line);
            true
        }
        None => false,
    });
    if !kept {
        eprint!("{line}");
    }
}

/// Runs `f` with [`with_store`] using `store` (a daemon's) instead of
/// opening the store directory.
pub(super) fn serving<R>(store: std::sync::Arc<Store>, f: impl FnOnce() -> R) -> R {
    struct Clear;
    impl Drop for Clear {
        fn drop(&mut self) {
            SERVED.with(|s| s.borrow_mut().take());
        }
    }
    SERVED.with(|s| *s.borrow_mut() = Some(store));
    let _clear = Clear;
    f()
}

/// Runs `f` collecting what [`error_line`] prints; returns both.
pub(super) fn capturing_errors<R>(f: impl FnOnce() -> R) -> (R, String) {
    ERROR_LINES.with(|e| *e.borrow_mut() = Some(String::new()));
    let r = f();
    let lines = ERROR_LINES
        .with(|e| e.borrow_mut().take())
        .unwrap_or_default();
    (r, lines)
}

fn commands_setup(cli: &Cli) {
    if cli.lock_timeout.is_finite() && cli.lock_timeout >= 0.0 {
        set_lock_timeout(Duration::from_secs_f64(cli.lock_timeout));
    }
}

/// How long a direct writer waits for the writer lock (`--lock-timeout`).
static LOCK_TIMEOUT: std::sync::OnceLock<Duration> = std::sync::OnceLock::new();

pub(super) fn set_lock_timeout(t: Duration) {
    let _ = LOCK_TIMEOUT.set(t);
}

/// Opens the store (taking the writer lock, waiting up to `--lock-timeout`
/// for another writer), runs `f`, and closes it (syncing what `f` appended).
/// Inside a daemon, runs `f` on the daemon's store instead.
pub(super) fn with_store<T>(dir: &Path, f: impl FnOnce(&Store) -> Result<T>) -> Result<T> {
    if let Some(store) = SERVED.with(|s| s.borrow().clone()) {
        return f(&store);
    }
    let mut opts = agentlog::store::StoreOptions::default();
    opts.log.lock_timeout = LOCK_TIMEOUT.get().copied();
    let store = ops::open_store_with(dir, false, opts)?;
    let out = f(&store);
    let closed = store.close();
    let out = out?;
    closed?;
    Ok(out)
}

/// Prints "`agent`: what (lsn N)" or `{"agent", "lsn"}`.
fn applied(w: &mut W, ui: &Ui, agent: &str, lsn: u64, what: &str) -> Result<ExitCode> {
    if ui.json {
        output::json(w, &json!({"agent": agent, "lsn": lsn}))?;
    } else {
        writeln!(w, "`{agent}`: {what} (lsn {lsn})")?;
    }
    Ok(ExitCode::SUCCESS)
}

fn register(w: &mut W, ui: &Ui, dir: PathBuf, a: args::Register) -> Result<ExitCode> {
    let mut reg = Registration::new(&a.name, &a.provider, &a.cwd);
    reg.pid = a.pid;
    reg.pid_start_time = a.pid_start_time;
    reg.role = a.role;
    reg.parent = a.parent;
    reg.project_root = a.project_root.unwrap_or_default();
    reg.log_path = a.log_path;
    reg.host_mode = a.host_mode;
    reg.short_id = a.short_id.unwrap_or_default();
    let (lsn, kind) = with_store(&dir, |s| Ok(s.register(reg, a.at.at)?))?;
    let kind = match kind {
        RegistrationKind::New => "new",
        RegistrationKind::Renewal => "renewal",
        RegistrationKind::NewLife => "new life",
    };
    if ui.json {
        output::json(
            w,
            &json!({"agent": a.name, "lsn": lsn, "registration": kind}),
        )?;
    } else {
        writeln!(w, "`{}`: registered ({kind}) (lsn {lsn})", a.name)?;
    }
    Ok(ExitCode::SUCCESS)
}

fn update(w: &mut W, ui: &Ui, dir: PathBuf, a: args::Update) -> Result<ExitCode> {
    let fields = FieldUpdates {
        claude_short_id: a.claude_short_id.map(Some),
        codex_session_id: a.codex_session_id.map(Some),
        gemini_session_id: a.gemini_session_id.map(Some),
        claude_session_uuid: a.claude_session_uuid.map(Some),
        mcp_channel_id: a.mcp_channel_id.map(Some),
        host_mode: a.host_mode.map(Some),
        last_message_at: a.last_message_at.map(Some),
        log_path: a.log_path.map(Some),
        pid: a.pid.map(Some),
        pid_start_time: a.pid_start_time.map(Some),
        last_reconciled_at: a.last_reconciled_at.map(Some),
        ..FieldUpdates::default()
    };
    let lsn = with_store(&dir, |s| Ok(s.update_fields(&a.name, fields, a.at.at)?))?;
    applied(w, ui, &a.name, lsn, "updated")
}

fn post(w: &mut W, ui: &Ui, dir: PathBuf, a: args::Post) -> Result<ExitCode> {
    let mut p = PostMessage::new(&a.from, a.to.as_deref(), &a.category, &a.text);
    p.priority = a.priority;
    p.privacy = a.privacy;
    p.project_root = a.project_root;
    p.request_id = a.request_id;
    if let Some(h) = a.ttl_hours {
        if !(h.is_finite() && h > 0.0) {
            return Err(Usage(format!("--ttl-hours {h} must be a positive number")).into());
        }
        p.ttl_ms = Some((h * 3_600_000.0) as i64);
    }
    let id = with_store(&dir, |s| Ok(s.post_message(p, a.at.at)?))?;
    if ui.json {
        output::json(w, &json!({"id": id}))?;
    } else {
        writeln!(w, "{id}")?;
    }
    Ok(ExitCode::SUCCESS)
}

fn read(w: &mut W, ui: &Ui, dir: PathBuf, a: args::Read) -> Result<ExitCode> {
    let msgs = with_store(&dir, |s| {
        Ok(s.read_messages(&a.name, a.project_root.as_deref(), a.at.at)?)
    })?;
    if ui.json {
        let m: Vec<_> = msgs.iter().map(view::message).collect();
        output::json(w, &json!({"agent": a.name, "messages": m}))?;
    } else if msgs.is_empty() {
        writeln!(w, "no unread messages for `{}`", a.name)?;
    } else {
        let rows: Vec<_> = msgs
            .iter()
            .map(|m| {
                vec![
                    m.id.to_string(),
                    m.posted_at.to_string(),
                    m.from.clone(),
                    m.to.clone().unwrap_or_else(|| "(all)".into()),
                    m.category.clone(),
                    m.priority.to_string(),
                    m.body.replace('\n', " "),
                ]
            })
            .collect();
        output::table(
            w,
            &["ID", "POSTED", "FROM", "TO", "CATEGORY", "PRIORITY", "BODY"],
            &rows,
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

fn sessions(w: &mut W, ui: &Ui, dir: PathBuf, a: args::Sessions) -> Result<ExitCode> {
    let (op, k, verb) = match a {
        args::Sessions::Open(k) => (SessionOp::Open, k, "opened"),
        args::Sessions::Heartbeat(k) => (SessionOp::Heartbeat, k, "heartbeat"),
        args::Sessions::Close(k) => (SessionOp::Close, k, "closed"),
    };
    let key = SessionKey::new(&k.source, &k.workspace, &k.session_id);
    let lsn = with_store(&dir, |s| Ok(s.session(op, key, None, k.at.at)?))?;
    if ui.json {
        output::json(w, &json!({"session": verb, "lsn": lsn}))?;
    } else {
        match lsn {
            Some(lsn) => writeln!(
                w,
                "session {}/{}/{}: {verb} (lsn {lsn})",
                k.source, k.workspace, k.session_id
            )?,
            None => writeln!(
                w,
                "session {}/{}/{} is not open: nothing appended",
                k.source, k.workspace, k.session_id
            )?,
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn sweep(w: &mut W, ui: &Ui, dir: PathBuf, a: args::Sweep) -> Result<ExitCode> {
    let changes = with_store(&dir, |s| Ok(s.sweep(a.now, &ProcProbe)?))?;
    let lines: Vec<_> = changes
        .iter()
        .map(|(lsn, ev)| {
            let agent = ev.kind.subject_agent().unwrap_or("").to_string();
            let d = ops::describe::describe(&ev.kind, *lsn, Some(&agent));
            (*lsn, agent, d)
        })
        .collect();
    if ui.json {
        let v: Vec<_> = lines
            .iter()
            .map(
                |(lsn, agent, d)| json!({"lsn": lsn, "agent": agent, "what": d.what, "why": d.why}),
            )
            .collect();
        output::json(w, &json!({"changes": v}))?;
    } else if lines.is_empty() {
        writeln!(w, "sweep: nothing changed")?;
    } else {
        let rows: Vec<_> = lines
            .iter()
            .map(|(lsn, agent, d)| {
                vec![
                    lsn.to_string(),
                    agent.clone(),
                    d.what.clone(),
                    d.why.clone().unwrap_or_default(),
                ]
            })
            .collect();
        output::table(w, &["LSN", "AGENT", "CHANGE", "WHY"], &rows)?;
    }
    Ok(ExitCode::SUCCESS)
}

fn snapshot(w: &mut W, ui: &Ui, dir: PathBuf) -> Result<ExitCode> {
    let info = with_store(&dir, |s| Ok(ops::snapshot(s)?))?;
    if ui.json {
        output::json(
            w,
            &json!({"path": info.path, "lsn": info.lsn, "bytes": info.len}),
        )?;
    } else {
        writeln!(
            w,
            "snapshot of lsn {} written to {} ({} bytes)",
            info.lsn,
            info.path.display(),
            info.len
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

fn export(w: &mut W, ui: &Ui, dir: PathBuf, a: args::Export) -> Result<ExitCode> {
    let (path, rep) = with_store(&dir, |s| Ok(ops::export(s, a.out.as_deref(), a.strict)?))?;
    if ui.json {
        let skipped: Vec<_> = rep
            .skipped
            .iter()
            .map(|s| json!({"name": s.name, "reason": s.reason}))
            .collect();
        output::json(
            w,
            &json!({"path": path, "rows": rep.rows, "skipped": skipped}),
        )?;
    } else {
        writeln!(w, "exported {} agents to {}", rep.rows, path.display())?;
        for s in &rep.skipped {
            writeln!(w, "left out `{}`: {}", s.name, s.reason)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn import(w: &mut W, ui: &Ui, dir: PathBuf, a: args::Import) -> Result<ExitCode> {
    let rep = with_store(&dir, |s| Ok(s.import_registry(&a.file)?))?;
    let lsns = rep
        .lsns
        .as_ref()
        .map(|r| json!({"first": r.start(), "last": r.end()}));
    if ui.json {
        output::json(
            w,
            &json!({
                "file": rep.file,
                "schema_version": rep.schema_version,
                "imported": rep.imported,
                "replaced": rep.replaced,
                "lsns": lsns,
            }),
        )?;
    } else {
        let v = rep
            .schema_version
            .map_or("empty file".to_string(), |v| format!("schema {v}"));
        writeln!(
            w,
            "imported {} agents from {} ({v})",
            rep.imported,
            rep.file.display()
        )?;
        if !rep.replaced.is_empty() {
            writeln!(w, "replaced finished agents: {}", rep.replaced.join(", "))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn init(w: &mut W, ui: &Ui, dir: PathBuf, a: args::Init) -> Result<ExitCode> {
    let rep = ops::init(&dir)?;
    // Private unless shared on purpose: the daemon's socket lives here.
    if rep.created || a.group_shared {
        use std::os::unix::fs::PermissionsExt;
        let mode = if a.group_shared { 0o750 } else { 0o700 };
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(mode))
            .with_context(|| format!("setting the mode of {}", dir.display()))?;
    }
    if ui.json {
        output::json(
            w,
            &json!({"dir": dir, "created": rep.created, "events": rep.events}),
        )?;
    } else if rep.created {
        writeln!(w, "initialized an empty store at {}", dir.display())?;
    } else {
        writeln!(
            w,
            "store at {} already exists ({} events)",
            dir.display(),
            rep.events
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

fn list(w: &mut W, ui: &Ui, dir: PathBuf, a: args::List) -> Result<ExitCode> {
    let (state, _) = ops::current(&dir, &mut Bar::new(ui, "fold"))?;
    let agents: Vec<_> = state
        .agents()
        .iter()
        .filter(|ag| a.all || !ag.is_finished())
        .collect();
    if ui.json {
        let rows: Vec<_> = agents.iter().map(|ag| view::agent(ag)).collect();
        output::json(w, &json!({"agents": rows}))?;
    } else {
        let rows: Vec<_> = agents.iter().map(|ag| view::agent_row(ag)).collect();
        output::table(w, &view::AGENT_HEADERS, &rows)?;
    }
    Ok(ExitCode::SUCCESS)
}

fn replay(w: &mut W, ui: &Ui, dir: PathBuf, a: args::Replay) -> Result<ExitCode> {
    let point = match (a.at, a.lsn) {
        (Some(t), _) => Point::Time(t),
        (None, Some(l)) => Point::Lsn(l),
        (None, None) => return Err(Usage("replay needs --at TIME or --lsn N".into()).into()),
    };
    let r = ops::replay(&dir, point, &mut Bar::new(ui, "replay"))?;
    let exported = match &a.export {
        Some(file) => Some(
            agentlog::export::export_to(
                file,
                r.state.agents().iter(),
                &Default::default(),
                &Default::default(),
            )
            .with_context(|| format!("exporting the replayed registry to {}", file.display()))?,
        ),
        None => None,
    };
    if ui.json {
        let rows: Vec<_> = r.state.agents().iter().map(view::agent).collect();
        let mut doc = json!({
            "events": r.events,
            "last": view::lsn_at(r.last),
            "next": view::lsn_at(r.next),
            "agents": rows,
            "messages": r.state.messages().len(),
            "sessions": r.state.sessions().len(),
        });
        if let (Some(file), Some(rep)) = (&a.export, &exported) {
            doc["export"] = json!({
                "file": file,
                "rows": rep.rows,
                "skipped": rep.skipped.iter().map(|s| json!({"name": s.name, "reason": s.reason})).collect::<Vec<_>>(),
            });
        }
        output::json(w, &doc)?;
    } else {
        match r.last {
            Some((lsn, at)) => writeln!(
                w,
                "registry as of lsn {lsn} ({at}): {} events folded, {} agents, {} messages",
                r.events,
                r.state.agents().len(),
                r.state.messages().len()
            )?,
            None => writeln!(w, "registry before the first event: empty")?,
        }
        if let Some((lsn, at)) = r.next {
            writeln!(w, "next event: lsn {lsn} at {at}")?;
        }
        let rows: Vec<_> = r.state.agents().iter().map(view::agent_row).collect();
        output::table(w, &view::AGENT_HEADERS, &rows)?;
        if let (Some(file), Some(rep)) = (&a.export, &exported) {
            writeln!(
                w,
                "exported {} agents to {} ({} left out)",
                rep.rows,
                file.display(),
                rep.skipped.len()
            )?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn audit(w: &mut W, ui: &Ui, dir: PathBuf, a: args::Audit) -> Result<ExitCode> {
    let lines = ops::audit::audit(&dir, &a.name, a.since, a.until)?;
    if ui.json {
        let events: Vec<_> = lines.iter().map(view::audit_line).collect();
        output::json(w, &json!({"agent": a.name, "events": events}))?;
    } else {
        // A BY column (who asked) once the daemon recorded any origin.
        let by = lines.iter().any(|l| l.origin.is_some());
        let rows: Vec<_> = lines
            .iter()
            .map(|l| {
                let mut row = vec![
                    l.at.to_string(),
                    l.lsn.to_string(),
                    output::clip(&l.what, 72),
                    l.why.clone().unwrap_or_default(),
                ];
                if by {
                    row.push(output::or_dash(
                        l.origin.map(|o| format!("uid {} pid {}", o.uid, o.pid)),
                    ));
                }
                row
            })
            .collect();
        let headers: &[&str] = if by {
            &["TIME", "LSN", "EVENT", "WHY", "BY"]
        } else {
            &["TIME", "LSN", "EVENT", "WHY"]
        };
        output::table(w, headers, &rows)?;
    }
    Ok(ExitCode::SUCCESS)
}

fn dump(w: &mut W, ui: &Ui, dir: PathBuf, a: args::LogCmd) -> Result<ExitCode> {
    let follow = a.follow.then_some(Duration::from_millis(100));
    let mut failed: Option<std::io::Error> = None;
    ops::dump(&dir, a.from, follow, |e| {
        let event = e
            .event
            .as_ref()
            .map_err(|err| err as &dyn std::fmt::Display);
        let r = log_entry(w, ui, e.lsn, event, e.origin);
        // Follow mode prints as events arrive.
        let r = r.and_then(|()| if follow.is_some() { w.flush() } else { Ok(()) });
        match r {
            Ok(()) => Flow::Continue,
            Err(err) => {
                failed = Some(err);
                Flow::Stop
            }
        }
    })?;
    if let Some(e) = failed {
        return Err(e.into());
    }
    Ok(ExitCode::SUCCESS)
}

/// One line of `log`: JSON (with `origin` when the event records who asked
/// for it) or `LSN  TIME  what  (why)  [uid U pid P]`.
pub(super) fn log_entry(
    w: &mut W,
    ui: &Ui,
    lsn: u64,
    event: std::result::Result<&agentlog::registry::Event, &dyn std::fmt::Display>,
    origin: Option<agentlog::registry::codec::Origin>,
) -> std::io::Result<()> {
    if ui.json {
        let mut doc = match event {
            Ok(ev) => json!({
                "lsn": lsn,
                "at": view::time(ev.at),
                "kind": agentlog::registry::tag::name(ev.kind.tag()),
                "event": ev.kind,
            }),
            Err(err) => json!({"lsn": lsn, "error": err.to_string()}),
        };
        if let Some(o) = origin {
            doc["origin"] = json!(o);
        }
        output::json_line(w, &doc)
    } else {
        match event {
            Ok(ev) => {
                let d = ops::describe::describe(&ev.kind, lsn, None);
                let why = d.why.map(|y| format!("  ({y})")).unwrap_or_default();
                let by = origin
                    .map(|o| format!("  [uid {} pid {}]", o.uid, o.pid))
                    .unwrap_or_default();
                writeln!(w, "{lsn:>8}  {}  {}{why}{by}", ev.at, d.what)
            }
            Err(err) => writeln!(w, "{lsn:>8}  undecodable: {err}"),
        }
    }
}

fn verify(w: &mut W, ui: &Ui, dir: PathBuf) -> Result<ExitCode> {
    let v = ops::verify(&dir, &mut Bar::new(ui, "verify"))?;
    let log = &v.log;
    if ui.json {
        let bad: Vec<_> = log
            .bad
            .iter()
            .map(|b| json!({"segment": b.segment, "offset": b.offset, "lsn": b.lsn, "reason": b.reason}))
            .collect();
        let undecodable: Vec<_> = v
            .undecodable
            .iter()
            .map(|(lsn, reason)| json!({"lsn": lsn, "reason": reason}))
            .collect();
        output::json(
            w,
            &json!({
                "clean": v.is_clean(),
                "segments": log.segments,
                "records": log.records,
                "bytes": log.bytes,
                "first_lsn": log.first_lsn,
                "last_lsn": log.last_lsn,
                "generation": log.generation,
                "bad": bad,
                "undecodable": undecodable,
            }),
        )?;
    } else {
        let range = match (log.first_lsn, log.last_lsn) {
            (Some(a), Some(b)) => format!("lsn {a}..={b}"),
            _ => "no records".to_string(),
        };
        writeln!(
            w,
            "{} records in {} segment(s), {} bytes, {range}",
            log.records, log.segments, log.bytes
        )?;
        for b in &log.bad {
            let lsn = b
                .lsn
                .map_or("lsn unknown".to_string(), |l| format!("lsn {l}"));
            writeln!(
                w,
                "damaged: segment {}, offset {}, {lsn}: {}",
                b.segment.display(),
                b.offset,
                b.reason
            )?;
        }
        for (lsn, reason) in &v.undecodable {
            writeln!(w, "undecodable: lsn {lsn}: {reason}")?;
        }
        if v.is_clean() {
            writeln!(w, "clean")?;
        }
    }
    if v.is_clean() {
        Ok(ExitCode::SUCCESS)
    } else {
        let n = log.bad.len() + v.undecodable.len();
        error_line(&format!(
            "log damaged: {n} bad record(s) in {}",
            dir.display()
        ));
        Ok(ExitCode::from(1))
    }
}

fn repair(w: &mut W, ui: &Ui, dir: PathBuf, a: args::Repair) -> Result<ExitCode> {
    let rep = ops::salvage(&dir, &a.out)?;
    if ui.json {
        let bad: Vec<_> = rep
            .bad
            .iter()
            .map(|b| json!({"segment": b.segment, "offset": b.offset, "lsn": b.lsn, "reason": b.reason}))
            .collect();
        output::json(
            w,
            &json!({
                "out": a.out,
                "records_copied": rep.records_copied,
                "records_skipped": rep.records_skipped,
                "first_lsn": rep.first_lsn,
                "last_lsn": rep.last_lsn,
                "bad": bad,
            }),
        )?;
    } else {
        writeln!(
            w,
            "copied {} records into {} ({} skipped, {} damaged stretch(es))",
            rep.records_copied,
            a.out.display(),
            rep.records_skipped,
            rep.bad.len()
        )?;
        for b in &rep.bad {
            let lsn = b
                .lsn
                .map_or("lsn unknown".to_string(), |l| format!("lsn {l}"));
            writeln!(
                w,
                "skipped: segment {}, offset {}, {lsn}: {}",
                b.segment.display(),
                b.offset,
                b.reason
            )?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
