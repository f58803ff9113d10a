//! `agentlog post`: post a message from an agent to one agent or to all;
//! prints its id.

use crate::cli::args::At;
use crate::cli::open::with_store;
use crate::cli::output::{self, Ui, W};
use agentlog::model::{Priority, Privacy};
use agentlog::registry::PostMessage;
use anyhow::Result;
use clap::Args;
use serde_json::json;
use std::path::PathBuf;
use std::process::ExitCode;

/// Longest message TTL, in hours (100 years).
const MAX_TTL_HOURS: f64 = 876_000.0;

/// Parses a TTL in hours: at least one millisecond, at most [`MAX_TTL_HOURS`].
fn ttl_hours(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|e| format!("{e}"))?;
    let ms = v * 3_600_000.0;
    if v.is_finite() && ms >= 1.0 && v <= MAX_TTL_HOURS {
        Ok(v)
    } else {
        Err(format!(
            "must be at least 1 ms (0.000000278 hours) and at most {MAX_TTL_HOURS} hours (100 years)"
        ))
    }
}

#[derive(Debug, Args)]
pub struct Post {
    /// Sender
    #[arg(long, value_name = "NAME")]
    pub from: String,
    /// Recipient [default: broadcast to all]
    #[arg(long, value_name = "NAME")]
    pub to: Option<String>,
    #[arg(long, value_name = "C", default_value = "note")]
    pub category: String,
    /// Time to live in hours, 1 ms to 100 years [default: 12]
    #[arg(long, value_name = "H", value_parser = ttl_hours)]
    pub ttl_hours: Option<f64>,
    /// Idempotency key: the same request again returns the first message's id
    #[arg(long, value_name = "K")]
    pub request_id: Option<String>,
    #[arg(long, value_name = "P")]
    pub project_root: Option<String>,
    /// low, normal, high or critical
    #[arg(long, default_value = "normal")]
    pub priority: Priority,
    /// public, team or private
    #[arg(long, default_value = "team")]
    pub privacy: Privacy,
    /// The message body
    pub text: String,
    #[command(flatten)]
    pub at: At,
}

pub fn run(w: &mut W, ui: &Ui, dir: PathBuf, a: Post) -> Result<ExitCode> {
    let mut p = PostMessage::new(&a.from, a.to.as_deref(), &a.category, &a.text);
    p.priority = a.priority;
    p.privacy = a.privacy;
    p.project_root = a.project_root;
    p.request_id = a.request_id;
    // Bounded by the parser (1 ms to 100 years), so the product fits.
    p.ttl_ms = a.ttl_hours.map(|h| (h * 3_600_000.0) as i64);
    let at = a.at.checked()?;
    let id = with_store(&dir, |s| Ok(s.post_message(p, at)?))?;
    if ui.json {
        output::json(w, &json!({"id": id}))?;
    } else {
        writeln!(w, "{id}")?;
    }
    Ok(ExitCode::SUCCESS)
}
