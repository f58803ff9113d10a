//! What a benchmark ran on: cores, kernel, CPU model, memory, and the
//! filesystem and disk holding the data directory.
//!
//! Everything is read from `/proc` and `/sys` (no `unsafe`: the kernel release
//! comes from `/proc/sys/kernel/osrelease`, which is what `uname -r` prints, and
//! the filesystem type from the mount table entry whose device number matches
//! the directory's, which is what `statfs` would name). A fact that cannot be
//! found is reported as `"unknown"` / `None`, never guessed.

use super::{BenchError, Result};
use serde::{Deserialize, Serialize};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The machine a report was measured on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MachineInfo {
    /// CPUs this process may run on.
    pub cores: usize,
    /// Kernel release (`uname -r`).
    pub kernel: String,
    /// `model name` from `/proc/cpuinfo`.
    pub cpu_model: String,
    /// `MemTotal` in bytes.
    pub memory_bytes: u64,
    /// The directory that was probed (canonical).
    pub dir: PathBuf,
    /// Filesystem type of `dir` (`ext4`, `xfs`, `tmpfs`, `overlay`, …).
    pub fs_type: String,
    /// Mount source of `dir` (`/dev/sda1`, `overlay`, …).
    pub device: String,
    /// Mount point holding `dir`.
    pub mount_point: PathBuf,
    /// From `/sys/dev/block/<maj:min>/…/queue/rotational` when the device is
    /// a block device; `None` for virtual filesystems or when unresolvable.
    pub rotational: Option<bool>,
}

impl MachineInfo {
    /// Probes the machine and the filesystem holding `dir` (which must exist).
    pub fn probe(dir: &Path) -> Result<MachineInfo> {
        let dir = dir
            .canonicalize()
            .map_err(|e| BenchError::io("cannot resolve benchmark directory", dir, e))?;
        let meta = std::fs::metadata(&dir)
            .map_err(|e| BenchError::io("cannot stat benchmark directory", &dir, e))?;
        let dev = meta.dev();
        let (major, minor) = (dev_major(dev), dev_minor(dev));

        let cores = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        let kernel = read_trimmed("/proc/sys/kernel/osrelease").unwrap_or_else(|| "unknown".into());
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let cpu_model = cpu_model_from(&cpuinfo).unwrap_or_else(|| "unknown".into());
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        let memory_bytes = mem_total_from(&meminfo).unwrap_or(0);

        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        let mount = mount_for(&mountinfo, major, minor, &dir);
        let (fs_type, device, mount_point) = match mount {
            Some(m) => (m.fs_type, m.source, m.mount_point),
            None => ("unknown".into(), "unknown".into(), PathBuf::from("/")),
        };
        Ok(MachineInfo {
            cores,
            kernel,
            cpu_model,
            memory_bytes,
            dir,
            fs_type,
            device,
            mount_point,
            rotational: rotational(major, minor),
        })
    }
}

// glibc's gnu_dev_major/minor encoding of a 64-bit dev_t.
fn dev_major(dev: u64) -> u64 {
    ((dev >> 32) & 0xffff_f000) | ((dev >> 8) & 0x0000_0fff)
}
fn dev_minor(dev: u64) -> u64 {
    ((dev >> 12) & 0xffff_ff00) | (dev & 0x0000_00ff)
}

fn read_trimmed(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

fn cpu_model_from(cpuinfo: &str) -> Option<String> {
    cpuinfo.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        let k = k.trim();
        // x86 says `model name`; some arm kernels only give `Hardware`/`CPU part`.
        (k == "model name" || k == "Hardware").then(|| v.trim().to_string())
    })
}

fn mem_total_from(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

#[derive(Debug, PartialEq, Eq)]
struct Mount {
    mount_point: PathBuf,
    fs_type: String,
    source: String,
}

/// Picks the `/proc/self/mountinfo` entry for `dir`: same device number and
/// the longest mount point that is a prefix of `dir` (bind mounts share a
/// device; the deepest one is where `dir` lives). Falls back to the longest
/// prefix alone when no device number matches (e.g. btrfs subvolumes).
fn mount_for(mountinfo: &str, major: u64, minor: u64, dir: &Path) -> Option<Mount> {
    let want = format!("{major}:{minor}");
    let mut by_dev: Option<Mount> = None;
    let mut by_prefix: Option<Mount> = None;
    for line in mountinfo.lines() {
        // id parent maj:min root mount_point options [optional…] - fstype source super
        let (left, right) = match line.split_once(" - ") {
            Some(p) => p,
            None => continue,
        };
        let l: Vec<&str> = left.split(' ').collect();
        let r: Vec<&str> = right.split(' ').collect();
        if l.len() < 5 || r.len() < 2 {
            continue;
        }
        let m = Mount {
            mount_point: PathBuf::from(unescape_mount(l[4])),
            fs_type: r[0].to_string(),
            source: unescape_mount(r[1]),
        };
        if !dir.starts_with(&m.mount_point) {
            continue;
        }
        let len = m.mount_point.as_os_str().len();
        let deeper = |cur: &Option<Mount>| {
            cur.as_ref()
                .is_none_or(|c| len >= c.mount_point.as_os_str().len())
        };
        if l[2] == want {
            if deeper(&by_dev) {
                by_dev = Some(m);
            }
        } else if deeper(&by_prefix) {
            by_prefix = Some(m);
        }
    }
    by_dev.or(by_prefix)
}

/// Mount paths escape space, tab, newline and backslash as `\ooo`.
fn unescape_mount(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = (b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0');
            out.push(v);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `queue/rotational` of the block device, or of its parent for a partition.
fn rotational(major: u64, minor: u64) -> Option<bool> {
    if major == 0 {
        return None; // anonymous device: tmpfs, overlay, proc, …
    }
    let base = PathBuf::from(format!("/sys/dev/block/{major}:{minor}"));
    let base = base.canonicalize().ok()?;
    for p in [
        base.join("queue/rotational"),
        base.parent()?.join("queue/rotational"),
    ] {
        if let Ok(s) = std::fs::read_to_string(&p) {
            return match s.trim() {
                "1" => Some(true),
                "0" => Some(false),
                _ => None,
            };
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_cpuinfo_and_meminfo() {
        let cpu = "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) CPU @ 2.20GHz\n";
        assert_eq!(
            cpu_model_from(cpu).unwrap(),
            "Intel(R) Xeon(R) CPU @ 2.20GHz"
        );
        assert_eq!(cpu_model_from("processor : 0\n"), None);
        assert_eq!(
            mem_total_from("MemTotal:       16384 kB\nMemFree: 1 kB\n"),
            Some(16384 * 1024)
        );
        assert_eq!(mem_total_from("MemFree: 1 kB\n"), None);
    }

    #[test]
    fn picks_deepest_mount_with_matching_device() {
        let mi = "\
22 1 0:21 / / rw - overlay overlay rw\n\
30 22 8:1 / /data rw shared:1 - ext4 /dev/sda1 rw\n\
31 30 8:1 /sub /data/with\\040space rw - ext4 /dev/sda1 rw\n\
32 22 0:40 / /data/other rw - tmpfs tmpfs rw\n";
        let m = mount_for(mi, 8, 1, Path::new("/data/with space/x")).unwrap();
        assert_eq!(m.mount_point, PathBuf::from("/data/with space"));
        assert_eq!(m.fs_type, "ext4");
        assert_eq!(m.source, "/dev/sda1");
        let m = mount_for(mi, 8, 1, Path::new("/data/y")).unwrap();
        assert_eq!(m.mount_point, PathBuf::from("/data"));
        // No device match: the deepest prefix.
        let m = mount_for(mi, 9, 9, Path::new("/data/other/z")).unwrap();
        assert_eq!(m.fs_type, "tmpfs");
    }

    #[test]
    fn probe_describes_a_real_directory() {
        let dir = tempfile::tempdir().unwrap();
        let m = MachineInfo::probe(dir.path()).unwrap();
        assert!(m.cores >= 1);
        assert!(m.memory_bytes > 0);
        assert_ne!(m.kernel, "unknown");
        assert_ne!(m.fs_type, "unknown");
        let json = serde_json::to_value(&m).unwrap();
        for k in [
            "cores",
            "kernel",
            "cpu_model",
            "memory_bytes",
            "fs_type",
            "device",
            "rotational",
        ] {
            assert!(json.get(k).is_some(), "missing {k}");
        }
        let err = MachineInfo::probe(&dir.path().join("missing")).unwrap_err();
        assert!(err.to_string().contains("missing"), "{err}");
    }
}
