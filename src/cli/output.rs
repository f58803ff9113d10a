//! Output formatting shared by the commands: aligned text tables for
//! people, one JSON document (or JSON lines for streams) with `--json`,
//! progress bars (and the [`Bar`] that draws the library's progress) that
//! appear only when stderr is a terminal and `--json` is off, so piped and
//! machine-readable output stay clean, and the `agentlog: ...` lines of an
//! outcome reported by exit code (kept for the daemon's reply when it runs
//! the command).
//!
//! Every text a person reads goes through [`escaped`] (table cells do so
//! here), so data from the log (a status message, a message body, an imported
//! `cwd`) can never drive the terminal: no escape sequences, no bells, no
//! fake rows, no reordered text. `--json` output is exact: JSON escapes itself.

use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use std::borrow::Cow;
use std::fmt::Write as _;
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

/// Whether a person's terminal would act on `c` instead of showing it: C0
/// and C1 controls, DEL, and the bidirectional formatting characters (which
/// reorder what follows, e.g. U+202E RIGHT-TO-LEFT OVERRIDE).
fn is_unsafe_char(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200e}' | '\u{200f}' | '\u{061c}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `s` for a terminal: `\n`, `\r`, `\t` spelled out and every other unsafe
/// character as `\u{XX}`. Borrows when there is nothing to escape.
pub fn escaped(s: &str) -> Cow<'_, str> {
    if !s.chars().any(is_unsafe_char) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if is_unsafe_char(c) => {
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// A left-aligned text table; the last column is not padded. Cells are
/// [`escaped`].
pub fn table<W: Write + ?Sized>(
    w: &mut W,
    headers: &[&str],
    rows: &[Vec<String>],
) -> io::Result<()> {
    let mut widths = Widths::of(headers);
    for r in rows {
        widths.measure(r);
    }
    widths.print(w, headers)?;
    for r in rows {
        widths.print(w, r)?;
    }
    Ok(())
}

/// The column widths of a [`table`], grown one row at a time, so a caller
/// can size a table it never holds whole (an agent's long audit: one pass to
/// measure, one to print) and print it row by row.
pub struct Widths {
    widths: Vec<usize>,
    line: String,
}

impl Widths {
    /// Widths that fit `headers`.
    pub fn of<S: AsRef<str>>(headers: &[S]) -> Widths {
        let mut w = Widths {
            widths: Vec::with_capacity(headers.len()),
            line: String::new(),
        };
        w.measure(headers);
        w
    }

    /// Widens the columns to fit `cells` (as [`escaped`] shows them).
    pub fn measure<S: AsRef<str>>(&mut self, cells: &[S]) {
        if self.widths.len() < cells.len() {
            self.widths.resize(cells.len(), 0);
        }
        for (wd, cell) in self.widths.iter_mut().zip(cells) {
            *wd = (*wd).max(escaped(cell.as_ref()).chars().count());
        }
    }

    /// Prints `cells` as one row, each but the last padded to its column.
    pub fn print<W: Write + ?Sized, S: AsRef<str>>(
        &mut self,
        w: &mut W,
        cells: &[S],
    ) -> io::Result<()> {
        self.line.clear();
        for (i, cell) in cells.iter().enumerate() {
            let cell = escaped(cell.as_ref());
            self.line.push_str(&cell);
            if i + 1 < cells.len() {
                let width = self.widths.get(i).copied().unwrap_or(0);
                let pad = width.saturating_sub(cell.chars().count()) + 2;
                self.line.extend(std::iter::repeat_n(' ', pad));
            }
        }
        writeln!(w, "{}", self.line.trim_end())
    }
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

/// Standard output that remembers its first write failure and, for commands
/// that commit, a copy of what they printed: when stdout fails (`/dev/full`,
/// a full disk behind a redirect) after a commit, the caller still learns
/// exactly what was committed (on stderr) instead of a bare error that would
/// invite a duplicating retry.
pub struct Out<'a> {
    inner: io::StdoutLock<'a>,
    failure: Option<io::Error>,
    transcript: Option<Vec<u8>>,
}

impl<'a> Out<'a> {
    /// Wraps `inner`; `keep_transcript` keeps a copy of everything written.
    pub fn new(inner: io::StdoutLock<'a>, keep_transcript: bool) -> Self {
        Out {
            inner,
            failure: None,
            transcript: keep_transcript.then(Vec::new),
        }
    }

    /// The first write or flush failure, if any.
    pub fn failure(&self) -> Option<&io::Error> {
        self.failure.as_ref()
    }

    /// What was written (when kept), whether or not it reached stdout.
    pub fn transcript(&self) -> &[u8] {
        self.transcript.as_deref().unwrap_or_default()
    }

    fn record<T>(&mut self, r: io::Result<T>) -> io::Result<T> {
        if let Err(e) = &r {
            if self.failure.is_none() {
                self.failure = Some(io::Error::new(e.kind(), e.to_string()));
            }
        }
        r
    }
}

impl Write for Out<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if let Some(t) = &mut self.transcript {
            t.extend_from_slice(buf);
            // A committing command finishes its report into the transcript;
            // the runner shows it on stderr and names the failure.
            if self.failure.is_none() {
                let r = self.inner.write_all(buf);
                let _ = self.record(r);
            }
            return Ok(buf.len());
        }
        if let Some(e) = &self.failure {
            return Err(io::Error::new(e.kind(), e.to_string()));
        }
        let r = self.inner.write_all(buf).map(|()| buf.len());
        self.record(r)
    }

    fn flush(&mut self) -> io::Result<()> {
        if self.failure.is_none() {
            let r = self.inner.flush();
            let _ = self.record(r);
        }
        match (&self.failure, &self.transcript) {
            (Some(e), None) => Err(io::Error::new(e.kind(), e.to_string())),
            _ => Ok(()),
        }
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
    fn escapes_what_a_terminal_acts_on() {
        assert!(matches!(escaped("plain ünï ☃"), Cow::Borrowed(_)));
        assert_eq!(
            escaped("a\u{1b}]0;t\u{7}b\nc\td\u{9b}e\u{202e}f\u{7f}"),
            "a\\u{1b}]0;t\\u{7}b\\nc\\td\\u{9b}e\\u{202e}f\\u{7f}"
        );
        let mut out = Vec::new();
        table(
            &mut out,
            &["A", "B"],
            &[vec!["x\ny".into(), "\u{1b}[2J".into()]],
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "A     B\nx\\ny  \\u{1b}[2J\n"
        );
    }

    #[test]
    fn clip_marks_cut_text() {
        assert_eq!(clip("abcdef", 4), "abc…");
        assert_eq!(clip("abc", 4), "abc");
    }
}

/// Where a command prints: stdout, or a daemon's reply buffer.
pub type W<'a> = dyn Write + 'a;

/// Draws library progress on an indicatif bar (when the UI allows one).
pub struct Bar(Option<ProgressBar>);

impl Bar {
    pub fn new(ui: &Ui, what: &str) -> Bar {
        Bar(ui.progress(0, what))
    }
}

impl crate::ops::Progress for Bar {
    fn start(&mut self, total: u64) {
        if let Some(b) = &self.0 {
            b.set_length(total);
        }
    }
    fn advance(&mut self, pos: u64) {
        if let Some(b) = &self.0 {
            b.set_position(pos);
        }
    }
    fn finish(&mut self) {
        if let Some(b) = self.0.take() {
            b.finish_and_clear();
        }
    }
}

thread_local! {
    /// Error lines of a command run inside the daemon, for its reply.
    static ERROR_LINES: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// Prints `agentlog: <msg>` on stderr (the client's, when run by a daemon)
/// for an outcome reported with an exit code rather than an error.
pub fn error_line(msg: &str) {
    let line = format!("agentlog: {msg}\n");
    let kept = ERROR_LINES.with(|e| match e.borrow_mut().as_mut() {
        Some(buf) => {
            buf.push_str(&line);
            true
        }
        None => false,
    });
    if !kept {
        eprint!("{line}");
    }
}

/// Runs `f` collecting what [`error_line`] prints; returns both.
pub fn capturing_errors<R>(f: impl FnOnce() -> R) -> (R, String) {
    ERROR_LINES.with(|e| *e.borrow_mut() = Some(String::new()));
    let r = f();
    let lines = ERROR_LINES
        .with(|e| e.borrow_mut().take())
        .unwrap_or_default();
    (r, lines)
}

/// `n` bytes for people: B, KiB, MiB or GiB with one decimal.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// `lsn N`, or `lsn unknown` where damage hides it.
pub fn lsn_or_unknown(lsn: Option<u64>) -> String {
    lsn.map_or_else(|| "lsn unknown".to_string(), |l| format!("lsn {l}"))
}
