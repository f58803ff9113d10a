//! Line framing of the protocol: one JSON document per `\n`-terminated line,
//! read with a hard length limit so a client cannot make the daemon buffer
//! an unbounded line. A `\r` before the `\n` is dropped.

use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// What [`read_line`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame {
    /// A complete line is in the buffer (without its terminator).
    Line,
    /// The line exceeds the limit; the connection must be closed.
    TooLong,
    /// End of input (a last line without `\n` is returned as `Line` first).
    Eof,
}

/// Reads one line into `line` (cleared first), at most `max` bytes.
pub async fn read_line<R: AsyncBufRead + Unpin>(
    r: &mut R,
    line: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<Frame> {
    line.clear();
    loop {
        let chunk = r.fill_buf().await?;
        if chunk.is_empty() {
            return Ok(if line.is_empty() {
                Frame::Eof
            } else {
                trim_cr(line);
                Frame::Line
            });
        }
        let (used, done) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => {
                line.extend_from_slice(&chunk[..i]);
                (i + 1, true)
            }
            None => {
                line.extend_from_slice(chunk);
                (chunk.len(), false)
            }
        };
        r.consume(used);
        if line.len() > max {
            return Ok(Frame::TooLong);
        }
        if done {
            trim_cr(line);
            return Ok(Frame::Line);
        }
    }
}

fn trim_cr(line: &mut Vec<u8>) {
    if line.last() == Some(&b'\r') {
        line.pop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lines_limits_and_eof() {
        let data: &[u8] = b"{\"a\":1}\r\n\nxyz";
        let mut r = tokio::io::BufReader::with_capacity(4, data);
        let mut line = Vec::new();
        assert_eq!(
            read_line(&mut r, &mut line, 100).await.unwrap(),
            Frame::Line
        );
        assert_eq!(line, b"{\"a\":1}");
        assert_eq!(
            read_line(&mut r, &mut line, 100).await.unwrap(),
            Frame::Line
        );
        assert!(line.is_empty());
        assert_eq!(
            read_line(&mut r, &mut line, 100).await.unwrap(),
            Frame::Line
        );
        assert_eq!(line, b"xyz");
        assert_eq!(read_line(&mut r, &mut line, 100).await.unwrap(), Frame::Eof);
        let long: &[u8] = b"0123456789\n";
        let mut r = tokio::io::BufReader::with_capacity(4, long);
        assert_eq!(
            read_line(&mut r, &mut line, 5).await.unwrap(),
            Frame::TooLong
        );
    }
}
