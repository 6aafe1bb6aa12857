//! End-to-end tests of the login face: `-c`, commands on standard input,
//! the interactive shell in a terminal (tmux), per-user and per-group
//! sections, the warning limit and the audit log.
//!
//! They use what a real installation uses: real accounts (`useradd`, removed
//! by `userdel -r` when the test ends) and the real system policy path
//! `/etc/agent-rsh/policy.toml`. Each run of agent-rsh happens in a private
//! mount namespace where an overlay over /etc supplies the test's policy
//! file, so the machine's /etc is never written and tests running at the
//! same time cannot see each other's policies. Needs root.

use crate::common::accounts::{Group, User, chmod};
use crate::common::{self, bin, wait_for};
use serde_json::Value;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// What every test here uses: root, the account tools, a private mount
/// namespace, pkill for the accounts' leftovers; `extra` adds tmux or pgrep.
fn ready(test: &str, extra: &[&str]) -> bool {
    let mut programs = vec![
        "useradd", "userdel", "groupadd", "groupdel", "unshare", "setpriv", "mount", "pkill",
    ];
    programs.extend_from_slice(extra);
    common::ready(test, true, &programs)
}

/// An overlay upper layer for /etc holding `agent-rsh/policy.toml`, and a
/// directory the test accounts may write (audit log, other policies).
struct System {
    dir: tempfile::TempDir,
}

impl System {
    fn new(policy: &str) -> System {
        let dir = tempfile::tempdir().unwrap();
        chmod(dir.path(), 0o755);
        let upper = dir.path().join("upper");
        std::fs::create_dir_all(upper.join("agent-rsh")).unwrap();
        std::fs::create_dir(dir.path().join("work")).unwrap();
        std::fs::create_dir(dir.path().join("shared")).unwrap();
        // The overlay's root takes the upper directory's mode: keep /etc's.
        chmod(&upper, 0o755);
        chmod(&upper.join("agent-rsh"), 0o755);
        chmod(&dir.path().join("shared"), 0o1777);
        let s = System { dir };
        // As an administrator would: one log every account may append to.
        std::fs::write(s.audit(), "").unwrap();
        chmod(&s.audit(), 0o622);
        if !policy.is_empty() {
            s.write_policy(&policy.replace("@AUDIT@", &s.audit().display().to_string()));
        }
        s
    }

    fn write_policy(&self, text: &str) {
        let p = self.dir.path().join("upper/agent-rsh/policy.toml");
        std::fs::write(&p, text).unwrap();
        chmod(&p, 0o644);
    }

    fn audit(&self) -> PathBuf {
        self.dir.path().join("shared/audit.jsonl")
    }

    fn shared(&self, name: &str) -> PathBuf {
        self.dir.path().join("shared").join(name)
    }

    fn audit_records(&self) -> Vec<Value> {
        let text = std::fs::read_to_string(self.audit()).unwrap_or_default();
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
            .collect()
    }

    /// `agent-rsh` run as `user` with argv[0] `argv0`, seeing this
    /// system's /etc/agent-rsh and the real rest of /etc.
    fn login(&self, user: &User, argv0: &str, args: &[&str]) -> Command {
        let mut c = Command::new("unshare");
        c.args(["-m", "--propagation", "private", "--", "sh", "-c"]);
        c.arg(
            r#"set -e
mount -t overlay overlay -o "lowerdir=/etc,upperdir=$1/upper,workdir=$1/work" /etc
mount --bind "$1/upper/agent-rsh" /etc/agent-rsh
user=$2; shift 2
exec setpriv --reuid="$user" --regid="$user" --init-groups -- bash -c 'a0=$1; shift; exec -a "$a0" "$@"' _ "$@""#,
        );
        c.arg("sh")
            .arg(self.dir.path())
            .arg(&user.name)
            .arg(argv0)
            .arg(bin());
        c.args(args);
        c.env_remove("AGENT_RSH_POLICY");
        c
    }
}

fn run_with_stdin(mut c: Command, stdin: &[u8]) -> Output {
    c.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = c.spawn().unwrap();
    let mut w = child.stdin.take().unwrap();
    let data = stdin.to_vec();
    let writer = std::thread::spawn(move || {
        let _ = w.write_all(&data);
    });
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    out
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

const BASE: &str = r#"
[commands]
allow = ["echo", "ls", "cat", "sleep"]
[audit]
path = "@AUDIT@"
"#;

#[test]
fn dash_c_runs_allowed_commands_and_refuses_lists() {
    if !ready("dash_c_runs_allowed_commands_and_refuses_lists", &[]) {
        return;
    }
    let sys = System::new(BASE);
    let u = User::with_home(&[]);
    std::fs::write(u.home.join("marker-file"), "x").unwrap();

    let out = sys
        .login(&u, "agent-rsh", &["-c", "echo hi"])
        .output()
        .unwrap();
    assert_eq!(text(&out.stdout), "hi\n", "{}", text(&out.stderr));
    assert_eq!(out.status.code(), Some(0));

    let out = sys
        .login(&u, "agent-rsh", &["-c", "id; ls"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(126));
    assert!(out.stdout.is_empty());
    let err = text(&out.stderr);
    assert!(
        err.contains("denied (command.not-allowed)") && err.contains("hint:"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "one line: {err}");

    // The workspace is the account's home from the password database, not
    // $HOME, and commands read agent-rsh's standard input.
    let mut c = sys.login(&u, "-agent-rsh", &["-c", "ls"]);
    c.env("HOME", "/tmp");
    let out = c.output().unwrap();
    assert!(
        text(&out.stdout).contains("marker-file"),
        "{}",
        text(&out.stderr)
    );
    let out = run_with_stdin(sys.login(&u, "agent-rsh", &["-c", "cat"]), b"through\n");
    assert_eq!(text(&out.stdout), "through\n");
    let out = sys.login(&u, "agent-rsh", &["-c", "pwd"]).output().unwrap();
    assert_eq!(text(&out.stdout).trim(), u.home.display().to_string());

    // The command's own exit status is agent-rsh's.
    let out = sys
        .login(&u, "agent-rsh", &["-c", "ls no-such-file"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));

    // cd takes absolute paths inside the home, none outside it.
    let out = sys
        .login(&u, "agent-rsh", &["-c", "cd /etc"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(126));
    assert!(
        text(&out.stderr).contains("denied (cd.escape)"),
        "{}",
        text(&out.stderr)
    );
    let inside = format!("cd {}", u.home.display());
    let out = sys
        .login(&u, "agent-rsh", &["-c", &inside])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    // /tmp is each line's own: the refusal says how to use it.
    let out = sys
        .login(&u, "agent-rsh", &["-c", "cd /tmp"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(126));
    assert!(
        text(&out.stderr).contains("`cd /tmp && ls`"),
        "{}",
        text(&out.stderr)
    );

    let recs = sys.audit_records();
    let cmds: Vec<_> = recs.iter().filter(|r| r["event"] == "command").collect();
    assert_eq!(cmds.len(), 9);
    assert_eq!(cmds[6]["rule"], "cd.escape");
    assert_eq!(cmds[0]["verdict"], "allow");
    assert_eq!(cmds[0]["user"], u.name.as_str());
    assert_eq!(cmds[0]["face"], "login-command");
    assert_eq!(cmds[1]["verdict"], "deny");
    assert_eq!(cmds[1]["rule"], "command.not-allowed");
    assert_eq!(cmds[1]["exitCode"], 126);
    assert_eq!(cmds[5]["exitCode"], 2);
}

#[test]
fn login_fails_closed_without_a_system_policy_or_audit_log() {
    if !ready(
        "login_fails_closed_without_a_system_policy_or_audit_log",
        &[],
    ) {
        return;
    }
    let sys = System::new("");
    let u = User::with_home(&[]);
    let out = sys
        .login(&u, "-agent-rsh", &["-c", "echo hi"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125));
    assert!(out.stdout.is_empty());
    let err = text(&out.stderr);
    assert!(err.contains("/etc/agent-rsh/policy.toml"), "{err}");

    // An audit log the account cannot write: nothing runs.
    sys.write_policy(
        "confinement = \"best-effort\"\n[commands]\nallow = [\"echo\"]\n[audit]\npath = \"/root/nope/audit.jsonl\"\n",
    );
    let out = sys
        .login(&u, "-agent-rsh", &["-c", "echo hi"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125), "{}", text(&out.stderr));
    assert!(out.stdout.is_empty());
    assert!(
        text(&out.stderr).contains("audit log"),
        "{}",
        text(&out.stderr)
    );

    // Programs looked up in the writable home: refused.
    sys.write_policy(&format!(
        "confinement = \"best-effort\"\n[commands]\nallow = [\"echo\"]\nsearch_path = [\"{}/bin\", \"/usr/bin\"]\n[audit]\nlogin = false\n",
        u.home.display()
    ));
    let out = sys
        .login(&u, "-agent-rsh", &["-c", "echo hi"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125));
    assert!(
        text(&out.stderr).contains("commands.search_path"),
        "{}",
        text(&out.stderr)
    );

    // "required" confinement: the account gets its PID namespace inside a
    // user namespace, so commands run.
    sys.write_policy("[commands]\nallow = [\"echo\"]\n[audit]\nlogin = false\n");
    let out = sys
        .login(&u, "-agent-rsh", &["-c", "echo hi"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "hi\n");
    // Where user namespaces are refused too, "required" still runs: the
    // tree is held by the subreaper guardian and the run's cgroup instead
    // of a PID namespace, and the mount view's guarantees by seccomp
    // (docs/security.md); the login is not refused for it.
    // The simulation seam is the account's own choice only where it may
    // choose its whole policy (shell.allow_policy_env); elsewhere it would
    // let the account take the mount view away, so it is ignored.
    sys.write_policy("[commands]\nallow = [\"echo\", \"ls\"]\n[audit]\nlogin = false\n");
    let out = sys
        .login(&u, "-agent-rsh", &["-c", "ls /root"])
        .env(agent_rsh::confine::probe::SIMULATE_ENV, "mountns,pidns")
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert!(
        err.contains("ignoring $AGENT_RSH_SIMULATE_MISSING"),
        "{err}"
    );
    assert!(
        err.contains("No such file or directory"),
        "the mount view holds: /root is not there: {err}"
    );
    sys.write_policy(
        "[commands]\nallow = [\"echo\"]\n[audit]\nlogin = false\n[shell]\nallow_policy_env = true\n",
    );
    let out = sys
        .login(&u, "-agent-rsh", &["-c", "echo hi"])
        .env(agent_rsh::confine::probe::SIMULATE_ENV, "userns")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "hi\n");
    assert!(!text(&out.stderr).contains("ignoring"));

    // A broken section is an error for everyone.
    sys.write_policy("[commands]\nallow = [\"echo\"]\n[users.nobody]\ncommands.alow = []\n");
    let out = sys
        .login(&u, "-agent-rsh", &["-c", "echo hi"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125));
    assert!(
        text(&out.stderr).contains("users.nobody"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn policy_env_is_honoured_only_when_the_system_policy_allows_it() {
    if !ready(
        "policy_env_is_honoured_only_when_the_system_policy_allows_it",
        &[],
    ) {
        return;
    }
    let sys = System::new(&BASE.replace("\"ls\", ", ""));
    let u = User::with_home(&[]);
    let own = sys.shared("own.toml");
    std::fs::write(
        &own,
        "confinement = \"best-effort\"\naudit.login = false\n[commands]\nallow = [\"ls\"]\n",
    )
    .unwrap();
    chmod(&own, 0o644);

    let mut c = sys.login(&u, "agent-rsh", &["-c", "ls"]);
    c.env("AGENT_RSH_POLICY", &own);
    let out = c.output().unwrap();
    assert_eq!(out.status.code(), Some(126), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("ignoring $AGENT_RSH_POLICY"));

    sys.write_policy(&format!(
        "{}[shell]\nallow_policy_env = true\n",
        BASE.replace("\"ls\", ", "")
            .replace("@AUDIT@", &sys.audit().display().to_string())
    ));
    let mut c = sys.login(&u, "agent-rsh", &["-c", "ls"]);
    c.env("AGENT_RSH_POLICY", &own);
    let out = c.output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

#[test]
fn user_and_group_sections_change_what_one_account_may_run() {
    if !ready(
        "user_and_group_sections_change_what_one_account_may_run",
        &[],
    ) {
        return;
    }
    let g = Group::new();
    let policy = format!(
        "{BASE}\n[groups.{g}]\ncommands.allow = {{ add = [\"sleep\", \"wc\"] }}\n\n[users.@A@]\ncommands.allow = {{ remove = [\"cat\"] }}\n",
        g = g.0
    );
    let alice = User::with_home(&[]);
    let bob = User::with_home(&[&g.0]);
    let carol = User::with_home(&[&g.0]);
    let sys = System::new(&policy.replace("@A@", &alice.name));
    std::fs::write(alice.home.join("f"), "one\n").unwrap();
    std::fs::write(bob.home.join("f"), "one\n").unwrap();
    let code = |u: &User, cmd: &str| {
        let out = sys.login(u, "agent-rsh", &["-c", cmd]).output().unwrap();
        (out.status.code(), text(&out.stdout), text(&out.stderr))
    };
    // alice: her section removed cat; not in the group, so no wc.
    assert_eq!(code(&alice, "cat f").0, Some(126));
    assert!(code(&alice, "wc -l f").2.contains("command.not-allowed"));
    assert_eq!(code(&alice, "echo a").1, "a\n");
    // bob: the group's section added wc; cat is still his.
    let (_, out, err) = code(&bob, "wc -l f");
    assert_eq!(out, "1 f\n", "{err}");
    assert_eq!(code(&bob, "cat f").1, "one\n");
    // carol shares the group: wc too.
    assert_eq!(code(&carol, "wc -l f").0, Some(1));
}

#[test]
fn warning_limit_ends_a_session_and_the_audit_log_has_every_line() {
    if !ready(
        "warning_limit_ends_a_session_and_the_audit_log_has_every_line",
        &[],
    ) {
        return;
    }
    let sys = System::new(&format!("{BASE}[shell]\nwarning_limit = 3\n"));
    let u = User::with_home(&[]);
    std::fs::create_dir(u.home.join("sub")).unwrap();
    std::fs::write(u.home.join("sub/inner"), "").unwrap();
    std::os::unix::fs::symlink("/", u.home.join("up")).unwrap();
    let mut c = sys.login(&u, "-agent-rsh", &[]);
    c.env("SECRET_TOKEN", "hunter2-do-not-log");
    let script =
        "help\necho one\ncd sub\npwd\nls\n# a comment\ncd ..\ncd ..\ncd up\nid\necho not-reached\n";
    let out = run_with_stdin(c, script.as_bytes());
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(126), "{stderr}");
    assert!(stdout.contains("one\n"));
    assert!(
        stdout.contains("Commands you may run:\n  cat  echo  ls  sleep\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("{}/sub\n", u.home.display())),
        "{stdout}"
    );
    assert!(stdout.contains("inner\n"));
    assert!(!stdout.contains("not-reached"));
    assert!(stderr.contains("cd.escape"), "{stderr}");
    assert!(stderr.contains("[refusal 3 of 3]"), "{stderr}");
    assert!(stderr.contains("the session ends"), "{stderr}");

    let raw = std::fs::read_to_string(sys.audit()).unwrap();
    assert!(!raw.contains("hunter2"), "an env value leaked into the log");
    let recs = sys.audit_records();
    let events: Vec<_> = recs.iter().map(|r| r["event"].as_str().unwrap()).collect();
    assert_eq!(events.first(), Some(&"session-start"));
    assert_eq!(events.last(), Some(&"session-end"));
    let cmds: Vec<_> = recs
        .iter()
        .filter(|r| r["event"] == "command")
        .map(|r| {
            (
                r["command"].as_str().unwrap(),
                r["verdict"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        cmds,
        [
            ("help", "allow"),
            ("echo one", "allow"),
            ("cd sub", "allow"),
            ("pwd", "allow"),
            ("ls", "allow"),
            ("cd ..", "allow"),
            ("cd ..", "deny"),
            ("cd up", "deny"),
            ("id", "deny"),
        ]
    );
    let end = recs.last().unwrap();
    assert_eq!(end["detail"], "warning limit");
    assert_eq!(end["refusals"], 3);
    assert_eq!(end["exitCode"], 126);
    for r in &recs {
        assert_eq!(r["user"], u.name.as_str());
        assert_eq!(r["face"], "script");
        assert!(r["time"].as_str().unwrap().ends_with('Z'));
    }
}

#[test]
fn a_removed_current_directory_returns_the_session_home() {
    if !ready("a_removed_current_directory_returns_the_session_home", &[]) {
        return;
    }
    let sys = System::new(&BASE.replace("\"sleep\"", "\"sleep\", \"rmdir\""));
    let u = User::with_home(&[]);
    std::fs::create_dir(u.home.join("sub")).unwrap();
    let script = "cd sub\nrmdir ../sub\nls\npwd\n";
    let out = run_with_stdin(sys.login(&u, "-agent-rsh", &[]), script.as_bytes());
    let stderr = text(&out.stderr);
    assert!(stderr.contains("the current directory is gone"), "{stderr}");
    assert_eq!(text(&out.stdout), format!("{}\n", u.home.display()));
    assert_eq!(out.status.code(), Some(0));
    let end = sys.audit_records().pop().unwrap();
    assert_eq!(end["event"], "session-end");
    assert_eq!(end["refusals"], 0);
}

#[test]
fn concurrent_sessions_leave_only_whole_lines_in_the_audit_log() {
    if !ready(
        "concurrent_sessions_leave_only_whole_lines_in_the_audit_log",
        &["tmux", "pgrep"],
    ) {
        return;
    }
    let sys = System::new(BASE);
    let u = User::with_home(&[]);
    let long = "y".repeat(3000);
    let lines = 60;
    let script: String = (0..lines).map(|i| format!("echo {i}-{long}\n")).collect();
    let spawn = || {
        let mut c = sys.login(&u, "-agent-rsh", &[]);
        c.stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = c.spawn().unwrap();
        let mut w = child.stdin.take().unwrap();
        w.write_all(script.as_bytes()).unwrap();
        child
    };
    let (a, b) = (spawn(), spawn());
    for c in [a, b] {
        let out = c.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    }
    let raw = std::fs::read_to_string(sys.audit()).unwrap();
    assert!(raw.ends_with('\n'));
    let recs = sys.audit_records();
    assert_eq!(recs.len(), 2 * (lines + 2));
    let mut sessions = std::collections::BTreeMap::<u64, usize>::new();
    for r in &recs {
        if r["event"] == "command" {
            assert!(r["command"].as_str().unwrap().ends_with(&long));
            *sessions.entry(r["session"].as_u64().unwrap()).or_default() += 1;
        }
    }
    assert_eq!(
        sessions.values().copied().collect::<Vec<_>>(),
        [lines, lines]
    );
}

/// A tmux server of its own, killed on drop.
/// Its socket lives in a directory of its own, removed with it.
struct Tmux {
    dir: tempfile::TempDir,
}

impl Tmux {
    fn new() -> Tmux {
        Tmux {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn cmd(&self) -> Command {
        let mut c = Command::new("tmux");
        c.arg("-S").arg(self.dir.path().join("socket"));
        c.args(["-f", "/dev/null"]);
        c
    }

    fn screen(&self) -> String {
        let out = self
            .cmd()
            .args(["capture-pane", "-p", "-J", "-S", "-200", "-t", "t"])
            .output()
            .unwrap();
        text(&out.stdout)
    }

    fn keys(&self, keys: &[&str]) {
        let st = self
            .cmd()
            .args(["send-keys", "-t", "t"])
            .args(keys)
            .status()
            .unwrap();
        assert!(st.success());
    }

    /// Waits until `pred` holds for the screen; panics with the screen.
    fn wait(&self, what: &str, pred: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let s = self.screen();
            if pred(&s) {
                return s;
            }
            if Instant::now() > deadline {
                panic!("waiting for {what}; the screen:\n{s}");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.cmd().arg("kill-server").output();
    }
}

fn user_has_process(user: &str, name: &str) -> bool {
    Command::new("pgrep")
        .args(["-u", user, "-x", name])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// The login shell of `u` in a fresh tmux terminal; its exit status goes
/// to `status`.
fn start_shell(sys: &System, u: &User, status: &Path) -> Tmux {
    let login = sys.login(u, "-agent-rsh", &[]);
    let mut line = String::new();
    for a in std::iter::once(login.get_program()).chain(login.get_args()) {
        line.push_str(&format!(
            "'{}' ",
            a.to_str().unwrap().replace('\'', r"'\''")
        ));
    }
    let tmux = Tmux::new();
    let st = tmux
        .cmd()
        .args(["new-session", "-d", "-s", "t", "-x", "160", "-y", "50"])
        .arg(format!(
            "{line}; echo $? > '{}'; sleep 60",
            status.display()
        ))
        .status()
        .unwrap();
    assert!(st.success());
    tmux
}

/// An account without a cgroup of its own cannot have `limits.memory_bytes`
/// enforced: its login session says so, and how to silence it, once, not
/// after every command.
#[test]
fn the_unenforced_memory_bound_is_said_once_a_session() {
    if !ready("the_unenforced_memory_bound_is_said_once_a_session", &[]) {
        return;
    }
    let sys = System::new(&format!("{BASE}[limits]\nmemory_bytes = 1073741824\n"));
    let u = User::with_home(&[]);
    let out = run_with_stdin(
        sys.login(&u, "-agent-rsh", &[]),
        b"echo one\necho two\necho three\n",
    );
    assert!(out.status.success(), "{out:?}");
    assert_eq!(text(&out.stdout), "one\ntwo\nthree\n");
    let said = |err: &str| {
        err.lines()
            .filter(|l| l.contains("limits.memory_bytes (1073741824 bytes) is not enforced"))
            .count()
    };
    let err = text(&out.stderr);
    // One command alone says it when nothing enforces the bound here (a
    // cgroup delegated to the account would): a session of three says it
    // as often, once.
    let one = sys
        .login(&u, "agent-rsh", &["-c", "echo one"])
        .output()
        .unwrap();
    let alone = text(&one.stderr);
    assert_eq!(said(&err), said(&alone), "{err}\n---\n{alone}");
    assert!(said(&err) <= 1, "{err}");
    if said(&err) == 1 {
        assert!(
            err.contains("`limits.memory_bytes = 0` in the policy silences this"),
            "{err}"
        );
    }
}

#[test]
fn a_planted_history_symlink_is_not_followed() {
    if !ready("a_planted_history_symlink_is_not_followed", &[]) {
        return;
    }
    let sys = System::new(BASE);
    let u = User::with_home(&[]);
    // A file the account may write but its commands may not: agent-rsh
    // itself is unconfined, so it must not be steered into writing it.
    let victim = sys.shared("victim");
    std::fs::write(&victim, "").unwrap();
    chmod(&victim, 0o600);
    assert!(
        Command::new("chown")
            .arg(&u.name)
            .arg(&victim)
            .status()
            .unwrap()
            .success()
    );
    std::os::unix::fs::symlink(&victim, u.home.join(".agent-rsh_history")).unwrap();
    let status = sys.shared("status");
    let tmux = start_shell(&sys, &u, &status);
    let prompt = format!("{}:~$ ", u.name);
    tmux.wait("the prompt", |s| s.contains(&prompt));
    tmux.keys(&["echo planted", "Enter"]);
    // The next prompt too: a Ctrl-D sent before the shell reads again can
    // be lost to the terminal's cooked mode.
    tmux.wait("the output", |s| {
        s.lines().any(|l| l == "planted") && s.matches(prompt.as_str()).count() == 2
    });
    tmux.keys(&["C-d"]);
    wait_for("the shell to exit", || {
        std::fs::read_to_string(&status).is_ok_and(|s| s.ends_with('\n'))
    });
    assert_eq!(std::fs::read_to_string(&status).unwrap().trim(), "0");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "");
    assert!(u.home.join(".agent-rsh_history").is_symlink());
}

#[test]
fn interactive_login_shell_in_a_terminal() {
    if !ready("interactive_login_shell_in_a_terminal", &["tmux"]) {
        return;
    }
    let sys = System::new(BASE);
    let u = User::with_home(&[]);
    let status = sys.shared("status");
    let tmux = start_shell(&sys, &u, &status);
    let prompt = format!("{}:~$ ", u.name);
    let prompts = |s: &str| s.matches(prompt.as_str()).count();
    tmux.wait("the first prompt", |s| prompts(s) == 1);

    tmux.keys(&["echo hello-from-the-shell", "Enter"]);
    tmux.wait("the command's output", |s| {
        s.lines().any(|l| l == "hello-from-the-shell") && prompts(s) == 2
    });

    tmux.keys(&["id", "Enter"]);
    let s = tmux.wait("the denial", |s| prompts(s) == 3);
    assert!(
        s.contains("denied (command.not-allowed)") && s.contains("hint: type `help`"),
        "{s}"
    );

    tmux.keys(&["cd ..", "Enter"]);
    let s = tmux.wait("cd refused", |s| prompts(s) == 4);
    assert!(s.contains("denied (cd.escape)"), "{s}");

    tmux.keys(&["sleep 30", "Enter"]);
    wait_for("sleep to start", || user_has_process(&u.name, "sleep"));
    // No job control: Ctrl-Z must not stop the command (a stopped command
    // would not die of the Ctrl-C that follows), nor the shell.
    tmux.keys(&["C-z"]);
    tmux.keys(&["C-c"]);
    tmux.wait("the prompt after Ctrl-C", |s| prompts(s) == 5);
    wait_for("sleep to be gone", || !user_has_process(&u.name, "sleep"));

    // The shell is still there and still works.
    tmux.keys(&["echo still-alive", "Enter"]);
    tmux.wait("output after Ctrl-C", |s| {
        s.lines().any(|l| l == "still-alive") && prompts(s) == 6
    });

    tmux.keys(&["C-d"]);
    wait_for("the shell to exit", || {
        std::fs::read_to_string(&status).is_ok_and(|s| s.ends_with('\n'))
    });
    assert_eq!(std::fs::read_to_string(&status).unwrap().trim(), "0");

    let history = std::fs::read_to_string(u.home.join(".agent-rsh_history")).unwrap();
    assert!(history.contains("echo hello-from-the-shell\n"), "{history}");
    let recs = sys.audit_records();
    let cmd_of = |r: &Value| r["command"].as_str().map(String::from);
    let sleep = recs
        .iter()
        .find(|r| cmd_of(r).as_deref() == Some("sleep 30"))
        .unwrap();
    // The terminal's SIGINT reaches the command and agent-rsh at once:
    // either may be seen first, both mean 130.
    assert_eq!(sleep["exitCode"], 130, "{sleep}");
    assert_eq!(sleep["face"], "interactive");
    assert!(sleep["tty"].as_str().unwrap().starts_with("/dev/pts/"));
    assert_eq!(recs.last().unwrap()["event"], "session-end");
}

#[test]
fn hangup_ends_the_session_and_the_running_command() {
    if !ready("hangup_ends_the_session_and_the_running_command", &["tmux"]) {
        return;
    }
    let sys = System::new(BASE);
    let u = User::with_home(&[]);
    let tmux = start_shell(&sys, &u, &sys.shared("status"));
    let prompt = format!("{}:~$ ", u.name);
    tmux.wait("the prompt", |s| s.contains(&prompt));
    tmux.keys(&["sleep 30", "Enter"]);
    wait_for("sleep to start", || user_has_process(&u.name, "sleep"));
    // Closing the terminal sends SIGHUP to the session.
    let _ = tmux.cmd().args(["kill-session", "-t", "t"]).status();
    wait_for("the session-end record", || {
        sys.audit_records()
            .last()
            .is_some_and(|r| r["event"] == "session-end")
    });
    wait_for("sleep to be gone", || !user_has_process(&u.name, "sleep"));
    let recs = sys.audit_records();
    let sleep = recs.iter().find(|r| r["command"] == "sleep 30").unwrap();
    assert_eq!(sleep["status"], "interrupted");
    assert_eq!(recs.last().unwrap()["detail"], "signal 1");
}

#[test]
fn agent_runs_are_audited_only_when_asked_and_without_env_values() {
    if !ready(
        "agent_runs_are_audited_only_when_asked_and_without_env_values",
        &[],
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.jsonl");
    let policy = dir.path().join("p.toml");
    let write = |agent: bool| {
        std::fs::write(
            &policy,
            format!(
                "[commands]\nallow = [\"echo\"]\n[audit]\npath = \"{}\"\nagent = {agent}\n",
                log.display()
            ),
        )
        .unwrap()
    };
    let run = || {
        Command::new(bin())
            .args(["run", "--policy"])
            .arg(&policy)
            .args(["--env", "API_TOKEN=s3cret-value", "--", "echo", "hi"])
            .output()
            .unwrap()
    };
    write(false);
    assert_eq!(run().status.code(), Some(0));
    assert!(!log.exists(), "audit.agent defaults to off");
    write(true);
    let out = run();
    assert_eq!(text(&out.stdout), "hi\n");
    let raw = std::fs::read_to_string(&log).unwrap();
    assert!(!raw.contains("s3cret"), "{raw}");
    let rec: Value = serde_json::from_str(raw.trim()).unwrap();
    assert_eq!(rec["face"], "run");
    assert_eq!(rec["envNames"], serde_json::json!(["API_TOKEN"]));
    assert_eq!(rec["verdict"], "allow");
    assert_eq!(rec["exitCode"], 0);
}

/// An account whose home is `/` (or a system directory) would get the
/// whole system as its write scope: the login is refused before anything
/// runs, with the rule and what to change.
#[test]
fn a_home_that_is_a_system_directory_refuses_the_login() {
    if !ready("a_home_that_is_a_system_directory_refuses_the_login", &[]) {
        return;
    }
    let sys = System::new(BASE);
    let u = User::with_foreign_home(Path::new("/"));
    let out = sys
        .login(&u, "agent-rsh", &["-c", "echo hi"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(126), "{}", text(&out.stderr));
    assert!(out.stdout.is_empty());
    let err = text(&out.stderr);
    assert!(
        err.contains("denied (workspace.system): the workspace / is the root directory"),
        "{err}"
    );
    assert!(err.contains("usermod -d"), "{err}");
    assert_eq!(err.lines().count(), 1, "one line: {err}");
}

#[test]
fn compound_lines_run_in_the_interpreter_from_dash_c_and_the_shell() {
    if !ready(
        "compound_lines_run_in_the_interpreter_from_dash_c_and_the_shell",
        &[],
    ) {
        return;
    }
    let sys = System::new(BASE);
    let u = User::with_home(&[]);
    std::fs::create_dir(u.home.join("sub")).unwrap();
    std::fs::write(u.home.join("sub/f"), "x\n").unwrap();
    chmod(&u.home.join("sub"), 0o777);
    let out = sys
        .login(
            &u,
            "agent-rsh",
            &["-c", "cd sub && ls | cat; echo done > out.txt"],
        )
        .output()
        .unwrap();
    assert_eq!(text(&out.stdout), "f\n", "{}", text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        std::fs::read_to_string(u.home.join("sub/out.txt")).unwrap(),
        "done\n"
    );
    // In the interactive shell a compound line's cd lasts for that line;
    // `cd DIR` alone is the session's.
    let script = "cd sub && ls\nls\ncd sub\nls\n";
    let out = run_with_stdin(sys.login(&u, "-agent-rsh", &[]), script.as_bytes());
    assert_eq!(
        text(&out.stdout),
        "f\nout.txt\nsub\nf\nout.txt\n",
        "{}",
        text(&out.stderr)
    );
}

/// `-c` on the account's own terminal: the command reads what is typed
/// there and sees a terminal, but one agent-rsh allocated for the run, so
/// changing fd 0's mode and times leaves the account's terminal as it was.
#[test]
fn dash_c_on_a_terminal_cannot_change_the_terminal() {
    if !ready(
        "dash_c_on_a_terminal_cannot_change_the_terminal",
        &["tmux", "python3"],
    ) {
        return;
    }
    use std::os::unix::fs::MetadataExt;
    let sys = System::new(
        "[commands]\nallow = [\"python3\"]\n[packs]\noff = [\"python\"]\n[audit]\npath = \"@AUDIT@\"\n",
    );
    let u = User::with_home(&[]);
    std::fs::write(
        u.home.join("attack.py"),
        r#"import os, sys
print("ready", flush=True)
line = sys.stdin.readline()
print("got", repr(line), "tty", os.isatty(0), flush=True)
for name, f in (("fchmod", lambda: os.fchmod(0, 0o666)), ("utime", lambda: os.utime(0, (1, 1)))):
    try:
        f()
        print(name, "ok", flush=True)
    except OSError as e:
        print(name, e.errno, flush=True)
"#,
    )
    .unwrap();
    let login = sys.login(&u, "agent-rsh", &["-c", "python3 attack.py"]);
    let q = |s: &str| format!("'{}'", s.replace('\'', r"'\''"));
    let mut line = String::new();
    for a in std::iter::once(login.get_program()).chain(login.get_args()) {
        line.push_str(&q(a.to_str().unwrap()));
        line.push(' ');
    }
    let (out, status) = (sys.shared("out"), sys.shared("status"));
    let script = sys.shared("pane.sh");
    std::fs::write(
        &script,
        format!(
            "read go\n{line} > {} 2>&1\necho $? > {}\nsleep 600\n",
            q(out.to_str().unwrap()),
            q(status.to_str().unwrap())
        ),
    )
    .unwrap();
    let tmux = Tmux::new();
    let st = tmux
        .cmd()
        .args(["new-session", "-d", "-s", "t", "-x", "120", "-y", "30"])
        .arg(format!("sh {}", q(script.to_str().unwrap())))
        .status()
        .unwrap();
    assert!(st.success());
    let tty = tmux
        .cmd()
        .args(["display-message", "-p", "-t", "t", "#{pane_tty}"])
        .output()
        .unwrap();
    let tty = PathBuf::from(text(&tty.stdout).trim());
    // The account's own terminal, as after a login.
    std::os::unix::fs::chown(&tty, Some(u.uid), None).unwrap();
    let meta = |p: &Path| {
        let m = std::fs::metadata(p).unwrap();
        (m.mode(), m.uid(), m.gid(), m.atime(), m.mtime())
    };
    let before = meta(&tty);
    tmux.keys(&["go", "Enter"]);
    let read = |p: &Path| std::fs::read_to_string(p).unwrap_or_default();
    wait_for("the command to be ready", || read(&out).contains("ready"));
    tmux.keys(&["typed on the terminal", "Enter"]);
    wait_for("the command to end", || read(&status).ends_with('\n'));
    let said = read(&out);
    assert_eq!(read(&status).trim(), "0", "{said}");
    assert!(
        said.contains("got 'typed on the terminal\\n' tty True"),
        "{said}"
    );
    let after = meta(&tty);
    assert_eq!(
        (after.0, after.1, after.2),
        (before.0, before.1, before.2),
        "the terminal's mode or owner changed; the command said:\n{said}"
    );
    assert!(
        after.3 >= before.3 && after.4 >= before.4,
        "the terminal's times went back: {before:?} -> {after:?}; the command said:\n{said}"
    );
}
