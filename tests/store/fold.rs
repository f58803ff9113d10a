//! The one fold loop (`registry::history::fold`) and its stop point: a fold
//! to a point and on from there is the fold to the further point; a time
//! point skips a late stamp alone and names it as the next record; progress
//! is reported from the base and then every `PROGRESS_EVERY` records.

use crate::support::store::*;
use agentlog::registry::history::{self, Folded, Until, PROGRESS_EVERY};
use agentlog::registry::*;
use agentlog::store::Store;

const NAMES: [&str; 4] = ["a", "b", "c", "d"];

fn fold_to(store: &Store, after: Lsn, base: &State, until: Until) -> (State, Folded) {
    let mut state = base.clone();
    let folded = history::fold(&store.view(), &mut state, after, until, &mut |_| {}).unwrap();
    (state, folded)
}

#[test]
fn a_fold_to_a_point_and_on_equals_the_fold_to_the_further_point() {
    let dir = tempfile::tempdir().unwrap();
    let store = mixed_store(dir.path(), &NAMES, 400, 250);
    let last = store.applied_lsn();
    assert!(last > 100, "{last}");
    let empty = State::new(store.options().max_messages);
    for (j, k) in [
        (0, 1),
        (1, 2),
        (17, 60),
        (60, 61),
        (last / 2, last),
        (3, last + 10),
    ] {
        let (to_j, fj) = fold_to(&store, 0, &empty, Until::Lsn(j));
        assert_eq!(fj.last, j.min(last));
        assert_eq!(fj.events, j.min(last));
        let (on, fk) = fold_to(&store, j, &to_j, Until::Lsn(k));
        let (direct, fd) = fold_to(&store, 0, &empty, Until::Lsn(k));
        assert_eq!(on, direct, "fold to {j} then on to {k}");
        assert_eq!(on, store.state_at(Until::Lsn(k)).unwrap());
        assert_eq!((fk.last, fd.last), (k.min(last), k.min(last)));
        assert_eq!(fk.events, k.min(last) - j);
        let next = (k < last).then_some(k + 1);
        assert_eq!((fk.next, fd.next), (next, next), "next after {k}");
    }
    let (all, end) = fold_to(&store, 0, &empty, Until::End);
    assert_eq!(all, store.state());
    assert_eq!(
        end,
        Folded {
            last,
            events: last,
            next: None
        }
    );
}

#[test]
fn a_time_point_skips_a_late_stamp_alone_and_names_it_next() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), lazy_opts()).unwrap();
    let reg = Registration::new("a", "codex", "/w");
    let (first, _) = store.register(reg, Some(T0)).unwrap();
    let on_time = store
        .heartbeat("a", None, Some(T0.add_millis(1_000)))
        .unwrap();
    let late = store
        .heartbeat("a", None, Some(T0.add_millis(90_000)))
        .unwrap();
    let after_late = store
        .heartbeat("a", None, Some(T0.add_millis(2_000)))
        .unwrap();
    let past_point = store
        .heartbeat("a", None, Some(T0.add_millis(95_000)))
        .unwrap();
    assert_eq!(
        [first, on_time, late, after_late, past_point],
        [1, 2, 3, 4, 5]
    );
    let empty = State::new(store.options().max_messages);
    let (state, f) = fold_to(&store, 0, &empty, Until::Time(T0.add_millis(2_000)));
    assert_eq!(
        f,
        Folded {
            last: after_late,
            events: 3,
            next: Some(late)
        }
    );
    assert_eq!(state.agent("a").unwrap().last_active, T0.add_millis(2_000));
    assert_eq!(
        state,
        store.state_at(Until::Time(T0.add_millis(2_000))).unwrap()
    );
    assert_eq!(
        history::event_time(&store.view(), late).unwrap(),
        Some(T0.add_millis(90_000))
    );
    assert_eq!(
        history::event_time(&store.view(), past_point + 1).unwrap(),
        None
    );
}

#[test]
fn progress_starts_at_the_base_then_every_progress_every_records() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path(), lazy_opts()).unwrap();
    store
        .register(Registration::new("a", "codex", "/w"), Some(T0))
        .unwrap();
    let mut at = T0;
    for _ in 0..2 * PROGRESS_EVERY + 10 {
        at = at.add_millis(1);
        store.heartbeat("a", None, Some(at)).unwrap();
    }
    let after = 5;
    let base = store.state_at(Until::Lsn(after)).unwrap();
    let mut seen = Vec::new();
    let mut state = base.clone();
    let f = history::fold(&store.view(), &mut state, after, Until::End, &mut |l| {
        seen.push(l)
    })
    .unwrap();
    assert_eq!(
        seen,
        [after, after + PROGRESS_EVERY, after + 2 * PROGRESS_EVERY]
    );
    assert_eq!(f.last, store.applied_lsn());
    assert_eq!(state, store.state());
}
