//! Who asked for the events a thread appends: the daemon runs each request
//! with [`with_origin`], and the store stamps every event that request
//! appends with the origin trailer (`codec::push_origin`). A thread-local
//! keeps the `Store` command signatures unchanged; outside `with_origin`
//! (the CLI's direct path, the library) events carry no origin.

use crate::registry::codec::{self, Origin};
use std::cell::Cell;

thread_local! {
    static CURRENT: Cell<Option<Origin>> = const { Cell::new(None) };
    static ACCESS: Cell<Option<PeerAccess>> = const { Cell::new(None) };
}

/// What the daemon's access policy grants the peer of the request running
/// on this thread (docs/behaviour.md §6): read by the commands that answer
/// per caller (a lease's management, the `actions` of an entry).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerAccess {
    /// May append (the owner, root, allowed uids and gids).
    pub may_write: bool,
    /// The daemon's owner uid or root: may manage any lease.
    pub admin: bool,
}

/// Runs `f` with `access` as the current peer's (restored afterwards).
pub fn with_access<R>(access: PeerAccess, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<PeerAccess>);
    impl Drop for Restore {
        fn drop(&mut self) {
            ACCESS.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(ACCESS.with(|c| c.replace(Some(access))));
    f()
}

/// The access set by the innermost [`with_access`]: `None` outside a
/// daemon request.
pub fn current_access() -> Option<PeerAccess> {
    ACCESS.with(Cell::get)
}

/// Runs `f` with `origin` recorded on every event the store appends from
/// this thread meanwhile (restored afterwards, also on panic).
pub fn with_origin<R>(origin: Origin, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<Origin>);
    impl Drop for Restore {
        fn drop(&mut self) {
            CURRENT.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(CURRENT.with(|c| c.replace(Some(origin))));
    f()
}

/// The origin set by the innermost [`with_origin`] on this thread.
pub fn current_origin() -> Option<Origin> {
    CURRENT.with(Cell::get)
}

/// Appends the current origin's trailer to an encoded payload, if any.
#[inline]
pub(super) fn stamp(buf: &mut Vec<u8>) {
    if let Some(o) = CURRENT.with(Cell::get) {
        codec::push_origin(buf, o);
    }
}
