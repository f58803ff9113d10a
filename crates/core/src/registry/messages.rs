//! Message commands: post (limits, defaults, request-id idempotency), the
//! unread rule, read (with a receipt event) and mark read.
//!
//! Unread for reader R at `now`: not sent by R, not yet read by R, addressed
//! to R or broadcast, not expired at `now`, in R's project when a project
//! root is given (trailing slashes ignored), and — for broadcasts — posted no
//! earlier than 10 minutes before R's current life began (`created_at`, as
//! the seed's `started_at`; a renewal does not move the floor).

use super::error::{check_text, RegistryError};
use super::events::{Event, EventKind, Lsn, PostedMessage};
use super::state::{Message, State};
use crate::model::{Priority, Privacy};
use crate::time::Timestamp;

/// Largest message body: 64 KiB.
pub const BODY_MAX: usize = 64 * 1024;
/// Longest category and request id.
pub const CATEGORY_MAX: usize = 256;
pub const REQUEST_ID_MAX: usize = 256;
/// Default message time to live: 12 hours.
pub const DEFAULT_TTL_MS: i64 = 12 * 3600 * 1000;
/// Broadcasts older than this before the reader's registration are not
/// shown to it.
pub const BROADCAST_GRACE_MS: i64 = 10 * 60 * 1000;

/// A post command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostMessage {
    pub from: String,
    /// `None` = broadcast.
    pub to: Option<String>,
    pub category: String,
    pub body: String,
    pub priority: Priority,
    pub privacy: Privacy,
    pub project_root: Option<String>,
    /// Default [`DEFAULT_TTL_MS`].
    pub ttl_ms: Option<i64>,
    pub request_id: Option<String>,
}

impl PostMessage {
    pub fn new(from: &str, to: Option<&str>, category: &str, body: &str) -> Self {
        PostMessage {
            from: from.to_string(),
            to: to.map(str::to_string),
            category: category.to_string(),
            body: body.to_string(),
            priority: Priority::default(),
            privacy: Privacy::default(),
            project_root: None,
            ttl_ms: None,
            request_id: None,
        }
    }
}

/// What a valid post does (a short-lived return value: no need to box).
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PostOutcome {
    /// Append this event; the message id will be its LSN.
    Append(Event),
    /// Same request id and content as a live message: its id, append nothing.
    Existing(Lsn),
}

/// FNV-1a 64 over the length-prefixed content fields: stable across builds
/// (it is stored in the log), enough to tell a retry from a different post.
pub fn content_digest(
    to: Option<&str>,
    category: &str,
    body: &str,
    priority: Priority,
    privacy: Privacy,
    ttl_ms: i64,
) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for &b in (bytes.len() as u64).to_le_bytes().iter().chain(bytes) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    };
    match to {
        Some(t) => {
            eat(&[1]);
            eat(t.as_bytes());
        }
        None => eat(&[0]),
    }
    eat(category.as_bytes());
    eat(body.as_bytes());
    eat(priority.as_str().as_bytes());
    eat(privacy.as_str().as_bytes());
    eat(&ttl_ms.to_le_bytes());
    h
}

/// Same project, ignoring trailing slashes.
pub fn same_project(a: &str, b: &str) -> bool {
    fn trim(s: &str) -> &str {
        let t = s.trim_end_matches('/');
        if t.is_empty() && !s.is_empty() {
            "/"
        } else {
            t
        }
    }
    trim(a) == trim(b)
}

impl State {
    /// Validates a post at time `at`.
    pub fn check_post(
        &self,
        post: PostMessage,
        at: Timestamp,
    ) -> Result<PostOutcome, RegistryError> {
        self.existing(&post.from)?;
        if let Some(to) = &post.to {
            self.existing(to)?;
        }
        check_text("category", &post.category, CATEGORY_MAX)?;
        if post.body.is_empty() {
            return Err(RegistryError::Empty {
                field: "message body",
            });
        }
        if post.body.len() > BODY_MAX {
            return Err(RegistryError::TooLong {
                field: "message body",
                len: post.body.len(),
                max: BODY_MAX,
            });
        }
        let ttl = post.ttl_ms.unwrap_or(DEFAULT_TTL_MS);
        if ttl <= 0 {
            return Err(RegistryError::NotPositive {
                field: "message ttl",
                value: ttl,
            });
        }
        let project_root = post.project_root.filter(|p| !p.is_empty());
        let digest = content_digest(
            post.to.as_deref(),
            &post.category,
            &post.body,
            post.priority,
            post.privacy,
            ttl,
        );
        if let Some(rid) = &post.request_id {
            check_text("request id", rid, REQUEST_ID_MAX)?;
            let key = (post.from.clone(), project_root.clone(), rid.clone());
            if let Some(m) = self
                .requests
                .get(&key)
                .and_then(|&id| self.message(id))
                .filter(|m| !m.is_expired(at))
            {
                return if m.posted.digest == digest {
                    Ok(PostOutcome::Existing(m.id))
                } else {
                    Err(RegistryError::RequestIdConflict {
                        agent: post.from,
                        request_id: rid.clone(),
                    })
                };
            }
        }
        Ok(PostOutcome::Append(Event {
            at,
            kind: EventKind::MessagePosted(PostedMessage {
                from: post.from,
                to: post.to,
                category: post.category,
                body: post.body,
                priority: post.priority,
                privacy: post.privacy,
                project_root,
                expires_at: at.add_millis(ttl),
                request_id: post.request_id,
                digest,
            }),
        }))
    }

    /// Upstream's `last_message_at` stamp for a direct post (docs/upstream.md,
    /// "last_message_at"): on the addressed agent's row, when a message to it
    /// was last delivered (here: logged). Its own event, in the post's batch
    /// and before it, so the stamp outlives the message when compaction
    /// drops the post. Broadcasts address no one; a stamp never goes back.
    pub fn delivery_stamp(&self, post: &Event) -> Option<Event> {
        let EventKind::MessagePosted(m) = &post.kind else {
            return None;
        };
        let to = m.to.as_deref()?;
        let row = self.agent(to)?;
        if row.last_message_at.is_some_and(|t| t >= post.at) {
            return None;
        }
        let fields = crate::registry::FieldUpdates {
            last_message_at: Some(Some(post.at)),
            ..Default::default()
        };
        Some(Event {
            at: post.at,
            kind: EventKind::FieldsUpdated {
                agent: to.to_string(),
                fields,
            },
        })
    }

    /// The unread messages of `reader` at `now` (see the module rule).
    pub fn unread(
        &self,
        reader: &str,
        project_root: Option<&str>,
        now: Timestamp,
    ) -> Result<Vec<&Message>, RegistryError> {
        let floor = self
            .existing(reader)?
            .created_at
            .add_millis(-BROADCAST_GRACE_MS);
        Ok(self
            .messages
            .iter()
            .filter(|m| {
                !m.is_read_by(reader)
                    && match &m.posted.to {
                        Some(to) => to == reader,
                        None => m.posted_at >= floor,
                    }
                    && project_root.is_none_or(|root| {
                        m.posted
                            .project_root
                            .as_deref()
                            .is_some_and(|own| same_project(own, root))
                    })
                    && !m.is_expired(now)
            })
            .collect())
    }

    /// Unread messages plus the read-receipt event to append (none when
    /// nothing is unread).
    pub fn check_read(
        &self,
        reader: &str,
        project_root: Option<&str>,
        now: Timestamp,
    ) -> Result<(Vec<Message>, Option<Event>), RegistryError> {
        let unread: Vec<Message> = self
            .unread(reader, project_root, now)?
            .into_iter()
            .cloned()
            .collect();
        let event = (!unread.is_empty()).then(|| Event {
            at: now,
            kind: EventKind::MessagesRead {
                reader: reader.to_string(),
                ids: unread.iter().map(|m| m.id).collect(),
            },
        });
        Ok((unread, event))
    }

    /// Marks the given live messages read by `reader`; ids that are gone or
    /// already read are skipped. Returns the receipt to append, if any.
    pub fn check_mark_read(
        &self,
        reader: &str,
        ids: &[Lsn],
        at: Timestamp,
    ) -> Result<Option<Event>, RegistryError> {
        self.existing(reader)?;
        let mut fresh: Vec<Lsn> = ids
            .iter()
            .copied()
            .filter(|&id| self.message(id).is_some_and(|m| !m.is_read_by(reader)))
            .collect();
        fresh.sort_unstable();
        fresh.dedup();
        Ok((!fresh.is_empty()).then(|| Event {
            at,
            kind: EventKind::MessagesRead {
                reader: reader.to_string(),
                ids: fresh,
            },
        }))
    }
}
