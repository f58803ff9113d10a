//! A small tmpfs for the full-disk tests, and filling it up. Mounting needs
//! root; where it fails, [`try_mount`] says `None` and each test chooses
//! its fallback (fault injection, or saying it could not run).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Unmounts the tmpfs when the test ends, however it ends.
pub struct Mount(PathBuf);

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// Mounts a tmpfs of `size_mib` MiB on `dir`, or `None` where that fails.
pub fn try_mount(dir: &Path, size_mib: u64) -> Option<Mount> {
    let ok = Command::new("mount")
        .args(["-t", "tmpfs", "-o", &format!("size={size_mib}m"), "tmpfs"])
        .arg(dir)
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    ok.then(|| Mount(dir.to_path_buf()))
}

/// Writes into `path` until the file system refuses (ENOSPC), then gives
/// `keep` bytes back.
pub fn fill_leaving(path: &Path, keep: u64) {
    let mut f = std::fs::File::create(path).expect("filler");
    let chunk = vec![0x5au8; 64 << 10];
    loop {
        match f.write_all(&chunk) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => break,
            Err(e) => panic!("filling {}: {e}", path.display()),
        }
    }
    let len = f.metadata().unwrap().len();
    f.set_len(len.saturating_sub(keep)).unwrap();
    f.sync_all().unwrap();
}
