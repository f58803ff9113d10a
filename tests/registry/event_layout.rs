//! The agent events' bodies byte for byte, built from scratch by following
//! FORMAT.md's tag table (bincode 2 `standard()`: varints, zigzag `i64`,
//! `Option` as 0 / 1 + value), independently of the structs' declarations:
//! `Registration`, `Agent` and `FieldUpdates` come from the field lists in
//! `crates/core/src/model/fields.rs`, and a reordered list would change logs already
//! written. Every field is set, each to its own value, so a swap shows.

use agentlog::model::{Agent, HostMode, Status, StatusCause};
use agentlog::registry::codec::encode;
use agentlog::registry::{Event, EventKind, FieldUpdates, Registration, RegistrationKind};
use agentlog::time::Timestamp;

const AT: Timestamp = Timestamp(1_796_040_000_123);

fn varint(b: &mut Vec<u8>, v: u64) {
    match v {
        0..=250 => b.push(v as u8),
        251..=0xffff => {
            b.push(251);
            b.extend_from_slice(&(v as u16).to_le_bytes());
        }
        0x1_0000..=0xffff_ffff => {
            b.push(252);
            b.extend_from_slice(&(v as u32).to_le_bytes());
        }
        _ => {
            b.push(253);
            b.extend_from_slice(&v.to_le_bytes());
        }
    }
}
fn text(b: &mut Vec<u8>, s: &str) {
    varint(b, s.len() as u64);
    b.extend_from_slice(s.as_bytes());
}
fn some_text(b: &mut Vec<u8>, s: &str) {
    b.push(1);
    text(b, s);
}
fn time(b: &mut Vec<u8>, t: Timestamp) {
    let ms = t.as_millis();
    varint(b, ((ms << 1) ^ (ms >> 63)) as u64);
}
fn header(tag: u8) -> Vec<u8> {
    let mut b = vec![tag];
    b.extend_from_slice(&AT.as_millis().to_le_bytes());
    b
}

/// A registration with every field set, each to its own value.
fn full_registration(provider: &str) -> Registration {
    let mut r = Registration::new("a1", provider, "/w");
    r.role = Some("role".into());
    r.agent_type = Some("type".into());
    r.parent = Some("boss".into());
    r.durable_identity = Some("durable".into());
    r.pid = Some(4242);
    r.pid_start_time = Some(70_000);
    r.host_mode = Some(HostMode::Interactive);
    r.log_path = Some("log".into());
    r.claude_short_id = Some("cshort".into());
    r.codex_session_id = Some("codex".into());
    r.gemini_session_id = Some("gemini".into());
    r.claude_session_uuid = Some("uuid".into());
    r.mcp_channel_id = Some("mcp".into());
    r.short_id = "short".into();
    r.project_root = "/p".into();
    r.messaging_socket_path = Some("sock".into());
    r.cc_session_id = Some("cc".into());
    r
}

#[test]
fn agent_registered_body_is_the_documented_order() {
    for host in [None, Some("host-b")] {
        agent_registered_layout(host);
    }
}

/// Tag 1 without a host; tag 18 (a replica's registration) is tag 1's body
/// followed by the host id.
fn agent_registered_layout(host: Option<&str>) {
    let r = full_registration("claude");
    let event = Event {
        at: AT,
        kind: EventKind::AgentRegistered {
            reg: Box::new(r),
            kind: RegistrationKind::NewLife,
            host: host.map(str::to_string),
        },
    };
    let mut b = header(if host.is_some() { 18 } else { 1 });
    for s in ["a1", "claude", "/w"] {
        text(&mut b, s);
    }
    for s in ["role", "type", "boss", "durable"] {
        some_text(&mut b, s);
    }
    b.push(1);
    varint(&mut b, 4242);
    b.push(1);
    varint(&mut b, 70_000);
    b.extend_from_slice(&[1, 1]); // Some(interactive)
    for s in ["log", "cshort", "codex", "gemini", "uuid", "mcp"] {
        some_text(&mut b, s);
    }
    text(&mut b, "short");
    text(&mut b, "/p");
    some_text(&mut b, "sock");
    some_text(&mut b, "cc");
    b.push(2); // RegistrationKind::NewLife
    if let Some(h) = host {
        text(&mut b, h);
    }
    assert_eq!(encode(&event), b);
}

#[test]
fn fields_updated_body_is_the_documented_order() {
    let fields = FieldUpdates {
        claude_short_id: Some(Some("cshort".into())),
        codex_session_id: Some(Some("codex".into())),
        gemini_session_id: Some(Some("gemini".into())),
        claude_session_uuid: Some(Some("uuid".into())),
        cc_session_id: Some(Some("cc".into())),
        mcp_channel_id: Some(Some("mcp".into())),
        host_mode: Some(Some(HostMode::Exec)),
        last_message_at: Some(Some(Timestamp(5_000))),
        log_path: Some(None),
        pid: Some(Some(4242)),
        pid_start_time: Some(Some(70_000)),
        last_reconciled_at: Some(Some(Timestamp(-7))),
        messaging_socket_path: None,
    };
    let event = Event {
        at: AT,
        kind: EventKind::FieldsUpdated {
            agent: "a1".into(),
            fields,
        },
    };
    let mut b = header(4);
    text(&mut b, "a1");
    for s in ["cshort", "codex", "gemini", "uuid", "cc", "mcp"] {
        b.push(1);
        some_text(&mut b, s);
    }
    b.extend_from_slice(&[1, 1, 0]); // Some(Some(exec))
    b.extend_from_slice(&[1, 1]);
    time(&mut b, Timestamp(5_000));
    b.extend_from_slice(&[1, 0]); // log_path cleared
    b.extend_from_slice(&[1, 1]);
    varint(&mut b, 4242);
    b.extend_from_slice(&[1, 1]);
    varint(&mut b, 70_000);
    b.extend_from_slice(&[1, 1]);
    time(&mut b, Timestamp(-7));
    b.push(0); // messaging_socket_path unchanged
    assert_eq!(encode(&event), b);
}

#[test]
fn agent_imported_body_is_the_documented_order() {
    let mut a = Agent::new("a1", "codex", "/w", Timestamp(1_000));
    a.set_registered_fields(&full_registration("codex"));
    a.status = Status::Busy;
    a.status_message = Some("msg".into());
    a.status_cause = StatusCause::Import;
    a.registered_at = Timestamp(2_000);
    a.last_active = Timestamp(3_000);
    a.life = 3;
    a.last_message_at = Some(Timestamp(4_000));
    a.last_reconciled_at = Some(Timestamp(5_000));
    a.extra = vec![("spawned_by_cwd".into(), "\"/x\"".into())];
    // Registry-only fields are not part of the body.
    a.display_name = Some("Ann".into());
    a.last_event_lsn = 9;
    let event = Event {
        at: AT,
        kind: EventKind::AgentImported(Box::new(a)),
    };
    let mut b = header(11);
    for s in ["a1", "codex", "/w"] {
        text(&mut b, s);
    }
    for s in ["role", "type", "boss", "durable"] {
        some_text(&mut b, s);
    }
    b.push(3); // Status::Busy
    some_text(&mut b, "msg");
    b.push(3); // StatusCause::Import
    for t in [1_000, 2_000, 3_000] {
        time(&mut b, Timestamp(t));
    }
    b.push(3); // life
    b.push(1);
    varint(&mut b, 4242);
    b.push(1);
    varint(&mut b, 70_000);
    b.extend_from_slice(&[1, 1]);
    for s in ["log", "cshort", "codex", "gemini", "uuid", "mcp"] {
        some_text(&mut b, s);
    }
    b.push(1);
    time(&mut b, Timestamp(4_000));
    text(&mut b, "short");
    text(&mut b, "/p");
    some_text(&mut b, "sock");
    some_text(&mut b, "cc");
    b.push(1);
    time(&mut b, Timestamp(5_000));
    b.push(1); // one extra pair
    text(&mut b, "spawned_by_cwd");
    text(&mut b, "\"/x\"");
    assert_eq!(encode(&event), b);
}
