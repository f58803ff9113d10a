//! Who may write (docs/behaviour.md §6): the daemon's own uid, root, and the uids and
//! gids `serve` was told to allow; every other peer is an observer that may
//! only call read-only methods. A path in a request is acted on only for
//! the daemon's own uid ([`Access::may_name_paths`]): anyone else's client
//! opens the file itself and sends what it read, so no peer borrows the
//! daemon's authority over the file system.
//!
//! A gid allows a peer whose primary group it is, or one of whose
//! supplementary groups it is. `SO_PEERCRED` carries only the primary gid,
//! so the supplementary ones are read from the `Groups:` line of
//! `/proc/<pid>/status` of the peer's pid (as it connected); decided once
//! per connection, and only when `--allow-gid` is given and nothing else
//! already allows the peer.

use super::Peer;

/// The write policy of one daemon.
#[derive(Debug, Clone)]
pub struct Access {
    owner_uid: u32,
    uids: Vec<u32>,
    gids: Vec<u32>,
}

impl Access {
    pub fn new(owner_uid: u32, uids: Vec<u32>, gids: Vec<u32>) -> Self {
        Access {
            owner_uid,
            uids,
            gids,
        }
    }

    /// Whether `peer` may append.
    pub fn may_write(&self, peer: &Peer) -> bool {
        self.may_write_with(peer, supplementary_groups)
    }

    /// [`Access::may_write`], with the peer's supplementary groups from
    /// `groups` (given the peer's pid).
    fn may_write_with(&self, peer: &Peer, groups: impl FnOnce(u32) -> Vec<u32>) -> bool {
        peer.uid == 0
            || peer.uid == self.owner_uid
            || self.uids.contains(&peer.uid)
            || self.gids.contains(&peer.gid)
            || (!self.gids.is_empty()
                && peer
                    .pid
                    .is_some_and(|pid| groups(pid).iter().any(|g| self.gids.contains(g))))
    }

    /// Whether `peer` administers the daemon (its own uid, root): may
    /// renew or release any attach lease.
    pub fn administers(&self, peer: &Peer) -> bool {
        peer.uid == 0 || peer.uid == self.owner_uid
    }

    /// Whether the daemon may open or create a file at a path `peer` names
    /// (`export --out`, `replay --export`, `import FILE`): only for its own
    /// uid, whose authority it holds anyway. Not even root's: the daemon
    /// would act with less authority than root asked with.
    pub fn may_name_paths(&self, peer: &Peer) -> bool {
        peer.uid == self.owner_uid
    }

    /// The message of the `forbidden` error for a path parameter.
    pub fn path_refusal(&self, peer: &Peer, method: &str, param: &str) -> String {
        format!(
            "`{method}` names a path (`{param}`), and the daemon opens or creates files only \
             for its own uid {}, not for uid {}: the client opens the file itself (the \
             agentlog CLI does so) and sends its content (`import`), or runs the read-only \
             command directly (`export --out`, `replay --export`)",
            self.owner_uid, peer.uid
        )
    }

    /// The message of the `forbidden` error.
    pub fn refusal(&self, peer: &Peer, method: &str) -> String {
        format!(
            "`{method}` writes, and uid {} (gid {}) may only observe this store: the daemon \
             allows writes from uid {} and root (serve --allow-uid/--allow-gid widen that)",
            peer.uid, peer.gid, self.owner_uid
        )
    }
}

/// The supplementary groups of process `pid` (none if it is gone).
fn supplementary_groups(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            let line = s.lines().find_map(|l| l.strip_prefix("Groups:"))?;
            Some(
                line.split_whitespace()
                    .filter_map(|g| g.parse().ok())
                    .collect(),
            )
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_root_and_allowed_write_others_observe() {
        let a = Access::new(1000, vec![1001], vec![50]);
        let p = |uid, gid| Peer {
            uid,
            gid,
            pid: None,
        };
        assert!(a.may_write(&p(1000, 1)));
        assert!(a.may_write(&p(0, 0)));
        assert!(a.may_write(&p(1001, 1)));
        assert!(a.may_write(&p(2000, 50)));
        assert!(!a.may_write(&p(2000, 51)));
        assert!(a.refusal(&p(2000, 51), "heartbeat").contains("uid 2000"));
        assert!(a.may_name_paths(&p(1000, 1)));
        for other in [p(0, 0), p(1001, 1), p(2000, 50)] {
            assert!(!a.may_name_paths(&other), "{other:?}");
        }
    }

    /// A member of an allowed gid through a supplementary group writes.
    #[test]
    fn supplementary_groups_count() {
        let a = Access::new(1000, vec![], vec![50]);
        let peer = Peer {
            uid: 2000,
            gid: 7,
            pid: Some(42),
        };
        assert!(a.may_write_with(&peer, |pid| if pid == 42 { vec![3, 50] } else { vec![] }));
        assert!(!a.may_write_with(&peer, |_| vec![3, 51]));
        // This process's own groups, read from /proc.
        let me = std::process::id();
        let own = supplementary_groups(me);
        let status = std::fs::read_to_string(format!("/proc/{me}/status")).unwrap();
        let line = status.lines().find(|l| l.starts_with("Groups:")).unwrap();
        assert_eq!(own.len(), line.split_whitespace().count() - 1, "{line}");
    }
}
