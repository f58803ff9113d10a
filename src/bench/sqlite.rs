//! The SQLite baseline (cargo feature `sqlite-baseline`, on by default): a
//! table of agents in WAL mode, one connection per client, one prepared
//! `UPDATE agents SET last_active = ? WHERE name = ?` per heartbeat, with
//! `synchronous=NORMAL` (lazy) or `FULL` (durable). What a registry on
//! SQLite pays per heartbeat; used by `bench clients --compare` and the
//! `sqlite_baseline` criterion bench.

use super::baseline::agent_name;
use super::{BenchError, Result};
use agentlog::time::Timestamp;
use rusqlite::{params, Connection};
use std::path::Path;
use std::time::Duration;

/// The heartbeat statement.
pub const UPDATE: &str = "UPDATE agents SET last_active = ?1 WHERE name = ?2";

fn failed(path: &Path, what: &str, e: rusqlite::Error) -> BenchError {
    BenchError::Format {
        path: path.to_path_buf(),
        message: format!("sqlite {what}: {e}"),
    }
}

/// Opens a connection in WAL mode with `synchronous` (`NORMAL` or `FULL`)
/// and a long busy timeout, so contention waits instead of failing.
pub fn open(path: &Path, durable: bool) -> Result<Connection> {
    let c = Connection::open(path).map_err(|e| failed(path, "open", e))?;
    c.busy_timeout(Duration::from_secs(30))
        .map_err(|e| failed(path, "busy_timeout", e))?;
    let mode: String = c
        .query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))
        .map_err(|e| failed(path, "journal_mode=WAL", e))?;
    if mode != "wal" {
        return Err(BenchError::Format {
            path: path.to_path_buf(),
            message: format!("sqlite refused WAL mode (journal_mode is {mode})"),
        });
    }
    let sync = if durable { "FULL" } else { "NORMAL" };
    c.execute_batch(&format!("PRAGMA synchronous={sync};"))
        .map_err(|e| failed(path, "synchronous", e))?;
    Ok(c)
}

/// Creates the database at `path` with `agents` rows named by
/// [`agent_name`].
pub fn create(path: &Path, agents: usize) -> Result<()> {
    let mut c = open(path, false)?;
    c.execute_batch(
        "CREATE TABLE agents (name TEXT PRIMARY KEY, provider TEXT NOT NULL, cwd TEXT NOT NULL,
         status TEXT NOT NULL, pid INTEGER, last_active INTEGER NOT NULL);",
    )
    .map_err(|e| failed(path, "create table", e))?;
    let tx = c.transaction().map_err(|e| failed(path, "begin", e))?;
    {
        let mut ins = tx
            .prepare("INSERT INTO agents VALUES (?1, 'claude', '/home/dev/proj', 'live', ?2, ?3)")
            .map_err(|e| failed(path, "prepare insert", e))?;
        let now = Timestamp::now().as_millis();
        for i in 0..agents {
            ins.execute(params![agent_name(i), 10_000 + i as i64, now])
                .map_err(|e| failed(path, "insert", e))?;
        }
    }
    tx.commit().map_err(|e| failed(path, "commit", e))
}

/// One heartbeat of `name` on `c` (its cached prepared statement); a row
/// count other than one is an error.
pub fn heartbeat(c: &Connection, name: &str) -> rusqlite::Result<()> {
    let mut stmt = c.prepare_cached(UPDATE)?;
    match stmt.execute(params![Timestamp::now().as_millis(), name])? {
        1 => Ok(()),
        n => Err(rusqlite::Error::StatementChangedRows(n)),
    }
}
