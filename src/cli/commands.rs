//! Dispatch: each subcommand calls one library function and prints the
//! result (text or `--json`). Returns the exit code for outcomes that are not
//! errors (`verify` finding damage prints its report and exits 1).

use super::args::{self, Cli, Command};
use super::output::{self, Ui};
use super::{reports, view, Usage};
use agentlog::files::Sharing;
use agentlog::ops::{self, Flow, Point};
use agentlog::probe::ProcProbe;
use agentlog::registry::labels::AgentUpdate;
use agentlog::registry::queries::AgentFilter;
use agentlog::registry::{
    FieldUpdates, PostMessage, Registration, RegistrationKind, SessionKey, SessionOp,
};
use agentlog::store::Store;
use anyhow::{Context, Result};
use indicatif::ProgressBar;
use serde_json::json;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

/// The store directory: `--dir`, else `$AGENTLOG_DIR` (an empty one counts
/// as unset), else `~/.agentlog`. Only commands on the user's store read the
/// environment: `demo` and `bench` never do.
fn store_dir(dir: Option<PathBuf>) -> Result<PathBuf> {
    if let Some(d) = dir {
        return Ok(d);
    }
    if let Some(d) = std::env::var_os("AGENTLOG_DIR").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(d));
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
        Command::Check(a) => return super::check::run(&ui, a),
        c => c,
    };
    let dir = store_dir(cli.dir)?;
    // Files this command creates are no more open than the store allows.
    Sharing::of_dir(&dir).restrict_process_umask();
    if let Some(code) = super::remote::try_daemon(&ui, &dir, &command, cli.no_daemon)? {
        return Ok(code);
    }
    let commits = commits_before_printing(&command);
    let mut out = output::Out::new(std::io::stdout().lock(), commits);
    let code = run_command(&mut out, &ui, dir, command)?;
    out.flush()?;
    if let Some(e) = out.failure() {
        // The command committed before printing: exit 0 as it succeeded,
        // and say on stderr exactly what was committed.
        let text = String::from_utf8_lossy(out.transcript());
        eprintln!(
            "agentlog: warning: the command succeeded and was committed, but stdout failed ({e}); its output was:\n{}",
            text.trim_end()
        );
    }
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
            let at = a.at.checked()?;
            let lsn = with_store(&dir, |s| Ok(s.heartbeat(&a.name, a.pid, at)?))?;
            applied(w, &ui, &a.name, lsn, "heartbeat")?
        }
        Command::Status(a) => {
            let at = a.at.checked()?;
            let lsn = with_store(&dir, |s| {
                Ok(s.set_status(&a.name, a.status, a.message.clone(), at)?)
            })?;
            applied(w, &ui, &a.name, lsn, &format!("status {}", a.status))?
        }
        Command::Update(a) => update(w, &ui, dir, a)?,
        Command::Remove(a) => {
            let at = a.at.checked()?;
            let lsn = with_store(&dir, |s| Ok(s.remove(&a.name, at)?))?;
            applied(w, &ui, &a.name, lsn, "removed")?
        }
        Command::Post(a) => post(w, &ui, dir, a)?,
        Command::Read(a) => super::agents::read(w, &ui, dir, a)?,
        Command::Sessions(a) => sessions(w, &ui, dir, a)?,
        Command::Sweep(a) => sweep(w, &ui, dir, a)?,
        Command::Snapshot => snapshot(w, &ui, dir)?,
        Command::Export(a) => export(w, &ui, dir, a)?,
        Command::Import(a) => import(w, &ui, dir, a)?,
        Command::Stats => reports::stats(w, &ui, dir)?,
        Command::Compact(a) => reports::compact(w, &ui, dir, a)?,
        Command::Demo(_) | Command::Bench(_) | Command::Check(_) => unreachable!("handled above"),
        Command::List(a) => list(w, &ui, dir, a)?,
        Command::Show(a) => super::agents::show(w, &ui, dir, a)?,
        Command::Presence(a) => super::agents::presence(w, &ui, dir, a)?,
        Command::Replay(a) => replay(w, &ui, dir, a)?,
        Command::Audit(a) => audit(w, &ui, dir, a)?,
        Command::Log(a) => dump(w, &ui, dir, a)?,
        Command::Verify => verify(w, &ui, dir)?,
        Command::Repair(a) => repair(w, &ui, dir, a)?,
        Command::Serve(_) | Command::Watch(_) => unreachable!("handled by remote"),
    };
    Ok(code)
}

/// Commands that commit their work and then print what they did: a failure
/// of stdout after the commit must not turn into a reported failure. (`read`
/// is not one: it prints first and appends its receipt only once the output
/// was delivered.)
fn commits_before_printing(command: &Command) -> bool {
    matches!(
        command,
        Command::Init(_)
            | Command::Register(_)
            | Command::Heartbeat(_)
            | Command::Status(_)
            | Command::Update(_)
            | Command::Remove(_)
            | Command::Post(_)
            | Command::Sessions(_)
            | Command::Sweep(_)
            | Command::Snapshot
            | Command::Export(_)
            | Command::Import(_)
            | Command::Compact(args::Compact { dry_run: false, .. })
            | Command::Repair(_)
    )
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

/// The store a daemon serves, when this thread runs a command for it.
pub(super) fn served_store() -> Option<std::sync::Arc<Store>> {
    SERVED.with(|s| s.borrow().clone())
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
    let mut opts = agentlog::store::StoreOptions::short_lived();
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
        writeln!(w, "`{}`: {what} (lsn {lsn})", output::escaped(agent))?;
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
    let at = a.at.checked()?;
    let (lsn, kind) = with_store(&dir, |s| match a.transport_client {
        Some(c) => Ok(s.register_via_transport(reg, c, at)?),
        None => Ok(s.register(reg, at)?),
    })?;
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
        writeln!(
            w,
            "`{}`: registered ({kind}) (lsn {lsn})",
            output::escaped(&a.name)
        )?;
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
    let at = a.at.checked()?;
    let update = AgentUpdate {
        fields,
        display_name: a.display_name,
        transport_client: a.transport_client,
    };
    let lsns = with_store(&dir, |s| Ok(s.update_agent(&a.name, update, at)?))?;
    let last = lsns.last().copied().unwrap_or_default();
    applied(w, ui, &a.name, last, "updated")
}

fn post(w: &mut W, ui: &Ui, dir: PathBuf, a: args::Post) -> Result<ExitCode> {
    let mut p = PostMessage::new(&a.from, a.to.as_deref(), &a.category, &a.text);
    p.priority = a.priority;
    p.privacy = a.privacy;
    p.project_root = a.project_root;
    p.request_id = a.request_id;
    // Bounded by the parser (1 ms to 100 years), so the product fits.
    p.ttl_ms = a.ttl_hours.map(|h| (h * 3_600_000.0) as i64);
    let at = a.at.checked()?;
    let id = with_store(&dir, |s| Ok(s.post_message(p, at)?))?;
    if ui.json {
        output::json(w, &json!({"id": id}))?;
    } else {
        writeln!(w, "{id}")?;
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
    let at = k.at.checked()?;
    let lsn = with_store(&dir, |s| Ok(s.session(op, key, None, at)?))?;
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
    let now = args::not_in_future(a.now, a.force_time, "--now", "--force-time")?;
    let changes = with_store(&dir, |s| Ok(s.sweep(now, &ProcProbe)?))?;
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
    let (path, rep) = ops::export(&dir, a.out.as_deref(), a.strict, &mut Bar::new(ui, "fold"))?;
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
        let path = output::escaped(&path.to_string_lossy()).into_owned();
        // Each left-out agent was already named, with its reason, in a
        // warning on stderr: say it once.
        match rep.skipped.len() {
            0 => writeln!(w, "exported {} agents to {path}", rep.rows)?,
            n => writeln!(
                w,
                "exported {} agents to {path}; left out {n} (see the warnings)",
                rep.rows
            )?,
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
            let names = rep.replaced.join(", ");
            writeln!(w, "replaced finished agents: {}", output::escaped(&names))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn init(w: &mut W, ui: &Ui, dir: PathBuf, a: args::Init) -> Result<ExitCode> {
    let sharing = if a.group {
        Sharing::Group
    } else {
        Sharing::Private
    };
    sharing.restrict_process_umask();
    let rep = ops::init(&dir, a.max_messages.map(|n| n as usize), sharing)?;
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
    let filter = AgentFilter {
        include_finished: a.all,
        status: a.status,
        provider: a.provider,
        project_root: a.project_root,
    };
    let agents: Vec<_> = state.agents_matching(&filter).collect();
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
                let line = format!("{}{why}", d.what);
                writeln!(w, "{lsn:>8}  {}  {}{by}", ev.at, output::escaped(&line))
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
                "torn_tail": log.torn_tail.as_ref().map(|t| json!({
                    "segment": t.segment,
                    "offset": t.offset,
                    "lsn": t.lsn,
                    "bytes": t.bytes,
                    "reason": t.reason,
                })),
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
        if let Some(t) = &log.torn_tail {
            let lsn = t
                .lsn
                .map_or("lsn unknown".to_string(), |l| format!("lsn {l}"));
            writeln!(
                w,
                "torn tail: segment {}, offset {}, {lsn}, {} byte(s): {} (not damage: a crash mid-write; the next writer open cuts it)",
                t.segment.display(),
                t.offset,
                t.bytes,
                t.reason
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

fn cut_at_hole(w: &mut W, ui: &Ui, dir: PathBuf) -> Result<ExitCode> {
    let rep = ops::cut_at_hole(&dir)?;
    if ui.json {
        let cut: Vec<_> = rep
            .cut
            .iter()
            .map(|c| json!({"segment": c.segment, "offset": c.offset, "lsn": c.lsn, "bytes": c.bytes, "reason": c.reason, "broken_copy": c.broken_copy}))
            .collect();
        output::json(w, &json!({"last_lsn": rep.last_lsn, "cut": cut}))?;
    } else {
        if rep.cut.is_empty() {
            writeln!(w, "nothing to cut")?;
        }
        for c in &rep.cut {
            let lsn = c
                .lsn
                .map_or("lsn unknown".to_string(), |l| format!("lsn {l}"));
            writeln!(
                w,
                "cut: segment {}, offset {}, {lsn}, {} byte(s) saved to {}: {}",
                c.segment.display(),
                c.offset,
                c.bytes,
                c.broken_copy.display(),
                c.reason
            )?;
        }
        let last = rep
            .last_lsn
            .map_or("no records".to_string(), |l| format!("lsn {l}"));
        writeln!(w, "the log now ends at {last}")?;
    }
    Ok(ExitCode::SUCCESS)
}

fn repair(w: &mut W, ui: &Ui, dir: PathBuf, a: args::Repair) -> Result<ExitCode> {
    let Some(out) = a.out.filter(|_| !a.cut_at_hole) else {
        return cut_at_hole(w, ui, dir);
    };
    let rep = ops::salvage(&dir, &out)?;
    if ui.json {
        let bad: Vec<_> = rep
            .bad
            .iter()
            .map(|b| json!({"segment": b.segment, "offset": b.offset, "lsn": b.lsn, "reason": b.reason}))
            .collect();
        output::json(
            w,
            &json!({
                "out": out,
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
            out.display(),
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
