//! The threads that read the log for watchers: a fixed pool of
//! [`READERS`], shared by every watch (socket and SSE) in the process, so
//! the daemon's thread count does not grow with its watchers. Tokio's
//! blocking pool would start a thread for each watcher woken by a commit
//! (up to 512, each kept 10 s): the soak saw 314 daemon threads.
//!
//! Each job is one producer step (a chunk of at most `CHUNK` records, or a
//! watch's start) and each producer awaits its job before queuing the
//! next, so the queue holds at most one job per open watch (capped by
//! `max_watchers`). A job whose watch went away meanwhile is skipped
//! unrun. Jobs run in the order queued, so a watcher far behind takes its
//! turn chunk by chunk and live watchers are not starved by it.

use std::panic::AssertUnwindSafe;
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};

/// Reader threads. The machine's log reads are short (one chunk) and
/// memory-bound; a few threads keep one slow refold from stalling every
/// other watcher.
pub const READERS: usize = 4;

type Job = Box<dyn FnOnce() + Send>;

fn queue() -> &'static mpsc::Sender<Job> {
    static QUEUE: OnceLock<mpsc::Sender<Job>> = OnceLock::new();
    QUEUE.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Job>();
        let rx = std::sync::Arc::new(Mutex::new(rx));
        for i in 0..READERS {
            let rx = rx.clone();
            std::thread::Builder::new()
                .name(format!("watch-reader-{i}"))
                .spawn(move || loop {
                    let job = rx.lock().unwrap_or_else(|e| e.into_inner()).recv();
                    let Ok(job) = job else { return };
                    // A panicking job drops its reply (its watch ends, as
                    // a failed `spawn_blocking` ended it); the thread stays.
                    let _ = std::panic::catch_unwind(AssertUnwindSafe(job));
                })
                .expect("spawning a watch reader thread");
        }
        tx
    })
}

/// Runs `f` on a reader thread and returns its result; `None` if it
/// panicked.
pub async fn run<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let job: Job = Box::new(move || {
        if !tx.is_closed() {
            let _ = tx.send(f());
        }
    });
    // The receivers live as long as the process: a send cannot fail.
    let _ = queue().send(job);
    rx.await.ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn many_jobs_run_on_the_few_readers_and_a_panic_costs_no_thread() {
        let jobs: Vec<_> = (0..200u32)
            .map(|i| {
                tokio::spawn(run(move || {
                    std::thread::sleep(std::time::Duration::from_micros(200));
                    (i, std::thread::current().name().map(str::to_string))
                }))
            })
            .collect();
        let mut names = std::collections::BTreeSet::new();
        for (i, j) in jobs.into_iter().enumerate() {
            let (k, name) = j.await.unwrap().unwrap();
            assert_eq!(k as usize, i);
            names.insert(name.unwrap());
        }
        assert!(names.len() <= READERS, "{names:?}");
        assert!(names.iter().all(|n| n.starts_with("watch-reader-")));
        for _ in 0..READERS + 1 {
            assert_eq!(run(|| -> u8 { panic!("a failing step") }).await, None);
        }
        assert_eq!(run(|| 7).await, Some(7));
    }
}
