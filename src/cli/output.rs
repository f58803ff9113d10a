//! Output formatting: aligned text tables for people, one JSON document (or
//! JSON lines for streams) with `--json`, and progress bars that appear only
//! when stderr is a terminal and `--json` is off, so piped output and
//! machine-readable output stay clean.

use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use std::io::{self, IsTerminal, Write};

/// How this invocation prints.
#[derive(Debug, Clone, Copy)]
pub struct Ui {
    pub json: bool,
    /// No progress bars or spinners whatever stderr is (inside the daemon).
    pub quiet: bool,
}

impl Ui {
    /// A progress bar for `total` units of long work, or `None` when output is
    /// piped or `--json` is on.
    pub fn progress(&self, total: u64, what: &str) -> Option<ProgressBar> {
        if self.json || self.quiet || !io::stderr().is_terminal() {
            return None;
        }
        let pb = ProgressBar::new(total);
        let style = ProgressStyle::with_template("{msg:>10} [{bar:40}] {pos}/{len} ({eta})")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
        pb.set_style(style);
        pb.set_message(what.to_string());
        Some(pb)
    }
}

impl Ui {
    /// A spinner for long work of unknown length (same rules as `progress`).
    pub fn spinner(&self, what: &str) -> Option<ProgressBar> {
        if self.json || self.quiet || !io::stderr().is_terminal() {
            return None;
        }
        let pb = ProgressBar::new_spinner();
        pb.set_message(what.to_string());
        pb.enable_steady_tick(std::time::Duration::from_millis(100));
        Some(pb)
    }
}

/// Writes `value` as one pretty JSON document and a newline.
pub fn json<W: Write + ?Sized, T: Serialize + ?Sized>(w: &mut W, value: &T) -> io::Result<()> {
    serde_json::to_writer_pretty(&mut *w, value).map_err(io::Error::from)?;
    writeln!(w)
}

/// Writes `value` as one compact JSON line (for streams).
pub fn json_line<W: Write + ?Sized, T: Serialize + ?Sized>(w: &mut W, value: &T) -> io::Result<()> {
    serde_json::to_writer(&mut *w, value).map_err(io::Error::from)?;
    writeln!(w)
}

/// A left-aligned text table; the last column is not padded.
pub fn table<W: Write + ?Sized>(
    w: &mut W,
    headers: &[&str],
    rows: &[Vec<String>],
) -> io::Result<()> {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if let Some(wd) = widths.get_mut(i) {
                *wd = (*wd).max(cell.chars().count());
            }
        }
    }
    let line = |w: &mut W, cells: &mut dyn Iterator<Item = &str>| -> io::Result<()> {
        let mut s = String::new();
        for (i, cell) in cells.enumerate() {
            if i + 1 == widths.len() {
                s.push_str(cell);
            } else {
                s.push_str(cell);
                let pad = widths[i].saturating_sub(cell.chars().count()) + 2;
                s.push_str(&" ".repeat(pad));
            }
        }
        writeln!(w, "{}", s.trim_end())
    };
    line(w, &mut headers.iter().copied())?;
    for row in rows {
        line(w, &mut row.iter().map(String::as_str))?;
    }
    Ok(())
}

/// `-` for an absent value in a table cell.
pub fn or_dash<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(|| "-".to_string(), |v| v.to_string())
}

/// Cuts a cell to `max` characters (with `…`) so one long message does not
/// widen a whole table.
pub fn clip(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(max.saturating_sub(1)).collect();
        t.push('…');
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_aligns_columns() {
        let mut out = Vec::new();
        table(
            &mut out,
            &["NAME", "STATUS", "MESSAGE"],
            &[
                vec!["a".into(), "live".into(), "".into()],
                vec!["longer-name".into(), "exited".into(), "why".into()],
            ],
        )
        .unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text,
            "NAME         STATUS  MESSAGE\na            live\nlonger-name  exited  why\n"
        );
    }

    #[test]
    fn clip_marks_cut_text() {
        assert_eq!(clip("abcdef", 4), "abc…");
        assert_eq!(clip("abc", 4), "abc");
    }
}
