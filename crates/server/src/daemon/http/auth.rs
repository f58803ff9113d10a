//! Who an HTTP caller is. TCP carries no peer credentials, so the daemon
//! knows a caller only by a secret: the token in `<store>/http.token`
//! (64 hex digits, mode 0600, owned by the daemon's uid), which only the
//! store's owner (and root) can read. A request that shows it, as
//! `Authorization: Bearer TOKEN` or `?token=TOKEN` (the page's event
//! streams: an `EventSource` sends no headers), is the owner's; any other
//! request is anonymous.
//!
//! Invariants:
//! - An anonymous caller gets only the public paths ([`is_public`]): the
//!   page's static files, `/healthz`, `/readyz`, `/metrics` (aggregate
//!   counts) and `/api/heartbeats` (a rate). Nothing of the registry (names,
//!   rows, statuses, audit trails, message bodies, the event stream) reaches
//!   a caller the daemon cannot name: everything else is 401.
//! - Every request, public or not, must name this server in `Host`: an IP
//!   literal, `localhost`, or a name given with `serve --http-host`. A page
//!   on another site that rebinds its DNS name to this address sends its
//!   own name, and gets 421.
//! - The token is compared in constant time and never logged or printed.

use super::super::{ServeError, ServeResult};
use agentlog_core::support::publish_atomic;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The token file's name in the store directory.
pub const TOKEN_FILE: &str = "http.token";
const TOKEN_HEX: usize = 64;

/// The token file of the store in `dir`.
pub fn token_path(dir: &Path) -> PathBuf {
    dir.join(TOKEN_FILE)
}

/// The paths an anonymous caller may GET.
pub fn is_public(path: &str) -> bool {
    matches!(
        path,
        "/" | "/page.js" | "/page.css" | "/healthz" | "/readyz" | "/metrics" | "/api/heartbeats"
    )
}

/// The store's HTTP token: the one in the token file if it is ours (a
/// regular file owned by this uid, mode 0600, 64 hex digits), else a fresh
/// one written there atomically (a file someone else could have read or
/// planted is never trusted).
pub fn load_or_create(dir: &Path) -> ServeResult<String> {
    let path = token_path(dir);
    let me = rustix::process::geteuid().as_raw();
    if let Ok(m) = std::fs::symlink_metadata(&path) {
        let ours = m.is_file() && m.uid() == me && m.permissions().mode() & 0o777 == 0o600;
        if ours {
            if let Ok(text) = std::fs::read_to_string(&path) {
                let token = text.trim();
                if token.len() == TOKEN_HEX && token.bytes().all(|b| b.is_ascii_hexdigit()) {
                    return Ok(token.to_ascii_lowercase());
                }
            }
        }
        tracing::warn!(
            "{} is not a private token of this uid (mode, owner or content): replacing it",
            path.display()
        );
    }
    let token = fresh_token().map_err(ServeError::file("reading /dev/urandom for", &path))?;
    publish_atomic(&path, format!("{token}\n").as_bytes(), 0o600, || Ok(()))
        .map_err(|e| ServeError::file("writing", &path)(e.into_io()))?;
    // `publish_atomic` applies the umask; the file must be exactly 0600.
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
        .map_err(ServeError::file("setting the mode of", &path))?;
    Ok(token)
}

fn fresh_token() -> std::io::Result<String> {
    let mut bytes = [0u8; TOKEN_HEX / 2];
    std::io::Read::read_exact(&mut std::fs::File::open("/dev/urandom")?, &mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Whether `given` is `token`, in time independent of where they differ.
pub fn same_token(given: &[u8], token: &[u8]) -> bool {
    given.len() == token.len() && given.iter().zip(token).fold(0u8, |d, (a, b)| d | (a ^ b)) == 0
}

/// The token a request shows: `Authorization: Bearer T`, else `token=T` in
/// the query.
pub fn shown_token<'a>(
    authorization: Option<&'a [u8]>,
    query: Option<&'a str>,
) -> Option<&'a [u8]> {
    if let Some(a) = authorization {
        let a = std::str::from_utf8(a).ok()?;
        let (scheme, rest) = a.split_once(' ')?;
        return scheme
            .eq_ignore_ascii_case("bearer")
            .then(|| rest.trim().as_bytes());
    }
    query?
        .split('&')
        .find_map(|kv| kv.strip_prefix("token="))
        .map(str::as_bytes)
}

/// Whether `host` (a `Host` header's value) names this server: an IP
/// literal or `localhost`, with or without a port, or one of `allowed`.
pub fn host_allowed(host: &str, allowed: &[String]) -> bool {
    let name = match host.strip_prefix('[') {
        // `[v6]` or `[v6]:port`
        Some(rest) => match rest.split_once(']') {
            Some((v6, port))
                if port.is_empty() || port.strip_prefix(':').is_some_and(valid_port) =>
            {
                return v6.parse::<std::net::Ipv6Addr>().is_ok();
            }
            _ => return false,
        },
        None => match host.rsplit_once(':') {
            Some((name, port)) if valid_port(port) => name,
            Some(_) => return false,
            None => host,
        },
    };
    name.parse::<std::net::Ipv4Addr>().is_ok()
        || name.eq_ignore_ascii_case("localhost")
        || allowed.iter().any(|a| a.eq_ignore_ascii_case(name))
}

fn valid_port(p: &str) -> bool {
    !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) && p.parse::<u16>().is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_are_ip_literals_localhost_or_named() {
        let named = vec!["agents.example".to_string()];
        for ok in [
            "127.0.0.1",
            "127.0.0.1:9464",
            "10.1.2.3:80",
            "[::1]:9464",
            "[::1]",
            "localhost",
            "LOCALHOST:80",
            "agents.example:9464",
        ] {
            assert!(host_allowed(ok, &named), "{ok}");
        }
        for bad in [
            "attacker.example",
            "attacker.example:9464",
            "127.0.0.1.attacker.example",
            "localhost.attacker.example",
            "[::1",
            "[nope]:1",
            "[::1]9464",
            "127.0.0.1:notaport",
            "127.0.0.1:99999",
            "",
        ] {
            assert!(!host_allowed(bad, &named), "{bad}");
        }
    }

    #[test]
    fn tokens_come_from_the_bearer_header_or_the_query() {
        let q = Some("changes=true&token=abc");
        assert_eq!(shown_token(None, q), Some(&b"abc"[..]));
        assert_eq!(shown_token(Some(b"Bearer xyz"), q), Some(&b"xyz"[..]));
        assert_eq!(shown_token(Some(b"Basic xyz"), q), None);
        assert_eq!(shown_token(None, Some("tokens=abc")), None);
        assert!(same_token(b"abc", b"abc"));
        assert!(!same_token(b"abd", b"abc"));
        assert!(!same_token(b"ab", b"abc"));
    }

    #[test]
    fn the_token_file_is_private_and_kept_across_starts() {
        let dir = tempfile::tempdir().unwrap();
        let t = load_or_create(dir.path()).unwrap();
        assert_eq!(t.len(), TOKEN_HEX);
        let path = token_path(dir.path());
        let m = std::fs::metadata(&path).unwrap();
        assert_eq!(m.permissions().mode() & 0o777, 0o600);
        assert_eq!(load_or_create(dir.path()).unwrap(), t);
        // A token another could have read is replaced.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let fresh = load_or_create(dir.path()).unwrap();
        assert_ne!(fresh, t);
        let m = std::fs::metadata(&path).unwrap();
        assert_eq!(m.permissions().mode() & 0o777, 0o600);
    }
}
