//! Values that would defeat the limits, refused end to end with the real
//! binary: a workspace that is a system directory (or leads to one, or
//! holds the policy), deadlines and grace periods beyond their maximum,
//! policy files too large to load cheaply.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_agent-rsh")
}

struct TestPolicy {
    dir: tempfile::TempDir,
    path: PathBuf,
}

fn policy(body: &str) -> TestPolicy {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("policy.toml");
    std::fs::write(&path, body).unwrap();
    TestPolicy { dir, path }
}

fn agent(args: &[&str]) -> Output {
    Command::new(bin())
        .env_remove("AGENT_RSH_POLICY")
        .args(args)
        .output()
        .unwrap()
}

fn run_json(p: &Path, ws: &Path, words: &[&str]) -> (Value, Option<i32>) {
    let out = Command::new(bin())
        .env_remove("AGENT_RSH_POLICY")
        .args(["run", "--json", "--policy"])
        .arg(p)
        .arg("--workspace")
        .arg(ws)
        .arg("--argv")
        .arg("--")
        .args(words)
        .output()
        .unwrap();
    let v = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (v, out.status.code())
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

const ALLOW: &str = "[commands]\nallow = [\"ls\", \"touch\"]\n";

#[test]
fn system_directories_are_refused_as_workspace() {
    let p = policy(ALLOW);
    let marker = format!("agent-rsh-limits-{}", std::process::id());
    for ws in [
        "/", "/etc", "/proc", "/usr", "/usr/bin", "/var", "/var/lib", "/dev", "/lib",
    ] {
        let (r, code) = run_json(&p.path, Path::new(ws), &["touch", &marker]);
        assert_eq!(code, Some(126), "{ws}: {r}");
        assert_eq!(r["status"], "denied", "{ws}: {r}");
        assert_eq!(r["denial"]["rule"], "workspace.system", "{ws}: {r}");
        let reason = r["denial"]["reason"].as_str().unwrap();
        assert!(reason.contains(&format!("the workspace {ws} ")), "{reason}");
        let hint = r["denial"]["hint"].as_str().unwrap();
        assert!(hint.contains("leave --workspace out"), "{hint}");
        assert!(
            !Path::new(ws).join(&marker).exists(),
            "{ws}: the command ran"
        );
    }
    // A symlink to one is the directory it names.
    let links = tempfile::tempdir().unwrap();
    for (name, target) in [("root", "/"), ("etc", "/etc"), ("usr", "/usr/lib")] {
        let link = links.path().join(name);
        std::os::unix::fs::symlink(target, &link).unwrap();
        let (r, code) = run_json(&p.path, &link, &["ls"]);
        assert_eq!(
            (code, &r["denial"]["rule"]),
            (Some(126), &Value::from("workspace.system")),
            "{r}"
        );
        let reason = r["denial"]["reason"].as_str().unwrap();
        assert!(reason.contains(&format!("(which is {target})")), "{reason}");
    }
    // Text mode says the same on stderr, rule and hint.
    let out = agent(&[
        "run",
        "--policy",
        p.path.to_str().unwrap(),
        "--workspace",
        "/",
        "--",
        "ls",
    ]);
    assert_eq!(out.status.code(), Some(126));
    let err = text(&out.stderr);
    assert!(
        err.contains("agent-rsh: denied: workspace.system: the workspace / is the root directory"),
        "{err}"
    );
    assert!(
        err.contains("agent-rsh: hint: use a project directory"),
        "{err}"
    );
    // A background job is refused before it detaches.
    let state = tempfile::tempdir().unwrap();
    let out = Command::new(bin())
        .env_remove("AGENT_RSH_POLICY")
        .env("XDG_STATE_HOME", state.path())
        .args(["spawn", "--policy"])
        .arg(&p.path)
        .args(["--workspace", "/etc", "--", "ls"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(126), "{}", text(&out.stderr));
    let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
    assert!(said.contains("workspace.system"), "{said}");
    // A directory of one's own runs.
    let ws = tempfile::tempdir().unwrap();
    let (r, code) = run_json(&p.path, ws.path(), &["touch", "made"]);
    assert_eq!(code, Some(0), "{r}");
    assert!(ws.path().join("made").exists());
}

/// The refusal holds for the directory the run actually uses: with
/// `--workspace LINK` and LINK flipped between an acceptable directory and
/// one that holds the policy file while runs start, each run is either
/// refused or runs in the acceptable one; none ever writes beside the
/// policy (the path was once checked, then resolved again for use).
#[test]
fn a_symlink_swapped_after_the_check_does_not_change_the_workspace() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let p = policy(ALLOW);
    let forbidden = p.dir.path().canonicalize().unwrap();
    let fine = tempfile::tempdir().unwrap();
    let fine_dir = fine.path().canonicalize().unwrap();
    let links = tempfile::tempdir().unwrap();
    let link = links.path().join("ws");
    std::os::unix::fs::symlink(&fine_dir, &link).unwrap();
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let flipper = {
        let (stop, link, tmp) = (stop.clone(), link.clone(), links.path().join("next"));
        let targets = [forbidden.clone(), fine_dir.clone()];
        std::thread::spawn(move || {
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                let _ = std::fs::remove_file(&tmp);
                std::os::unix::fs::symlink(&targets[i % 2], &tmp).unwrap();
                std::fs::rename(&tmp, &link).unwrap();
                i += 1;
            }
        })
    };
    let (mut refused, mut ran) = (0, 0);
    for i in 0..150 {
        let marker = format!("marker-{i}");
        let (r, code) = run_json(&p.path, &link, &["touch", &marker]);
        match code {
            Some(126) => {
                // The check's own two looks may see either state too.
                let rule = r["denial"]["rule"].as_str().unwrap_or("");
                assert!(
                    ["workspace.system", "policy.reachable"].contains(&rule),
                    "{r}"
                );
                refused += 1;
            }
            Some(0) => {
                assert!(
                    r["cwd"]
                        .as_str()
                        .unwrap()
                        .starts_with(fine_dir.to_str().unwrap()),
                    "{r}"
                );
                assert!(fine_dir.join(&marker).exists(), "{r}");
                ran += 1;
            }
            _ => panic!("{r}"),
        }
        let beside: Vec<_> = std::fs::read_dir(&forbidden)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .filter(|n| n.to_string_lossy().starts_with("marker-"))
            .collect();
        assert!(
            beside.is_empty(),
            "a run wrote beside the policy: {beside:?}; {r}"
        );
    }
    stop.store(true, Ordering::Relaxed);
    flipper.join().unwrap();
    // Both states were seen: the swap really raced the runs.
    assert!(refused > 0 && ran > 0, "refused {refused}, ran {ran}");
}

#[test]
fn a_workspace_holding_the_policy_file_is_refused() {
    let p = policy(ALLOW);
    let conf = p.dir.path().join("conf");
    std::fs::create_dir(&conf).unwrap();
    let inner = conf.join("policy.toml");
    std::fs::write(&inner, ALLOW).unwrap();
    // The policy's directory and every ancestor of it.
    for ws in [conf.as_path(), p.dir.path()] {
        let (r, code) = run_json(&inner, ws, &["touch", "x"]);
        assert_eq!(code, Some(126), "{r}");
        assert_eq!(r["denial"]["rule"], "workspace.system", "{r}");
        let reason = r["denial"]["reason"].as_str().unwrap();
        assert!(reason.contains("contains the policy file"), "{reason}");
        assert!(!ws.join("x").exists());
    }
    // A sibling directory is fine.
    let sibling = p.dir.path().join("work");
    std::fs::create_dir(&sibling).unwrap();
    let (r, code) = run_json(&inner, &sibling, &["touch", "x"]);
    assert_eq!(code, Some(0), "{r}");
}

#[test]
fn deadlines_and_grace_beyond_their_maximum_are_policy_errors() {
    for (body, line_col, key, max) in [
        (
            "[limits]\ntimeout_ms = 86400001\n",
            ":2:14:",
            "limits.timeout_ms = 86400001",
            "24 hours",
        ),
        (
            "[limits]\nkill_grace_ms = 18446744073709551615\n",
            ":2:17:",
            "limits.kill_grace_ms = 18446744073709551615",
            "60 seconds",
        ),
        (
            "[jobs]\nmax_runtime_ms = 100000000\n",
            ":2:18:",
            "jobs.max_runtime_ms = 100000000",
            "24 hours",
        ),
    ] {
        let p = policy(&format!("{ALLOW}{body}"));
        let shown = p.path.display().to_string();
        let out = agent(&["run", "--policy", &shown, "--", "ls"]);
        assert_eq!(out.status.code(), Some(125), "{body}");
        let err = text(&out.stderr);
        let at = format!("{shown}{}", line_col.replace(":2:", ":4:"));
        assert!(err.contains(&at), "{at} not in {err}");
        assert!(err.contains(key) && err.contains(max), "{err}");
        let out = agent(&["policy", "check", &shown]);
        assert_eq!(out.status.code(), Some(125));
        assert!(text(&out.stderr).contains(&at));
    }
    // The maximum itself is accepted.
    let p = policy(&format!(
        "{ALLOW}[limits]\ntimeout_ms = 86400000\nkill_grace_ms = 60000\n"
    ));
    let out = agent(&["policy", "check", p.path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

#[test]
fn oversized_policies_are_refused_before_parsing() {
    // Over 1 MiB: refused whatever it holds.
    let mut body = String::from(ALLOW);
    while body.len() <= 1 << 20 {
        body.push_str("# a comment line to make the file large\n");
    }
    let p = policy(&body);
    let out = agent(&["policy", "check", p.path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(125));
    let err = text(&out.stderr);
    assert!(err.contains("larger than 1048576 bytes (1 MiB)"), "{err}");
    // An endless file is not read to its end.
    let start = Instant::now();
    let out = agent(&["run", "--policy", "/dev/zero", "--", "ls"]);
    assert_eq!(out.status.code(), Some(125));
    assert!(
        text(&out.stderr).contains("larger than"),
        "{}",
        text(&out.stderr)
    );
    assert!(start.elapsed() < Duration::from_secs(10));
    // More than 1,000 [[rules]]: refused at the first one too many.
    let mut body = String::from(ALLOW);
    for i in 0..1001 {
        body.push_str(&format!(
            "[[rules]]\nid = \"local.ls.{i}\"\ncommands = [\"ls\"]\nreason = \"r\"\nhint = \"h\"\n"
        ));
    }
    let p = policy(&body);
    let out = agent(&["run", "--policy", p.path.to_str().unwrap(), "--", "ls"]);
    assert_eq!(out.status.code(), Some(125));
    let err = text(&out.stderr);
    let at = format!("{}:{}:1:", p.path.display(), 3 + 5 * 1000);
    assert!(err.contains(&at), "{at} not in {err}");
    assert!(err.contains("at most 1000"), "{err}");
}

#[test]
fn memory_and_workspace_bounds_have_defaults_and_can_be_lifted() {
    let out = agent(&["policy", "show"]);
    let shown = text(&out.stdout);
    // SAFETY: sysconf has no memory effects.
    let half = unsafe {
        libc::sysconf(libc::_SC_PHYS_PAGES) as u64 * libc::sysconf(libc::_SC_PAGESIZE) as u64 / 2
    };
    assert!(
        shown.contains(&format!("memory_bytes = {half}\n")),
        "{shown}"
    );
    assert!(shown.contains("workspace_bytes = 4294967296\n"), "{shown}");
    let p = policy("[limits]\nmemory_bytes = 0\nworkspace_bytes = 0\n");
    let out = agent(&["policy", "show", "--policy", p.path.to_str().unwrap()]);
    let shown = text(&out.stdout);
    assert!(shown.contains("memory_bytes = 0\n"), "{shown}");
    assert!(shown.contains("workspace_bytes = 0\n"), "{shown}");
}
