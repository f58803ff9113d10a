//! Who may read a store, as the command line sets it up: a store directory
//! is created 0700 (0750 when shared with its group) and this process's
//! umask keeps the files it creates to 0600 (0640). The directory's mode is
//! what keeps private messages private, so opening a store whose directory
//! others can enter warns. The binary's policy, not the library's: a library
//! user keeps its own umask and makes its own directories.
//!
//! A shared store's files belong to the directory's group, whoever writes
//! them: its folders carry the set-group-ID bit, so every file and folder
//! created in them (segments, snapshots, locks, the daemon's socket) takes
//! the folder's group, not the writer's primary one. [`inherit_group`] sets
//! that up on a store made before, and gives the group back the files its
//! owner created with another.

use std::fs::{DirBuilder, Permissions};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::Path;

/// Who besides the owner may read a store.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Sharing {
    /// Only the owner (directory 0700, files 0600).
    #[default]
    Private,
    /// The owner and the directory's group, read-only (0750 / 0640).
    Group,
}

impl Sharing {
    /// The store directory's mode (permission bits).
    pub fn dir_mode(self) -> u32 {
        match self {
            Sharing::Private => 0o700,
            Sharing::Group => 0o750,
        }
    }

    /// The mode a store directory is created with: [`Sharing::dir_mode`],
    /// plus set-group-ID when shared, so what is created in it keeps its
    /// group.
    fn created_mode(self) -> u32 {
        match self {
            Sharing::Private => self.dir_mode(),
            Sharing::Group => self.dir_mode() | SET_GID,
        }
    }

    /// The sharing an existing store directory was set up for: its group
    /// bits say whether it is shared.
    pub fn of_dir(dir: &Path) -> Sharing {
        match std::fs::metadata(dir) {
            Ok(m) if m.permissions().mode() & 0o070 != 0 => Sharing::Group,
            _ => Sharing::Private,
        }
    }

    /// Makes this process create files and folders no more open than
    /// `self` allows (umask 077, or 027 when shared with the group): the
    /// log's segments, locks and snapshots then get 0600 / 0640 without each
    /// writer naming a mode. For the command-line tool, which owns its
    /// process; a library user keeps its own umask (the directory's mode
    /// still guards the files).
    pub fn restrict_process_umask(self) {
        // Nothing the directory's mode withholds: 077 or 027.
        let mask = 0o777 & !self.dir_mode();
        rustix::process::umask(rustix::fs::Mode::from_raw_mode(mask));
    }
}

/// Creates the store directory `dir` (and missing parents, with default
/// modes) with `sharing`'s mode, set exactly (not less the umask). An
/// existing directory is left as it is.
pub fn create_store_dir(dir: &Path, sharing: Sharing) -> std::io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)?;
    }
    match DirBuilder::new().mode(sharing.dir_mode()).create(dir) {
        Ok(()) => std::fs::set_permissions(dir, Permissions::from_mode(sharing.created_mode())),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && dir.is_dir() => Ok(()),
        Err(e) => Err(e),
    }
}

/// The set-group-ID bit of a directory's mode.
const SET_GID: u32 = 0o2000;

/// For a group-shared store in `dir`: gives every folder this process owns
/// the set-group-ID bit, and every file or folder it owns the directory's
/// group where it has another (what a writer whose primary group differs
/// created before), so the group can read all of it and what is created
/// later keeps that group. Nothing for a private store. What cannot be
/// changed (not the owner, not a member of the group) is left as it is,
/// with a warning: the store still works for its owner.
pub fn inherit_group(dir: &Path) {
    use std::os::unix::fs::MetadataExt;
    let Ok(top) = std::fs::metadata(dir) else {
        return;
    };
    if Sharing::of_dir(dir) != Sharing::Group {
        return;
    }
    let me = rustix::process::geteuid().as_raw();
    let group = rustix::fs::Gid::from_raw(top.gid());
    let mut todo = vec![dir.to_path_buf()];
    while let Some(p) = todo.pop() {
        let Ok(m) = std::fs::symlink_metadata(&p) else {
            continue;
        };
        if m.is_dir() {
            if let Ok(entries) = std::fs::read_dir(&p) {
                todo.extend(entries.filter_map(|e| e.ok()).map(|e| e.path()));
            }
        }
        if m.uid() != me || m.file_type().is_symlink() {
            continue;
        }
        if m.gid() != top.gid() {
            if let Err(e) = rustix::fs::chown(&p, None, Some(group)) {
                tracing::warn!(file = %p.display(), error = %e, "cannot give the file the store's group");
            }
        }
        let mode = m.permissions().mode();
        if m.is_dir() && mode & SET_GID == 0 {
            let _ = std::fs::set_permissions(&p, Permissions::from_mode(mode & 0o7777 | SET_GID));
        }
    }
}

/// A warning when users other than the owner and its group can enter the
/// store directory `dir` (and so read private messages), naming the fix.
pub fn exposure_warning(dir: &Path) -> Option<String> {
    let mode = std::fs::metadata(dir).ok()?.permissions().mode() & 0o777;
    (mode & 0o007 != 0).then(|| {
        format!(
            "the store {} is open to every local user (mode {mode:04o}), so private \
             messages are readable: chmod 700 it (750 to share with its group)",
            dir.display()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_dirs_are_private_or_group_shared() {
        let root = tempfile::tempdir().unwrap();
        for (sharing, mode) in [(Sharing::Private, 0o700), (Sharing::Group, 0o750)] {
            let dir = root.path().join(format!("{mode:o}/store"));
            create_store_dir(&dir, sharing).unwrap();
            let got = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
            assert_eq!(got, mode);
            assert!(exposure_warning(&dir).is_none());
        }
        let open = root.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, Permissions::from_mode(0o755)).unwrap();
        let w = exposure_warning(&open).unwrap();
        assert!(w.contains("mode 0755") && w.contains("chmod 700"), "{w}");
    }
}
