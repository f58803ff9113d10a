//! The only `unsafe` code of agentlog: memory maps of segment files, the
//! raw syscalls the log needs (`fallocate`, the `FIEMAP` ioctl, the writer's
//! open-file-description lock and its probe), `wait4`
//! for `bench cli` (a child's peak RSS; std and rustix offer no rusage of
//! one child), and the `pre_exec` hook that ties a spawned server's life to
//! its spawning thread (the servers of `bench cluster` and the tests); these
//! two only with the `internals` feature.
//!
//! # Safety argument
//!
//! A [`Map`] wraps a `memmap2::MmapRaw` (a raw pointer + length, never a
//! long-lived `&mut [u8]`). The log's protocol divides every map in two:
//!
//! * the **published prefix** `[0, end)` where `end` is a segment's committed
//!   end, stored with `Release` by the single writer and loaded with `Acquire`
//!   by views. Published bytes are immutable for as long as any view can see
//!   them: the writer only writes at offsets `>= end`, and the only code that
//!   rewrites published-looking bytes (tail recovery zeroing) runs in
//!   `Log::open` before any view exists, on bytes that never validated.
//! * the **unpublished suffix** `[end, len)`, written only by the writer while
//!   holding the writer mutex, so there is exactly one writer and no reader
//!   of those bytes in this process.
//!
//! Hence `bytes(end)` hands out `&[u8]` only for the published prefix and
//! `write`/`fill`/`zero` assert that they stay inside the map; callers (all in
//! `crate::log`) only ever pass offsets in the unpublished suffix. Slices handed
//! out never overlap a region being written.
//!
//! Files another process may map are never shrunk: sealing (segment format
//! 3) keeps the file's length and punches a hole into the unused space
//! instead, so a reader's map of the old length never touches a page past
//! the end of the file (which would be SIGBUS). Compaction unlinks files (the
//! mapping stays valid until dropped). Another
//! process (a `LogReader`) reads the same file through its own read-only map
//! and validates every record by CRC before showing it, so a torn concurrent
//! write is simply "not yet there". We assume, as every mmap-based store does,
//! that no foreign process modifies a log's published bytes.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::ptr;

use memmap2::{MmapOptions, MmapRaw};

/// A shared or read-only mapping of a whole file (see the module safety argument).
pub(crate) struct Map {
    raw: MmapRaw,
}

impl std::fmt::Debug for Map {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Map({} bytes)", self.raw.len())
    }
}

impl Map {
    /// Map `len` bytes of `file` read-write (shared).
    pub fn map_rw(file: &File, len: usize) -> io::Result<Map> {
        let raw = MmapOptions::new().len(len).map_raw(file)?;
        Ok(Map { raw })
    }

    /// Map `len` bytes of `file` read-only (readers in other processes, verify).
    pub fn map_ro(file: &File, len: usize) -> io::Result<Map> {
        if len == 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "empty file"));
        }
        // No MAP_POPULATE: a reader touches only what it reads (a footer, a
        // tail after a snapshot), not every page of every segment, so its
        // RSS does not grow with the log.
        let raw = MmapOptions::new().len(len).map_raw_read_only(file)?;
        Ok(Map { raw })
    }

    pub fn len(&self) -> usize {
        self.raw.len()
    }

    /// The published prefix `[0, end)`.
    pub fn bytes(&self, end: usize) -> &[u8] {
        assert!(end <= self.raw.len(), "published end beyond map");
        // SAFETY: in bounds (asserted); the prefix is immutable while views
        // exist (module safety argument), and the map outlives `&self`.
        unsafe { std::slice::from_raw_parts(self.raw.as_ptr(), end) }
    }

    /// Copy `data` to `off` (unpublished region; writer only).
    pub fn write(&self, off: usize, data: &[u8]) {
        assert!(off + data.len() <= self.raw.len(), "write beyond map");
        // SAFETY: in bounds; the target region is unpublished and written
        // only by the single writer holding the writer mutex; `data` cannot
        // alias it (it is not handed out as a slice yet).
        unsafe {
            ptr::copy_nonoverlapping(data.as_ptr(), self.raw.as_mut_ptr().add(off), data.len())
        }
    }

    /// Let `f` fill `len` bytes at `off` in place (unpublished region; writer only).
    pub fn fill<R>(&self, off: usize, len: usize, f: impl FnOnce(&mut [u8]) -> R) -> R {
        assert!(off + len <= self.raw.len(), "fill beyond map");
        // SAFETY: in bounds; unpublished and exclusively owned by the writer
        // (see `write`), so this `&mut` aliases nothing for its lifetime.
        let buf = unsafe { std::slice::from_raw_parts_mut(self.raw.as_mut_ptr().add(off), len) };
        f(buf)
    }

    /// Zero `len` bytes at `off` (recovery before any view exists, or unpublished).
    pub fn zero(&self, off: usize, len: usize) {
        assert!(off + len <= self.raw.len(), "zero beyond map");
        // SAFETY: as for `write`.
        unsafe { ptr::write_bytes(self.raw.as_mut_ptr().add(off), 0, len) }
    }

    /// Drop this process's page-table entries for the whole map
    /// (`madvise(MADV_DONTNEED)`), so a sealed or fully scanned segment stops
    /// counting towards RSS. On a shared file mapping this loses nothing: the
    /// pages (dirty ones included) stay in the page cache and the next access
    /// faults them back in. Only advice: a failure is ignored.
    pub fn release_resident(&self) {
        // SAFETY: the mapping is `MAP_SHARED` of a file (or read-only), never
        // private/anonymous, so DONTNEED cannot zero or change any byte a
        // slice may observe; it only unmaps pages that re-fault on access.
        let _ = unsafe {
            self.raw
                .unchecked_advise(memmap2::UncheckedAdvice::DontNeed)
        };
    }

    /// [`Map::release_resident`] for `[off, off+len)` only (page-aligned
    /// `off`): a long scan drops what it left behind as it goes.
    pub fn release_resident_range(&self, off: usize, len: usize) {
        if len == 0 || !off.is_multiple_of(4096) || off + len > self.raw.len() {
            return;
        }
        // SAFETY: as for `release_resident`: a shared file (or read-only)
        // mapping, in bounds (checked), so no observable byte changes.
        let _ = unsafe {
            self.raw
                .unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, off, len)
        };
    }

    /// msync(MS_SYNC) of `[off, off+len)`: returns once those bytes are on disk.
    pub fn flush(&self, off: usize, len: usize) -> io::Result<()> {
        if len == 0 {
            return Ok(());
        }
        self.raw.flush_range(off, len)
    }
}

/// Allocate real blocks for `[0, len)` of `file` (not a sparse hole, so a write
/// through the map can never SIGBUS on a full disk). Falls back to
/// `posix_fallocate` where `fallocate` is not supported.
pub(crate) fn fallocate(file: &File, len: u64) -> io::Result<()> {
    let fd = file.as_raw_fd();
    let len = len as libc::off_t;
    // SAFETY: plain syscall on a valid open fd.
    let rc = unsafe { libc::fallocate(fd, 0, 0, len) };
    if rc == 0 {
        return Ok(());
    }
    let err = io::Error::last_os_error();
    if err.raw_os_error() == Some(libc::EOPNOTSUPP) {
        // SAFETY: plain syscall on a valid open fd.
        let rc = unsafe { libc::posix_fallocate(fd, 0, len) };
        if rc == 0 {
            return Ok(());
        }
        return Err(io::Error::from_raw_os_error(rc));
    }
    Err(err)
}

/// Give back the blocks of `[off, off+len)` of `file` without changing its
/// size (`FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE`): the range reads as
/// zeros afterwards, and a process mapping it reads zeros too, never SIGBUS
/// (the file does not shrink). Fails with `EOPNOTSUPP` where the filesystem
/// cannot punch holes.
pub(crate) fn punch_hole(file: &File, off: u64, len: u64) -> io::Result<()> {
    if len == 0 {
        return Ok(());
    }
    let flags = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
    // SAFETY: plain syscall on a valid open fd.
    let rc = unsafe {
        libc::fallocate(
            file.as_raw_fd(),
            flags,
            off as libc::off_t,
            len as libc::off_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// An open-file-description lock over all of `file` (`F_OFD_SETLK`): the
/// writer's presence mark, which readers probe with [`ofd_lock_held`].
/// Unlike `/proc/locks` the probe sees it from any pid namespace, and unlike
/// a POSIX lock it is neither dropped when another descriptor of the file in
/// this process closes nor invisible to readers in this process. `exclusive`
/// needs `file` open for writing.
pub(crate) fn ofd_lock(file: &File, exclusive: bool) -> io::Result<()> {
    let typ = if exclusive {
        libc::F_WRLCK
    } else {
        libc::F_RDLCK
    };
    let mut lock = whole_file(typ);
    // SAFETY: plain syscall on a valid open fd with a valid `flock`.
    let rc = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_SETLK, &mut lock) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Whether an open file description other than `file`'s holds a lock on
/// `file` that an exclusive one would conflict with (`F_OFD_GETLK`: a pure
/// query, nothing is taken). `file` may be open read-only.
pub(crate) fn ofd_lock_held(file: &File) -> io::Result<bool> {
    let mut lock = whole_file(libc::F_WRLCK);
    // SAFETY: plain syscall on a valid open fd with a valid `flock`, which
    // the kernel fills in.
    let rc = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_GETLK, &mut lock) };
    if rc == 0 {
        Ok(i32::from(lock.l_type) != libc::F_UNLCK)
    } else {
        Err(io::Error::last_os_error())
    }
}

fn whole_file(typ: libc::c_int) -> libc::flock {
    libc::flock {
        l_type: typ as libc::c_short,
        l_whence: libc::SEEK_SET as libc::c_short,
        l_start: 0,
        l_len: 0,
        // Must be 0 for the OFD commands.
        l_pid: 0,
    }
}

/// What `wait4` says about a reaped child.
// Only `bench cli` (the binary's harness, through `agentlog::internals`)
// reaps children; its `unsafe` has to live here.
#[cfg(feature = "internals")]
#[derive(Debug, Clone, Copy)]
pub struct ChildUsage {
    pub status: i32,
    /// Peak RSS in bytes (`ru_maxrss`).
    pub peak_rss: u64,
    /// User plus system CPU time.
    pub cpu: std::time::Duration,
}

/// Reaps child `pid` (blocking, retrying on EINTR) and returns its wait
/// status, peak RSS and CPU time.
#[cfg(feature = "internals")]
pub fn wait_child(pid: u32) -> io::Result<ChildUsage> {
    let mut status: libc::c_int = 0;
    // SAFETY: `rusage` is plain integers and timevals, for which all-zero
    // bytes are a valid value.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: plain syscall; both pointers are to live locals of the
        // right types.
        let rc = unsafe { libc::wait4(pid as libc::pid_t, &mut status, 0, &mut usage) };
        if rc >= 0 {
            let tv = |t: libc::timeval| {
                std::time::Duration::from_secs(t.tv_sec.max(0) as u64)
                    + std::time::Duration::from_micros(t.tv_usec.max(0) as u64)
            };
            return Ok(ChildUsage {
                status,
                peak_rss: usage.ru_maxrss.max(0) as u64 * 1024,
                cpu: tv(usage.ru_utime) + tv(usage.ru_stime),
            });
        }
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
}

/// Has the child that `cmd` spawns SIGKILLed when the *thread* that spawns
/// it exits (`PR_SET_PDEATHSIG`), so a test or bench process killed with
/// SIGKILL, which runs no `Drop` guard, leaves no server behind. The
/// signal follows the spawning thread, not the process: spawn from a thread
/// that outlives the child's guard (a test's own thread, the binary's main
/// thread), never from a pool thread or a short-lived helper thread.
#[cfg(feature = "internals")]
pub fn die_with_spawning_thread(cmd: &mut std::process::Command) -> &mut std::process::Command {
    use std::os::unix::process::CommandExt;
    let parent = std::process::id() as libc::pid_t;
    // SAFETY: the closure runs in the forked child before `exec`, where
    // only async-signal-safe work is allowed: it makes two raw syscalls
    // (prctl, getppid) through rustix, allocates nothing (the error is a
    // bare errno) and takes no lock.
    unsafe {
        cmd.pre_exec(move || {
            rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))?;
            // The parent died between fork and prctl: no signal will come.
            if rustix::process::Pid::as_raw(rustix::process::getppid()) != parent {
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        })
    }
}

const FS_IOC_FIEMAP: libc::c_ulong = 0xC020_660B;
const FIEMAP_FLAG_SYNC: u32 = 1;
const FIEMAP_EXTENT_LAST: u32 = 1;
const FIEMAP_EXTENT_UNWRITTEN: u32 = 0x800;
/// Extents asked for per ioctl.
const FIEMAP_BATCH: usize = 64;
/// `struct fiemap` (without its trailing extents).
const FIEMAP_HDR: usize = 32;
/// `struct fiemap_extent`.
const FIEMAP_EXTENT: usize = 56;

/// The byte ranges of `[from, to)` of `file` whose blocks hold written data
/// (FIEMAP after a writeback of dirty pages, `FIEMAP_FLAG_SYNC`): what is
/// not listed is a hole or an unwritten preallocated extent, which read as
/// zeros. Fails where the filesystem has no FIEMAP; callers then read.
pub(crate) fn written_ranges(file: &File, from: u64, to: u64) -> io::Result<Vec<(u64, u64)>> {
    let mut out = Vec::new();
    let mut start = from;
    // u64 words keep the buffer aligned for the kernel's u64 fields.
    let mut buf = vec![0u64; (FIEMAP_HDR + FIEMAP_BATCH * FIEMAP_EXTENT) / 8];
    while start < to {
        buf.fill(0);
        buf[0] = start;
        buf[1] = to - start;
        let words = buf.as_mut_ptr();
        // SAFETY: `buf` is a live, 8-aligned `struct fiemap` followed by
        // room for `FIEMAP_BATCH` extents; the flags/count fields are the
        // u32 pair in word 2 and the count in the low half of word 3.
        let rc = unsafe {
            let hdr = words as *mut u32;
            *hdr.add(4) = FIEMAP_FLAG_SYNC;
            *hdr.add(6) = FIEMAP_BATCH as u32;
            libc::ioctl(file.as_raw_fd(), FS_IOC_FIEMAP, words)
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        let u32_at = |byte: usize| {
            let w = buf[byte / 8];
            if byte.is_multiple_of(8) {
                w as u32
            } else {
                (w >> 32) as u32
            }
        };
        let mapped = (u32_at(20) as usize).min(FIEMAP_BATCH);
        if mapped == 0 {
            break;
        }
        let mut last = false;
        for i in 0..mapped {
            let base = FIEMAP_HDR + i * FIEMAP_EXTENT;
            let logical = buf[base / 8];
            let length = buf[base / 8 + 2];
            let flags = u32_at(base + 40);
            let end = logical.saturating_add(length);
            if flags & FIEMAP_EXTENT_UNWRITTEN == 0 {
                out.push((logical.max(from), end.min(to)));
            }
            start = end;
            last |= flags & FIEMAP_EXTENT_LAST != 0;
        }
        if last {
            break;
        }
    }
    Ok(out)
}

#[cfg(all(test, feature = "internals"))]
mod tests {
    use std::os::unix::process::ExitStatusExt;
    use std::process::Command;

    #[test]
    fn a_child_is_killed_when_the_thread_that_spawned_it_exits() {
        let spawner = std::thread::spawn(|| {
            super::die_with_spawning_thread(Command::new("sleep").arg("60"))
                .spawn()
                .unwrap()
        });
        let mut child = spawner.join().unwrap();
        // Without the death signal this waits out the sleep and exits 0.
        let status = child.wait().unwrap();
        assert_eq!(status.signal(), Some(libc::SIGKILL), "{status}");
    }
}
