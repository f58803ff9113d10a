//! Hostile neighbours and odd input (the security and input items): planted
//! symlinks, store modes, terminal escapes, read-only work, imports that must
//! not touch their input's folder, bounded sizes, one validation on every
//! path in, and clear errors.

use crate::support::cli;

use crate::support::cli::{as_neighbour, bin, register_args, Env};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

const T0: &str = "2026-11-30T12:00:00Z";

fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o777
}

#[test]
fn export_never_writes_through_a_planted_symlink() {
    let env = Env::with_agent("alice", "/repo", T0);
    let shared = env.path("shared");
    std::fs::create_dir(&shared).unwrap();
    let victim = env.path("victim");
    std::fs::write(&victim, b"root-only secret").unwrap();
    // The old fixed temp name, planted: it must not be followed.
    std::os::unix::fs::symlink(&victim, shared.join(".registry.json.agentlog-tmp")).unwrap();
    let out = shared.join("registry.json");
    env.ok(&["export", "--out", out.to_str().unwrap()]);
    assert_eq!(std::fs::read(&victim).unwrap(), b"root-only secret");
    cli::assert_accepted(&out);
    // A registry.json that is a link is refused, naming it; nothing changes.
    std::fs::remove_file(&out).unwrap();
    std::os::unix::fs::symlink(&victim, &out).unwrap();
    env.run(&["export", "--out", out.to_str().unwrap()])
        .fails(1, "is a symbolic link");
    assert_eq!(std::fs::read(&victim).unwrap(), b"root-only secret");
    assert!(std::fs::symlink_metadata(&out).unwrap().is_symlink());
    // No temp file is left behind by either attempt.
    let temps: Vec<_> = std::fs::read_dir(&shared)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".tmp"))
        .collect();
    assert!(temps.is_empty(), "{temps:?}");
}

#[test]
fn an_export_to_a_folder_is_refused_before_any_lock_file() {
    let env = Env::with_agent("alice", "/repo", T0);
    let target = env.path("exports");
    std::fs::create_dir(&target).unwrap();
    env.run(&["export", "--out", target.to_str().unwrap()])
        .fails(1, "is a folder");
    assert!(!env.path("exports.lock").exists());
    assert_eq!(std::fs::read_dir(&target).unwrap().count(), 0);
}

#[test]
fn stores_are_private_unless_shared_with_the_group() {
    let env = Env::with_agent("alice", "/repo", T0);
    env.ok(&["snapshot"]);
    assert_eq!(mode(&env.dir), 0o700);
    let mut files = vec![env.dir.clone()];
    while let Some(p) = files.pop() {
        let m = std::fs::symlink_metadata(&p).unwrap();
        if m.is_dir() {
            assert_eq!(mode(&p) & 0o077, 0, "{} is open to others", p.display());
            files.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
        } else {
            assert_eq!(mode(&p), 0o600, "{}", p.display());
        }
    }
    let shared = env.path("team");
    env.run_in(&shared, &["init", "--group"]).ok();
    assert_eq!(mode(&shared), 0o750);
    // An existing store open to everyone gets a warning naming the fix.
    std::fs::set_permissions(&env.dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let r = env.run(&["list"]);
    r.ok();
    assert!(
        r.stderr.contains("open to every local user") && r.stderr.contains("chmod 700"),
        "{}",
        r.stderr
    );
}

#[test]
fn text_output_escapes_control_characters_and_json_stays_exact() {
    let env = Env::with_agent("alice", "/repo", T0);
    let evil = "ok\u{1b}]0;pwned\u{7}\u{1b}[2J\nFAKE  row\u{202e}x";
    env.ok(&["status", "alice", "busy", "--message", evil, "--at", T0]);
    env.ok(&["post", "--from", "alice", "--to", "alice", evil, "--at", T0]);
    for args in [&["list"][..], &["log"], &["audit", "alice"]] {
        let out = env.ok(args);
        assert!(
            !out.contains('\u{1b}') && !out.contains('\u{7}') && !out.contains('\u{202e}'),
            "{args:?}: {out:?}"
        );
        assert!(!out.contains("\nFAKE"), "{args:?}: {out:?}");
        assert!(out.contains("\\u{1b}"), "{args:?}: {out:?}");
    }
    let doc = env.json(&["list"]);
    assert_eq!(doc["agents"][0]["status_message"], evil);
    let read = env.ok(&["read", "alice", "--at", T0]);
    assert!(
        !read.contains('\u{1b}') && !read.contains("\nFAKE"),
        "{read:?}"
    );
}

#[test]
fn an_empty_store_has_no_empty_status_list() {
    let env = Env::new();
    env.ok(&["init"]);
    let stats = env.ok(&["stats"]);
    assert!(
        stats.lines().any(|l| l.trim_end() == "agents      0"),
        "{stats}"
    );
}

#[test]
fn empty_status_messages_print_no_parentheses() {
    let env = Env::with_agent("alice", "/repo", T0);
    env.ok(&["status", "alice", "busy", "--message", "", "--at", T0]);
    let log = env.ok(&["log"]);
    assert!(!log.contains("()"), "{log}");
}

#[test]
fn exports_run_read_only_beside_a_writer() {
    let env = Env::with_agent("alice", "/repo", T0);
    // Hold the writer lock for the whole test.
    let store = agentlog::store::Store::open(&env.dir, Default::default()).unwrap();
    let out = env.path("elsewhere.json");
    env.ok(&["export", "--out", out.to_str().unwrap()]);
    cli::assert_accepted(&out);
    let children: Vec<_> = (0..4)
        .map(|_| {
            bin()
                .arg("--dir")
                .arg(&env.dir)
                .args(["--json", "export"])
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for c in children {
        let o = c.wait_with_output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    store.close().unwrap();
}

#[test]
fn a_compaction_dry_run_runs_read_only_beside_a_writer() {
    let env = Env::with_agent("alice", "/repo", T0);
    env.ok(&["remove", "alice", "--at", T0]);
    let before = files_under(&env.dir);
    // Hold the writer lock for the whole test.
    let store = agentlog::store::Store::open(&env.dir, Default::default()).unwrap();
    let dry = env.json(&["compact", "--dry-run", "--now", "2026-12-30T12:00:00Z"]);
    assert_eq!(dry["dry_run"], true);
    assert_eq!(dry["events_dropped"], 2, "{dry}");
    assert_eq!(dry["generation"], 0);
    store.close().unwrap();
    let mut after = files_under(&env.dir);
    after.retain(|p| !p.starts_with(env.dir.join("snapshots")));
    let mut before = before;
    before.retain(|p| !p.starts_with(env.dir.join("snapshots")));
    before.sort();
    after.sort();
    assert_eq!(before, after, "the dry run changed no file");
    // The real run agrees with the plan.
    let real = env.json(&["compact", "--now", "2026-12-30T12:00:00Z", "--force-now"]);
    assert_eq!(real["agents_retired"], dry["agents_retired"]);
    assert_eq!(real["events_dropped"], dry["events_dropped"]);
}

#[test]
fn import_creates_nothing_beside_its_input() {
    let env = Env::new();
    env.ok(&["init"]);
    let inbox = env.path("inbox");
    std::fs::create_dir(&inbox).unwrap();
    let file = inbox.join("registry.json");
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/registry/v4-rust.json"),
        &file,
    )
    .unwrap();
    env.ok(&["import", file.to_str().unwrap()]);
    let names: Vec<_> = std::fs::read_dir(&inbox)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["registry.json"]);
    let missing = env.path("nowhere/sub/registry.json");
    env.run(&["import", missing.to_str().unwrap()])
        .fails(1, "nowhere");
    assert!(!env.path("nowhere").exists());
}

fn registry_with(row_extra: &str, name: &str) -> String {
    format!(
        r#"{{"schema_version": 4, "agents": [{{"name": {}, "provider": "claude", "cwd": "/w", "log_path": null,
        "created_at": "2026-01-01T00:00:00Z", "status": "live"{row_extra}}}]}}"#,
        serde_json::to_string(name).unwrap()
    )
}

#[test]
fn one_validation_for_every_path_in() {
    let env = Env::new();
    env.ok(&["init"]);
    for bad in [" ", " alice", "alice ", "ali\u{202e}ce", "ali\u{200b}ce"] {
        env.run(&register_args(bad, "claude", "/", T0, &[]))
            .fails(1, "agent name");
        let f = env.path("bad.json");
        std::fs::write(&f, registry_with("", bad)).unwrap();
        env.run(&["import", f.to_str().unwrap()]).fails(1, "row 0");
    }
    let f = env.path("cwd.json");
    let big = format!("/{}", "x".repeat(900 * 1024));
    std::fs::write(
        &f,
        registry_with("", "a").replace("\"/w\"", &format!("{big:?}")),
    )
    .unwrap();
    env.run(&["import", f.to_str().unwrap()]).fails(1, "cwd");
    std::fs::write(&f, registry_with(r#", "short_id": "a\u001b[2Jb""#, "a")).unwrap();
    env.run(&["import", f.to_str().unwrap()])
        .fails(1, "control characters");
    assert_eq!(env.json(&["list"])["agents"], serde_json::json!([]));
}

#[test]
fn a_bom_is_accepted_and_json_errors_say_where_once() {
    let env = Env::new();
    env.ok(&["init"]);
    let f = env.path("bom.json");
    std::fs::write(&f, format!("\u{feff}{}", registry_with("", "a"))).unwrap();
    env.ok(&["import", f.to_str().unwrap()]);
    std::fs::write(&f, "{\"schema_version\": 4,\n \"agents\": [}").unwrap();
    let err = env
        .run(&["import", f.to_str().unwrap()])
        .fails(1, "line 2")
        .to_string();
    assert_eq!(err.matches("line 2").count(), 1, "{err}");
}

#[test]
fn sizes_are_refused_up_front_with_exit_2() {
    let env = Env::new();
    for args in [
        &["demo", "--agents", "4294967295"][..],
        &["bench", "heartbeats", "--agents", "18446744073709551615"],
        &["bench", "scaling", "--agents", "18446744073709551615"],
        &["bench", "replay", "--events", "18446744073709551615"],
        &["demo", "--hours", "4000000000"],
    ] {
        env.run_bare(args).fails(2, "--");
    }
    env.ok(&["init"]);
    for ttl in ["1e-12", "0", "1e300"] {
        env.run(&["post", "--from", "a", "--ttl-hours", ttl, "hi"])
            .fails(2, "ttl");
    }
}

#[test]
fn the_environment_names_only_the_users_store() {
    let env = Env::new();
    let real = env.path("real");
    // Empty counts as unset: the default (under HOME) is used.
    let home = env.path("home");
    let r = cli::Run::from_output(
        bin()
            .env("AGENTLOG_DIR", "")
            .env("HOME", &home)
            .arg("init")
            .output()
            .unwrap(),
    );
    r.ok();
    assert!(home.join(".agentlog/log").is_dir());
    // The demo never writes into $AGENTLOG_DIR.
    let out = bin()
        .env("AGENTLOG_DIR", &real)
        .args(["--json", "demo", "--agents", "3", "--hours", "1"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!real.exists());
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let dir = doc["dir"].as_str().unwrap();
    assert_eq!(doc["export"]["conformance"], "accepted");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn warnings_carry_no_colour_codes_off_a_terminal() {
    let env = Env::with_agent("alice", "/repo", T0);
    std::fs::set_permissions(&env.dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let r = env.run(&["list"]);
    r.ok();
    assert!(r.stderr.contains("WARN"), "{}", r.stderr);
    assert!(!r.stderr.contains('\u{1b}'), "{:?}", r.stderr);
}

/// The neighbour plants `link` → `target`, replacing whatever is there.
fn plant(link: &Path, target: &Path) {
    match std::fs::symlink_metadata(link) {
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(link).unwrap(),
        Ok(_) => std::fs::remove_file(link).unwrap(),
        Err(_) => {}
    }
    let out = as_neighbour("ln", &["-s".as_ref(), target.as_os_str(), link.as_os_str()]);
    assert!(out.status.success(), "plant {}: {out:?}", link.display());
}

fn loosen(p: &Path) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o777)).unwrap();
}

/// Every file under `dir`, links not followed.
fn files_under(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(p) = todo.pop() {
        if std::fs::symlink_metadata(&p).unwrap().is_dir() {
            todo.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn a_neighbours_planted_links_redirect_nothing_and_private_files_stay_unreadable() {
    let env = Env::new();
    std::fs::set_permissions(env.path(""), std::fs::Permissions::from_mode(0o755)).unwrap();
    // What the neighbour aims at: a root-only file and a root-only folder.
    let victim = env.path("victim");
    std::fs::write(&victim, b"root-only secret").unwrap();
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o600)).unwrap();
    let elsewhere = env.path("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    let untouched = || {
        assert_eq!(std::fs::read(&victim).unwrap(), b"root-only secret");
        assert_eq!(mode(&victim), 0o600);
        let inside: Vec<_> = std::fs::read_dir(&elsewhere).unwrap().collect();
        assert!(inside.is_empty(), "written outside the store: {inside:?}");
    };
    // A shared folder (no sticky bit) holding a deliberately loosened store.
    let shared = env.path("shared");
    std::fs::create_dir(&shared).unwrap();
    loosen(&shared);
    let store = shared.join("store");
    let at = |s: &str| -> std::path::PathBuf { shared.join(s) };
    env.run_in(&store, &["init"]).ok();
    let run = |args: &[&str]| env.run_in(&store, args);
    let register = |name: &str| {
        run(&register_args(name, "claude", "/r", T0, &[])).ok();
    };
    register("alice");
    for d in [&store, &store.join("log"), &store.join("snapshots")] {
        loosen(d);
    }
    untouched();

    // The writer lock and the segment temp files.
    plant(&at("store/log/LOCK"), &victim);
    let r = run(&register_args("bob", "claude", "/r", T0, &[]));
    assert!(r.stderr.contains("symbolic link"), "{}", r.stderr);
    untouched();
    std::fs::remove_file(at("store/log/LOCK")).unwrap();
    for id in 0..8 {
        plant(&at(&format!("store/log/next-{id}.seg.tmp")), &victim);
    }
    register("bob");
    untouched();
    // Snapshots at every name the next ones could take.
    for lsn in 0..16u64 {
        plant(&at(&format!("store/snapshots/snap-{lsn:020}.bin")), &victim);
    }
    run(&["heartbeat", "bob", "--at", T0]);
    let _ = run(&["snapshot"]);
    untouched();
    for lsn in 0..16u64 {
        let _ = std::fs::remove_file(at(&format!("store/snapshots/snap-{lsn:020}.bin")));
    }
    // Compaction: its new generation's folder, segments and MANIFEST temp.
    run(&["remove", "bob", "--at", T0]).ok();
    plant(&at("store/log/MANIFEST.tmp"), &victim);
    plant(&at("store/log/gen-000001"), &elsewhere);
    let _ = run(&["compact", "--now", "2026-12-30T12:00:00Z", "--force-now"]);
    untouched();
    for p in ["store/log/MANIFEST.tmp", "store/log/gen-000001"] {
        as_neighbour("rm", &["-f".as_ref(), at(p).as_os_str()]);
    }
    run(&["compact", "--now", "2026-12-30T12:00:00Z", "--force-now"]).ok();
    run(&["verify"]).ok();
    untouched();

    // Export into the shared folder: temp and final names, both locks.
    let out = at("registry.json");
    let out_s = out.to_str().unwrap();
    for planted in [
        ".registry.json.agentlog-tmp",
        "registry.json",
        "registry.json.lock",
        "locks",
        "locks/_registry.lock",
    ] {
        if planted == "locks/_registry.lock" {
            let _ = std::fs::remove_file(at("locks"));
            as_neighbour(
                "mkdir",
                &["-m".as_ref(), "777".as_ref(), at("locks").as_os_str()],
            );
        }
        let target: &Path = if planted == "locks" {
            &elsewhere
        } else {
            &victim
        };
        plant(&at(planted), target);
        let _ = run(&["export", "--out", out_s]);
        untouched();
        let _ = as_neighbour("rm", &["-rf".as_ref(), at(planted).as_os_str()]);
    }

    // The persisted settings of a store the neighbour prepared the folder of.
    let store2 = at("store2");
    as_neighbour(
        "mkdir",
        &["-m".as_ref(), "777".as_ref(), store2.as_os_str()],
    );
    plant(&store2.join("config.json"), &victim);
    let _ = env.run_in(&store2, &["init", "--max-messages", "50"]);
    untouched();

    // Reading: nothing the store wrote is readable to the neighbour, in the
    // loosened store or in a default (0700) one.
    let private = at("private");
    env.run_in(&private, &["init"]).ok();
    env.run_in(&private, &register_args("carol", "claude", "/r", T0, &[]))
        .ok();
    env.run_in(&private, &["snapshot"]).ok();
    for dir in [&store, &private] {
        let files = files_under(dir);
        assert!(files.len() >= 3, "{files:?}");
        for f in files {
            let r = as_neighbour("cat", &[f.as_os_str()]);
            assert!(!r.status.success(), "the neighbour read {}", f.display());
        }
        let r = as_neighbour(
            env!("CARGO_BIN_EXE_agentlog"),
            &["--dir".as_ref(), dir.as_os_str(), "log".as_ref()],
        );
        assert!(
            !r.status.success(),
            "the neighbour ran `log` on {}",
            dir.display()
        );
    }
}
