//! The sweeper lease (docs/scaling.md §7): one key in a JetStream KV bucket
//! says which host sweeps. The same bucket holds the compaction lock
//! (docs/scaling.md §6), another key taken the same way for the length of
//! one compaction.
//!
//! A host takes the key with *create* (fails if it exists) and keeps it with
//! *update* at the revision it holds; the bucket's TTL expires the key of a
//! host that stopped renewing. A host whose update is refused (another
//! revision: its lease expired and someone else took it) has lost the lease
//! and stops acting until it takes the key again.

use super::{nats_err, ClusterResult};
use async_nats::jetstream::{self, kv};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a lease handle waits for its bucket to answer at open.
const READY_WITHIN: Duration = Duration::from_secs(10);

/// One host's handle on the fleet's sweeper lease.
pub struct SweepLease {
    kv: kv::Store,
    key: &'static str,
    host: String,
    /// Revision of the key this host wrote last, while it holds the lease.
    held: Mutex<Option<u64>>,
}

impl std::fmt::Debug for SweepLease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SweepLease")
            .field("host", &self.host)
            .finish()
    }
}

/// Which of the fleet's two leases a handle takes: each is a key of the
/// same bucket, taken and kept the same way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeaseKey {
    /// Who sweeps (docs/scaling.md §7).
    Sweeper,
    /// Who compacts the stream, for the length of one compaction
    /// (docs/scaling.md §6).
    Compactor,
}

impl LeaseKey {
    /// The key in the bucket.
    fn key(self) -> &'static str {
        match self {
            LeaseKey::Sweeper => "sweeper",
            LeaseKey::Compactor => "compactor",
        }
    }
}

impl SweepLease {
    /// Opens (creating if absent) the bucket `agentlog_<fleet>_lease` with
    /// `ttl` as its keys' lifetime, for the lease `which`.
    pub async fn open(
        js: &jetstream::Context,
        fleet: &str,
        host: &str,
        which: LeaseKey,
        ttl: Duration,
        replicas: usize,
    ) -> ClusterResult<SweepLease> {
        let key = which.key();
        let bucket = format!("agentlog_{fleet}_lease");
        let kv = match js.get_key_value(&bucket).await {
            Ok(kv) => kv,
            Err(_) => js
                .create_key_value(kv::Config {
                    bucket: bucket.clone(),
                    history: 1,
                    max_age: ttl,
                    num_replicas: replicas,
                    ..Default::default()
                })
                .await
                .map_err(|e| nats_err(format!("create kv bucket {bucket}"), e))?,
        };
        // A bucket just created, or whose stream is electing a leader,
        // answers "no responders" for a moment; the handle is given out
        // once its key can be read, so a first take is not refused by that.
        let ready_by = Instant::now() + READY_WITHIN;
        while let Err(e) = kv.entry(key).await {
            if Instant::now() >= ready_by {
                return Err(nats_err(format!("read lease key {key} of {bucket}"), e));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(SweepLease {
            kv,
            key,
            host: host.to_string(),
            held: Mutex::new(None),
        })
    }

    /// Takes the lease if free, or renews it if held; `false` when another
    /// host holds it (or took it after this host's lease expired).
    pub async fn acquire_or_renew(&self) -> ClusterResult<bool> {
        let held = *self.held.lock().unwrap_or_else(|e| e.into_inner());
        let value = self.host.clone().into_bytes().into();
        let revision = match held {
            Some(rev) => match self.kv.update(self.key, value, rev).await {
                Ok(rev) => Some(rev),
                Err(e) if e.kind() == kv::UpdateErrorKind::WrongLastRevision => None,
                Err(e) => return Err(nats_err(format!("renew lease of {}", self.host), e)),
            },
            None => match self.kv.create(self.key, value).await {
                Ok(rev) => Some(rev),
                // Held: by another host, or by this host through another
                // handle (the daemon's periodic sweeper and an explicit
                // `sweep`, or a daemon restarted before its key expired),
                // which this handle then renews. Two creates racing: the
                // loser gets "wrong last sequence" (10164) rather than
                // "already exists"; the key tells.
                Err(e) => match self.kv.entry(self.key).await {
                    Ok(Some(entry)) if entry.operation == kv::Operation::Put => {
                        if entry.value.as_ref() != self.host.as_bytes() {
                            None
                        } else {
                            let value = self.host.clone().into_bytes().into();
                            match self.kv.update(self.key, value, entry.revision).await {
                                Ok(rev) => Some(rev),
                                Err(e) if e.kind() == kv::UpdateErrorKind::WrongLastRevision => {
                                    None
                                }
                                Err(e) => {
                                    return Err(nats_err(
                                        format!("renew lease of {}", self.host),
                                        e,
                                    ))
                                }
                            }
                        }
                    }
                    _ if e.kind() == kv::CreateErrorKind::AlreadyExists => None,
                    _ => return Err(nats_err(format!("take lease for {}", self.host), e)),
                },
            },
        };
        *self.held.lock().unwrap_or_else(|e| e.into_inner()) = revision;
        Ok(revision.is_some())
    }

    /// Whether this host held the lease at its last take or renewal.
    pub fn held(&self) -> bool {
        self.held
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
    }

    /// The host holding the key now, as the bucket says (`None`: free).
    pub async fn holder(&self) -> ClusterResult<Option<String>> {
        match self.kv.entry(self.key).await {
            Ok(Some(e)) if e.operation == kv::Operation::Put => {
                Ok(Some(String::from_utf8_lossy(&e.value).into_owned()))
            }
            Ok(_) => Ok(None),
            Err(e) => Err(nats_err(format!("read lease key {}", self.key), e)),
        }
    }

    /// Gives the lease up (a clean shutdown), if held.
    pub async fn release(&self) -> ClusterResult<()> {
        let held = self.held.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(rev) = held {
            self.kv
                .delete_expect_revision(self.key, Some(rev))
                .await
                .map_err(|e| nats_err(format!("release lease of {}", self.host), e))?;
        }
        Ok(())
    }
}
