//! Helpers shared by the store tests.

use agentlog::log::{Durability, LogOptions};
use agentlog::model::Status;
use agentlog::registry::*;
use agentlog::store::{Store, StoreOptions};
use agentlog::time::Timestamp;

pub const T0: Timestamp = Timestamp(1_796_040_000_000);

/// Small segments, no flusher thread, no fsync per command: the log's
/// durability has its own tests; these test the registry over the log.
pub fn lazy_opts() -> StoreOptions {
    StoreOptions {
        log: LogOptions {
            segment_size: 256 * 1024,
            max_record_size: 128 * 1024,
            flush_interval: None,
            ..Default::default()
        },
        command_durability: Durability::Lazy,
        max_messages: 8,
        ..Default::default()
    }
}

/// Folds a store's whole log from scratch.
pub fn refold(store: &Store) -> State {
    let mut s = State::new(store.options().max_messages);
    for r in store.view().iter() {
        let r = r.unwrap();
        s.apply_payload(r.lsn, r.payload).unwrap();
    }
    s
}

/// A store of `commands` mixed commands over `names` (four), `step_ms`
/// apart from [`T0`], each chosen by its index (see [`mixed_command`]).
pub fn mixed_store(dir: &std::path::Path, names: &[&str; 4], commands: u32, step_ms: i64) -> Store {
    let store = Store::open(dir, lazy_opts()).unwrap();
    let mut at = T0;
    for i in 0..commands {
        at = at.add_millis(step_ms);
        mixed_command(
            &store,
            i % 10,
            names[(i % 4) as usize],
            names[((i / 4) % 4) as usize],
            1 + i % 3,
            at,
        );
    }
    store
}

/// One mixed command chosen by `pick` (0..10) over agent `n`; errors are
/// expected (that is what validation is for): returns whether it succeeded.
pub fn mixed_command(
    store: &Store,
    pick: u32,
    agent: &str,
    other: &str,
    pid: u32,
    at: Timestamp,
) -> bool {
    match pick {
        0 => {
            let mut r = Registration::new(agent, "codex", "/w");
            r.pid = Some(pid);
            store.register(r, Some(at)).map(|_| ())
        }
        1..=4 => store.heartbeat(agent, Some(pid), Some(at)).map(|_| ()),
        5 => store
            .set_status(
                agent,
                [Status::Busy, Status::Idle, Status::Exited][(pid % 3) as usize],
                None,
                Some(at),
            )
            .map(|_| ()),
        6 => {
            let mut p = PostMessage::new(agent, Some(other), "c", "hello");
            p.request_id = pid.is_multiple_of(2).then(|| format!("r{}", pid % 5));
            store.post_message(p, Some(at)).map(|_| ())
        }
        7 => store.read_messages(agent, None, Some(at)).map(|_| ()),
        8 => store
            .session(
                SessionOp::Heartbeat,
                SessionKey::new("cli", "/w", agent),
                None,
                Some(at),
            )
            .map(|_| ()),
        _ => store
            .update_fields(
                agent,
                FieldUpdates {
                    log_path: Some(Some(format!("/l/{pid}"))),
                    ..Default::default()
                },
                Some(at),
            )
            .map(|_| ()),
    }
    .is_ok()
}
