//! A group-shared store works for its group (issue 30, finding 11): the
//! daemon's socket and every file a writer creates belong to the store
//! directory's group, not the writer's primary group, and a member whom the
//! socket refuses still reads the store directly. Runs a real second uid
//! (65534, in group 65534); needs root, whose primary group (0) differs.

use crate::support::daemon::{bin, Daemon, Store};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::Path;

const MEMBER: u32 = 65534;

/// Runs the CLI on the store as uid/gid [`MEMBER`].
fn as_member(s: &Store, args: &[&str]) -> std::process::Output {
    bin()
        .arg("--dir")
        .arg(&s.dir)
        .args(args)
        .uid(MEMBER)
        .gid(MEMBER)
        .output()
        .unwrap()
}

/// Every path under `dir` (itself included) whose group is not `gid`.
fn not_in_group(dir: &Path, gid: u32) -> Vec<String> {
    let mut wrong = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(p) = todo.pop() {
        let m = std::fs::symlink_metadata(&p).unwrap();
        if m.is_dir() {
            todo.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
        }
        if m.gid() != gid {
            wrong.push(format!("{} (gid {})", p.display(), m.gid()));
        }
    }
    wrong
}

#[test]
fn a_group_shared_store_stays_readable_by_its_group() {
    assert!(
        rustix::process::geteuid().is_root(),
        "switches to uid {MEMBER}: needs root"
    );
    let s = Store::new();
    std::fs::set_permissions(s.tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    // A store made before, then shared with the group: `init --group`'s
    // mode, given to the group by its owner.
    std::fs::set_permissions(&s.dir, std::fs::Permissions::from_mode(0o750)).unwrap();
    let group = Some(rustix::fs::Gid::from_raw(MEMBER));
    let mut todo = vec![s.dir.clone()];
    while let Some(p) = todo.pop() {
        if p.is_dir() {
            todo.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o750)).unwrap();
        } else {
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o640)).unwrap();
        }
        rustix::fs::chown(&p, None, group).unwrap();
    }
    s.ok(&["register", "w1", "--provider", "claude", "--cwd", "/w"]);
    let d = Daemon::start(&s.dir, &[]);
    // Through the socket, as a member of the group.
    let socket = std::fs::metadata(s.socket()).unwrap();
    assert_eq!(
        socket.gid(),
        MEMBER,
        "the socket belongs to the store's group"
    );
    let out = as_member(&s, &["list"]);
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("w1"));
    // New files: a snapshot, and a new segment from a compaction's seal.
    for name in ["w2", "w3"] {
        s.ok(&["register", name, "--provider", "claude", "--cwd", "/w"]);
    }
    s.ok(&["snapshot"]);
    s.ok(&["compact"]);
    s.ok(&["heartbeat", "w2"]);
    let wrong = not_in_group(&s.dir, MEMBER);
    assert!(wrong.is_empty(), "not the store's group: {wrong:?}");
    let out = as_member(&s, &["--no-daemon", "list"]);
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("w3"));
    // A socket the member may not open: reads go direct, as the files allow.
    std::fs::set_permissions(s.socket(), std::fs::Permissions::from_mode(0o600)).unwrap();
    let out = as_member(&s, &["list"]);
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("w3"));
    // A write cannot go around the daemon: it says why.
    let out = as_member(&s, &["heartbeat", "w1"]);
    assert!(!out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("Permission denied"),
        "{out:?}"
    );
    drop(d);
}
