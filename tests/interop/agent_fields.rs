//! The agent field table (`agentlog::model::fields`) reaches every place a
//! field goes: a registration copies each of its fields into the row, an
//! update changes each of its fields, and the schema-v4 export writes each
//! exported field where the import reads it back, byte for byte. A field
//! added to a struct but left out of one of these places fails here.

use agentlog::export::{render_v4, ExportOptions};
use agentlog::import::parse_registry;
use agentlog::model::fields::{field, FieldKind, FieldRef, FieldValue, V4Key, AGENT_FIELDS};
use agentlog::model::{Agent, HostMode};
use agentlog::registry::{FieldUpdates, Registration, State};
use agentlog::time::Timestamp;
use std::path::Path;

const T0: Timestamp = Timestamp(1_796_040_000_000);

/// A distinct, exportable value of `kind` for the `i`th field (whole
/// seconds: the export writes seconds).
fn value(i: usize, kind: FieldKind) -> FieldValue {
    match kind {
        FieldKind::Text | FieldKind::Str => FieldValue::Text(format!("value-{i}")),
        FieldKind::U32 => FieldValue::U32(4_000 + i as u32),
        FieldKind::U64 => FieldValue::U64(9_000_000 + i as u64),
        FieldKind::HostMode => FieldValue::HostMode(HostMode::Interactive),
        FieldKind::Time => FieldValue::Time(Timestamp(T0.as_millis() + 1_000 * i as i64)),
    }
}

fn owned(v: Option<FieldRef<'_>>) -> Option<FieldValue> {
    Some(match v? {
        FieldRef::Text(s) => FieldValue::Text(s.to_string()),
        FieldRef::U32(n) => FieldValue::U32(n),
        FieldRef::U64(n) => FieldValue::U64(n),
        FieldRef::HostMode(h) => FieldValue::HostMode(h),
        FieldRef::Time(t) => FieldValue::Time(t),
    })
}

#[test]
fn every_exported_field_survives_export_import_export() {
    let mut a = Agent::new("agent-1", "codex", "/w", T0);
    let exported: Vec<_> = AGENT_FIELDS
        .iter()
        .enumerate()
        .filter(|(_, f)| f.v4 != V4Key::None)
        .collect();
    // With `created_at` and `status`, the table's exported fields are every
    // schema-v4 key.
    assert_eq!(exported.len() + 2, agentlog::check::ROW_KEYS.len());
    for (i, f) in &exported {
        if !matches!(f.name, "name" | "provider") {
            f.set(&mut a, Some(value(*i, f.kind)));
        }
    }
    let (bytes, report) = render_v4([&a], &ExportOptions::default()).unwrap();
    assert_eq!(report.rows, 1);
    let doc: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    let row = doc["agents"][0].as_object().unwrap();
    assert_eq!(row.len(), agentlog::check::ROW_KEYS.len(), "{row:?}");
    for (_, f) in &exported {
        assert!(row.contains_key(f.name), "`{}` not exported", f.name);
    }
    let parsed = parse_registry(&bytes, Path::new("registry.json")).unwrap();
    let back = &parsed.rows[0].agent;
    for (_, f) in &exported {
        assert_eq!(f.get(back), f.get(&a), "`{}` not imported", f.name);
    }
    let (again, _) = render_v4([back], &ExportOptions::default()).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&again),
        String::from_utf8_lossy(&bytes)
    );
}

/// A registry holding the agent `name`, registered at LSN 1.
fn registered(name: &str) -> State {
    let mut s = State::default();
    let event = s
        .check_register(Registration::new(name, "claude", "/"), T0)
        .unwrap();
    s.apply(1, &event);
    s
}

#[test]
fn a_registration_sets_every_registration_field_in_the_row() {
    let mut s = registered("boss");
    let mut reg = Registration::new("agent-1", "claude", "/w");
    let mut set = Vec::new();
    for (i, f) in AGENT_FIELDS.iter().enumerate() {
        let v = match f.name {
            "name" => continue,
            "parent" => FieldValue::Text("boss".into()),
            _ => value(i, f.kind),
        };
        if f.set_in_registration(&mut reg, Some(v.clone())) {
            set.push((f, v));
        }
    }
    // Every field but the two times only a row has.
    assert_eq!(set.len(), AGENT_FIELDS.len() - 3);
    let event = s.check_register(reg, T0).unwrap();
    s.apply(2, &event);
    let row = s.agent("agent-1").unwrap();
    for (f, v) in set {
        assert_eq!(owned(f.get(row)), Some(v), "`{}` not registered", f.name);
    }
}

#[test]
fn an_update_changes_each_of_its_fields_in_the_row() {
    let mut s = registered("agent-1");
    for (i, u) in FieldUpdates::FIELDS.iter().enumerate() {
        let v = value(i, u.kind);
        let mut updates = FieldUpdates::default();
        u.set(&mut updates, Some(v.clone()));
        assert!(u.is_set(&updates), "{}", u.name);
        let event = s.check_update("agent-1", updates, T0).unwrap();
        s.apply(2 + i as u64, &event);
        let row = s.agent("agent-1").unwrap();
        let f = field(u.name).unwrap();
        assert_eq!(owned(f.get(row)), Some(v), "`{}` not updated", u.name);
        // `Some(None)` clears it again.
        let mut clear = FieldUpdates::default();
        u.set(&mut clear, None);
        let event = s.check_update("agent-1", clear, T0).unwrap();
        s.apply(100 + i as u64, &event);
        assert_eq!(f.get(s.agent("agent-1").unwrap()), None, "{}", u.name);
    }
}
