//! `demo`: the main job end to end on an embedded default fleet.
//!
//! A deterministic simulation (seeded SplitMix64, explicit event times, so
//! hours of fleet life take a few seconds and the same seed gives the same
//! history) drives a real [`Store`] in a fresh directory: agents register
//! (some as children of a planner), heartbeat every 30 simulated seconds,
//! switch between `busy` and `ready`, post direct and broadcast messages and
//! read them, open logical sessions, and finish — completing, failing,
//! hanging (no more heartbeats: the lease expires) or dying (the process is
//! gone: the sweep's process probe notices) — and come back as new lives of
//! their names. Interactive agents go quiet now and then, become `idle` by
//! lease expiry and are revived by their next heartbeat. Then the demo
//! snapshots, exports `registry.json`, compacts at the simulated "now", and
//! gathers stats, the registry and one agent's audit.
//!
//! Commands are appended `Lazy` during the simulation (it is a replay of
//! simulated time, not acknowledgements anyone waits for) and the store is
//! synced before the snapshot; every command is validated by the store like
//! any other, and a refusal aborts the demo with its error.

use super::audit::{audit, AuditLine};
use super::stats::{stats, Stats};
use super::{OpsError, Result};
use agentlog::compact::CompactionReport;
use agentlog::export::ExportReport;
use agentlog::internals::snapshot::SnapshotInfo;
use agentlog::log::{Durability, LogOptions};
use agentlog::model::{Agent, HostMode, Priority, Status, StatusCause};
use agentlog::registry::{FakeProbe, PostMessage, Registration, SessionKey, SessionOp, State};
use agentlog::store::{Store, StoreOptions};
use agentlog::time::Timestamp;
use agentlog::StoreLayout;
use std::path::{Path, PathBuf};

/// Largest fleet the demo simulates (its memory grows with it).
pub const MAX_AGENTS: u32 = 100_000;
/// Longest simulated time, in hours (its log grows with it).
pub const MAX_HOURS: u32 = 720;

/// Shape of the simulated fleet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DemoOptions {
    /// Agent names (slots); each may live several lives.
    pub agents: u32,
    /// Simulated hours.
    pub hours: u32,
    pub seed: u64,
    /// Simulated start time.
    pub start: Timestamp,
}

impl Default for DemoOptions {
    fn default() -> Self {
        DemoOptions {
            agents: 300,
            hours: 6,
            seed: 42,
            start: Timestamp::from_secs(1_796_018_400), // 2026-11-30T06:00:00Z
        }
    }
}

/// Counts of what the simulation did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FleetCounts {
    pub registrations: u64,
    pub heartbeats: u64,
    pub status_changes: u64,
    pub posts: u64,
    pub reads: u64,
    pub sessions: u64,
    pub completed: u64,
    pub failed: u64,
    pub hung: u64,
    pub died: u64,
    /// Status changes appended by sweeps (lease expiry, process gone).
    pub swept: u64,
}

/// Everything the demo produced.
#[derive(Debug, Clone)]
pub struct DemoReport {
    pub dir: PathBuf,
    pub start: Timestamp,
    pub end: Timestamp,
    pub counts: FleetCounts,
    pub snapshot: SnapshotInfo,
    pub export_path: PathBuf,
    pub export: ExportReport,
    pub compaction: CompactionReport,
    pub stats: Stats,
    /// The registry after compaction, in registration order.
    pub registry: Vec<Agent>,
    /// The agent whose audit is shown, and the audit (taken before compaction).
    pub featured: String,
    pub audit: Vec<AuditLine>,
    pub elapsed_ms: u64,
}

/// SplitMix64: small, fast, good enough for a simulation, and seedable.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// True with probability `p`.
    fn chance(&mut self, p: f64) -> bool {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }
    /// Uniform in `lo..hi` (`hi > lo`).
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo)
    }
}

const TICK_S: i64 = 30;
const ROLES: [&str; 5] = ["planner", "coder", "reviewer", "tester", "researcher"];
const PROVIDERS: [&str; 3] = ["claude", "codex", "gemini"];
const CATEGORIES: [&str; 4] = ["handoff", "review", "question", "status"];

/// How an agent's current life will end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    Complete,
    Fail,
    /// Stops heartbeating while its process lives: the lease expires.
    Hang,
    /// Its process dies: the sweep's probe finds the pid gone.
    Die,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Registers at this tick.
    Waiting(u64),
    /// Alive until this tick, then ends this way.
    Alive(u64, Ending),
    /// Hung or dead: waits for the sweep to notice.
    Gone,
}

struct Slot {
    name: String,
    role: &'static str,
    provider: &'static str,
    interactive: bool,
    life: u32,
    pid: u32,
    phase: Phase,
    /// Ticks of silence left (an interactive agent gone quiet).
    quiet: u64,
    /// Lease expiries and process deaths this name went through.
    trouble: u32,
}

/// Runs the demo in `dir`, which must not exist or be empty.
pub fn demo(dir: &Path, opts: &DemoOptions) -> Result<DemoReport> {
    let started = std::time::Instant::now();
    if dir.exists() {
        let empty = std::fs::read_dir(dir)
            .map_err(|e| OpsError::io(dir, e))?
            .next()
            .is_none();
        if !empty {
            return Err(OpsError::InvalidArgument(format!(
                "the demo writes a fresh store, but {} is not empty",
                dir.display()
            )));
        }
    }
    if !(1..=MAX_AGENTS).contains(&opts.agents) || !(1..=MAX_HOURS).contains(&opts.hours) {
        return Err(OpsError::InvalidArgument(format!(
            "the demo runs 1 to {MAX_AGENTS} agents for 1 to {MAX_HOURS} hours \
             (got {} agents, {} hours)",
            opts.agents, opts.hours
        )));
    }
    let store_opts = StoreOptions {
        log: LogOptions {
            // Small segments, so the log has several and compaction has
            // sealed ones to rewrite.
            segment_size: 4 << 20,
            ..LogOptions::default()
        },
        command_durability: Durability::Lazy,
        ..StoreOptions::default()
    };
    super::sharing::create_store_dir(dir, super::sharing::Sharing::Private)
        .map_err(|e| OpsError::io(dir, e))?;
    let store = Store::open(dir, store_opts)?;
    let (counts, end, featured) = simulate(&store, opts)?;
    let snapshot = store.snapshot()?;
    store.close()?;
    let (export_path, export) = super::export(dir, None, false, None, &mut ())?;
    // The audit before compaction shows every heartbeat run whole.
    let audit = audit(dir, &featured, None, None)?;

    let compaction = super::compact(dir, Some(end), false, None)?;
    let stats = stats(dir, &mut ())?;
    let (state, _) = super::current(dir, &mut ())?;
    let registry = state.agents().iter().cloned().collect();
    debug_assert!(StoreLayout::new(dir).exists());
    Ok(DemoReport {
        dir: dir.to_path_buf(),
        start: opts.start,
        end,
        counts,
        snapshot,
        export_path,
        export,
        compaction,
        stats,
        registry,
        featured,
        audit,
        elapsed_ms: started.elapsed().as_millis() as u64,
    })
}

fn status_of(state: &State, name: &str) -> Option<(Status, StatusCause)> {
    state.agent(name).map(|a| (a.status, a.status_cause))
}

/// Runs the fleet; returns the counts, the simulated end time and the name
/// of the agent with the most eventful history that is still registered.
fn simulate(store: &Store, opts: &DemoOptions) -> Result<(FleetCounts, Timestamp, String)> {
    let mut rng = Rng(opts.seed);
    let mut c = FleetCounts::default();
    let mut probe = FakeProbe::default();
    let ticks = u64::from(opts.hours) * 3600 / TICK_S as u64;
    let mut slots: Vec<Slot> = (0..opts.agents)
        .map(|i| {
            let role = ROLES[i as usize % ROLES.len()];
            Slot {
                name: format!("{role}-{i:03}"),
                role,
                provider: PROVIDERS[(i as usize / ROLES.len()) % PROVIDERS.len()],
                interactive: i % 10 == 0,
                life: 0,
                pid: 0,
                // Arrivals spread over the first half hour.
                phase: Phase::Waiting(rng.range(0, 60)),
                quiet: 0,
                trouble: 0,
            }
        })
        .collect();
    let time = |tick: u64, slot: usize| {
        // Spread events of one tick over its 30 s (whole seconds), in slot order.
        opts.start
            .add_secs(tick as i64 * TICK_S + slot as i64 * (TICK_S - 1) / i64::from(opts.agents))
    };
    for tick in 0..ticks {
        for i in 0..slots.len() {
            let at = Some(time(tick, i));
            let st = store.with_state(|s, _| status_of(s, &slots[i].name));
            // Reviewers and testers register as children of their planner
            // when it is alive.
            let parent = match slots[i].phase {
                Phase::Waiting(t)
                    if tick >= t && matches!(slots[i].role, "reviewer" | "tester") =>
                {
                    let p = &slots[(i / 5) * 5].name;
                    store
                        .with_state(|s, _| s.agent(p).is_some_and(|a| !a.is_finished()))
                        .then(|| p.clone())
                }
                _ => None,
            };
            let slot = &mut slots[i];
            match slot.phase {
                Phase::Waiting(t) if tick >= t => {
                    slot.life += 1;
                    slot.pid = 20_000 + i as u32 * 16 + slot.life % 16;
                    let mut reg = Registration::new(&slot.name, slot.provider, "/work/repo");
                    reg.pid = Some(slot.pid);
                    reg.role = Some(slot.role.to_string());
                    reg.parent = parent;
                    reg.project_root = "/work/repo".to_string();
                    reg.log_path = Some(format!("/work/logs/{}-{}.log", slot.name, slot.life));
                    if slot.interactive {
                        reg.host_mode = Some(HostMode::Interactive);
                    }
                    store.register(reg, at)?;
                    probe.running.insert(slot.pid, None);
                    c.registrations += 1;
                    let life_ticks = rng.range(60, 480);
                    let ending = match rng.next() % 20 {
                        0..=11 => Ending::Complete,
                        12..=14 => Ending::Fail,
                        15..=17 => Ending::Hang,
                        _ => Ending::Die,
                    };
                    slot.phase = Phase::Alive(tick + life_ticks, ending);
                    if slot.interactive {
                        let key = SessionKey::new("ide", "/work/repo", &slot.name);
                        store.session(SessionOp::Open, key, None, at)?;
                        c.sessions += 1;
                    }
                }
                Phase::Waiting(_) => {}
                Phase::Gone => {
                    // Restart once the sweep has recorded the end of the life.
                    if st.is_some_and(|(s, _)| s.is_finished()) {
                        slot.phase = Phase::Waiting(tick + rng.range(10, 120));
                    }
                }
                Phase::Alive(end, ending) => {
                    if st.is_some_and(|(s, _)| s.is_finished()) {
                        // Swept while alive (a long quiet spell): start over.
                        slot.phase = Phase::Waiting(tick + rng.range(10, 60));
                        continue;
                    }
                    if tick >= end {
                        match ending {
                            Ending::Complete | Ending::Fail => {
                                let (s, m) = if ending == Ending::Complete {
                                    c.completed += 1;
                                    (Status::Exited, "task complete")
                                } else {
                                    c.failed += 1;
                                    (Status::Failed, "tests failed; giving up")
                                };
                                store.set_status(&slot.name, s, Some(m.into()), at)?;
                                c.status_changes += 1;
                                probe.running.remove(&slot.pid);
                                if slot.interactive {
                                    let key = SessionKey::new("ide", "/work/repo", &slot.name);
                                    store.session(SessionOp::Close, key, None, at)?;
                                    c.sessions += 1;
                                }
                                slot.phase = Phase::Waiting(tick + rng.range(10, 120));
                            }
                            Ending::Hang => {
                                c.hung += 1;
                                slot.trouble += 1;
                                slot.phase = Phase::Gone;
                            }
                            Ending::Die => {
                                c.died += 1;
                                slot.trouble += 1;
                                // Another process now holds the pid.
                                probe.running.insert(slot.pid, Some(1));
                                slot.phase = Phase::Gone;
                            }
                        }
                        continue;
                    }
                    if slot.quiet > 0 {
                        slot.quiet -= 1;
                        continue;
                    }
                    if slot.interactive && rng.chance(0.004) {
                        slot.quiet = rng.range(6, 14);
                        slot.trouble += 1;
                        continue;
                    }
                    if rng.chance(0.95) {
                        store.heartbeat(&slot.name, Some(slot.pid), at)?;
                        c.heartbeats += 1;
                        if slot.interactive && tick % 4 == 0 {
                            let key = SessionKey::new("ide", "/work/repo", &slot.name);
                            store.session(SessionOp::Heartbeat, key, None, at)?;
                            c.sessions += 1;
                        }
                    }
                    if rng.chance(0.04) {
                        let (s, m) = if st.is_some_and(|(s, _)| s == Status::Busy) {
                            (Status::Ready, "waiting for work".to_string())
                        } else {
                            (
                                Status::Busy,
                                format!("working on task #{}", rng.range(100, 999)),
                            )
                        };
                        store.set_status(&slot.name, s, Some(m), at)?;
                        c.status_changes += 1;
                    }
                    if rng.chance(0.015) {
                        // Broadcasts are rarer: every reader of one is
                        // recorded on it.
                        let to = if rng.chance(0.1) {
                            None
                        } else {
                            let j = rng.range(0, opts.agents as u64) as usize;
                            store
                                .with_state(|s, _| {
                                    s.agent(&slots[j].name).is_some_and(|a| !a.is_finished())
                                })
                                .then(|| slots[j].name.clone())
                                .filter(|n| *n != slots[i].name)
                        };
                        let slot = &slots[i];
                        let category = CATEGORIES[rng.range(0, 4) as usize];
                        let body = match category {
                            "handoff" => {
                                format!("{} hands off task #{}", slot.name, rng.range(100, 999))
                            }
                            "review" => format!("please review change {}", rng.range(1000, 9999)),
                            "question" => "which branch should I rebase on?".to_string(),
                            _ => format!("{} is at step {}", slot.name, rng.range(1, 20)),
                        };
                        let mut post = PostMessage::new(&slot.name, to.as_deref(), category, &body);
                        if rng.chance(0.1) {
                            post.priority = Priority::High;
                        }
                        store.post_message(post, at)?;
                        c.posts += 1;
                    }
                    if rng.chance(0.05) {
                        let msgs = store.read_messages(&slots[i].name, None, at)?;
                        c.reads += u64::from(!msgs.is_empty());
                    }
                }
            }
        }
        // The supervisor sweeps every two simulated minutes.
        if tick % 4 == 3 {
            let changes = store.sweep(Some(time(tick, slots.len())), &probe)?;
            c.swept += changes.len() as u64;
        }
    }
    let end = time(ticks, 0);
    c.swept += store.sweep(Some(end), &probe)?.len() as u64;
    store.sync()?;

    // Feature the registered agent that went through the most.
    let featured = store.with_state(|s, _| {
        slots
            .iter()
            .filter(|sl| s.agent(&sl.name).is_some())
            .max_by_key(|sl| {
                (
                    sl.trouble.min(3),
                    sl.life.min(4),
                    std::cmp::Reverse(sl.name.clone()),
                )
            })
            .map(|sl| sl.name.clone())
    });
    let featured = featured.ok_or_else(|| {
        OpsError::InvalidArgument("the simulated fleet left no agent registered".into())
    })?;
    Ok((c, end, featured))
}
