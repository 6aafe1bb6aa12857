//! End-to-end tests of `agent-rsh run` and `check`: the real binary, real
//! processes, files and signals.

use crate::common::{
    self, BIN, TestPolicy, json, marker, policy, sleeps_with, wait_for, wait_until, wait_until_gone,
};
use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// Allows a shell and a few tools, for tests of the exec machinery itself.
fn shell_policy() -> TestPolicy {
    policy(
        r#"
[commands]
allow = ["bash", "sleep", "setsid", "echo", "env", "cat", "grep", "head", "touch", "ls", "true"]
"#,
    )
}

/// agent-rsh (as assert_cmd drives it) with no policy from the environment.
fn agent() -> Command {
    let mut c = Command::new(BIN);
    c.env_remove("AGENT_RSH_POLICY");
    c
}

#[test]
fn readme_first_command_lists_the_fresh_workspace() {
    let out = agent().args(["run", "ls -la"]).assert().success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).to_string();
    assert!(text.contains(" .\n") && text.contains(" ..\n"), "{text}");
    assert_eq!(
        text.lines().count(),
        3,
        "a fresh workspace is empty: {text}"
    );
}

#[test]
fn echo_text_json_and_events() {
    agent()
        .args(["run", "echo hello"])
        .assert()
        .success()
        .stdout("hello\n");

    let out = agent()
        .args(["run", "--json", "echo hello"])
        .assert()
        .success();
    let r = json(&out.get_output().stdout);
    assert_eq!(r["schema"], "agent-rsh.run/1");
    assert_eq!(r["status"], "exited");
    assert_eq!(r["exitCode"], 0);
    assert_eq!(r["stdout"], "hello\n");
    assert_eq!(r["argv"], serde_json::json!(["echo", "hello"]));
    assert!(r["durationMs"].is_u64());
    assert!(r["confinement"].is_object());

    let out = agent()
        .args(["run", "--events", "echo hello"])
        .assert()
        .success();
    let lines: Vec<Value> = out
        .get_output()
        .stdout
        .split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .map(json)
        .collect();
    assert_eq!(lines.first().unwrap()["type"], "start");
    assert!(
        lines
            .iter()
            .any(|l| l["type"] == "output" && l["data"] == "hello\n")
    );
    let last = lines.last().unwrap();
    assert_eq!(last["type"], "exit");
    assert_eq!(last["exitCode"], 0);
}

#[test]
fn child_exit_code_and_signal_are_reported() {
    let p = shell_policy();
    let pol = p.path.to_str().unwrap();
    agent()
        .args(["run", "--policy", pol, "bash -c 'exit 7'"])
        .assert()
        .code(7);
    let out = agent()
        .args(["run", "--json", "--policy", pol, "bash -c 'kill -SEGV $$'"])
        .assert()
        .code(128 + 11);
    let r = json(&out.get_output().stdout);
    assert_eq!(r["status"], "signaled");
    assert_eq!(r["signal"], 11);
}

#[test]
fn refusals_name_rule_and_offset_and_run_nothing() {
    // syntax = "simple" refuses what it always refused, with the same
    // rules and offsets.
    let ws = tempfile::tempdir().unwrap();
    let p = policy(
        r#"
syntax = "simple"
max_command_bytes = 8192
[commands]
allow = ["bash", "sleep", "setsid", "echo", "env", "cat", "grep", "head", "touch", "ls", "true"]
"#,
    );
    let pol = p.path.to_str().unwrap();
    let long = format!("touch {}", "a".repeat(9000));
    let cases: &[(&str, &str, Option<u64>)] = &[
        ("touch x; touch y", "lex.list", Some(7)),
        ("touch x | wc", "lex.pipe", Some(8)),
        ("touch $(id)", "lex.expansion", Some(6)),
        ("touch `id`", "lex.expansion", Some(6)),
        ("touch *", "lex.glob", Some(6)),
        ("cat ~/.ssh/id_rsa", "lex.tilde", Some(4)),
        ("FOO=1 touch x", "lex.assignment", Some(0)),
        ("./touch x", "command.path", None),
        ("/bin/sh -c 'touch x'", "command.path", None),
        ("id", "command.not-allowed", None),
        (&long, "lex.too-long", Some(8192)),
        ("touch x\ntouch y", "lex.newline", Some(7)),
    ];
    for (cmd, rule, offset) in cases {
        let out = agent()
            .args(["run", "--json", "--policy", pol, "--workspace"])
            .arg(ws.path())
            .arg("--")
            .arg(cmd)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(126), "{cmd:?}");
        let r = json(&out.stdout);
        assert_eq!(r["status"], "denied", "{cmd:?}");
        assert_eq!(r["denial"]["rule"], *rule, "{cmd:?}");
        if let Some(o) = offset {
            assert_eq!(r["denial"]["offset"], *o, "{cmd:?}");
        }
        assert!(r["denial"]["hint"].as_str().is_some_and(|h| !h.is_empty()));
    }
    let left: Vec<_> = std::fs::read_dir(ws.path()).unwrap().collect();
    assert!(left.is_empty(), "a refused command created files: {left:?}");

    // Text mode: one line with the rule, one with the hint, on stderr.
    agent()
        .args(["run", "--policy", pol, "ls; id"])
        .assert()
        .code(126)
        .stdout("")
        .stderr(predicate::str::contains("lex.list").and(predicate::str::contains("hint:")));
}

#[test]
fn quoted_metacharacters_are_literal() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("file"), "x\na|b;c\nab\n").unwrap();
    agent()
        .args(["run", "--workspace"])
        .arg(ws.path())
        .arg(r#"grep "a|b;c" file"#)
        .assert()
        .success()
        .stdout("a|b;c\n");
}

#[test]
fn argv_mode_takes_words_verbatim_with_the_same_checks() {
    agent()
        .args(["run", "--argv", "--", "echo", "a;b", "$HOME", "*"])
        .assert()
        .success()
        .stdout("a;b $HOME *\n");
    agent()
        .args(["run", "--argv", "--json", "--", "echo", "a\nb"])
        .assert()
        .code(126)
        .stdout(predicate::str::contains("lex.newline"));
    agent()
        .args(["run", "--argv", "--", "sh", "-c", "id"])
        .assert()
        .code(126);
}

#[test]
fn deadline_kills_in_time_with_exit_124() {
    let p = shell_policy();
    let started = Instant::now();
    let out = agent()
        .args(["run", "--json", "--policy"])
        .arg(&p.path)
        .args(["--timeout", "500", "--", "sleep", "10"])
        .assert()
        .code(124);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    let r = json(&out.get_output().stdout);
    assert_eq!(r["status"], "timedOut");
    assert_eq!(r["timedOut"], true);
}

#[test]
fn deadline_escalates_to_sigkill_after_grace() {
    let p = policy(
        r#"
[commands]
allow = ["bash"]
[limits]
kill_grace_ms = 300
"#,
    );
    let out = agent()
        .args(["run", "--json", "--policy"])
        .arg(&p.path)
        .args([
            "--timeout",
            "300",
            "--",
            "bash -c 'trap \"\" TERM; echo ready; while :; do :; done'",
        ])
        .assert()
        .code(124);
    let r = json(&out.get_output().stdout);
    assert_eq!(r["stdout"], "ready\n");
    assert_eq!(r["signal"], 9);
}

#[test]
fn daemonized_grandchild_does_not_survive_the_run() {
    let p = shell_policy();
    let marker = marker(4242);
    agent()
        .args(["run", "--policy"])
        .arg(&p.path)
        .arg(format!(
            "bash -c '(setsid sleep {marker} </dev/null >/dev/null 2>&1 &); (sleep {marker} &) ; echo started'"
        ))
        .assert()
        .success()
        .stdout("started\n");
    assert_eq!(wait_until_gone(&marker), Vec::<String>::new());
}

#[test]
fn sigkill_of_agent_rsh_kills_the_tree() {
    let p = shell_policy();
    let marker = marker(4343);
    let mut child = std::process::Command::new(BIN)
        .args(["run", "--policy"])
        .arg(&p.path)
        .arg(format!(
            "bash -c '(setsid sleep {marker} &); sleep {marker}'"
        ))
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    wait_until(|| sleeps_with(&marker).len() == 2);
    assert_eq!(sleeps_with(&marker).len(), 2, "both sleeps started");
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(wait_until_gone(&marker), Vec::<String>::new());
}

#[test]
fn sigterm_to_agent_rsh_is_forwarded_and_reported_interrupted() {
    let p = shell_policy();
    let marker = marker(4444);
    let child = std::process::Command::new(BIN)
        .args(["run", "--json", "--policy"])
        .arg(&p.path)
        .arg(format!("sleep {marker}"))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    // One sleep: the run's only process with the marker (agent-rsh's own
    // command line has it too, but is not a sleep).
    wait_for("the sleep to start", || sleeps_with(&marker).len() == 1);
    // SAFETY: kill(2) on our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(128 + 15));
    let r = json(&out.stdout);
    assert_eq!(r["status"], "interrupted");
    assert_eq!(r["signal"], 15);
    assert_eq!(wait_until_gone(&marker), Vec::<String>::new());
}

#[test]
// Reaped with wait4 below, which std's Child does not know about.
#[allow(clippy::zombie_processes)]
fn one_gib_of_output_stays_bounded() {
    if !common::ready("one_gib_of_output_stays_bounded", false, &["python3"]) {
        return;
    }
    // The peak is read by a small python3 parent through wait4. Not by this
    // test process: a child's ru_maxrss includes the address space it was
    // forked (or vforked) from up to its exec, so a busy test harness's own
    // size would be counted as agent-rsh's.
    const MEASURE: &str = "import os,sys\n\
pid=os.posix_spawn(sys.argv[1],sys.argv[1:],dict(os.environ))\n\
_,st,ru=os.wait4(pid,0)\n\
sys.stderr.write('maxrss_kib=%d exit=%d\\n'%(ru.ru_maxrss,os.waitstatus_to_exitcode(st)))\n";
    let out = std::process::Command::new("python3")
        .args([
            "-c",
            MEASURE,
            BIN,
            "run",
            "--json",
            "head -c 1073741824 /dev/zero",
        ])
        .env_remove("AGENT_RSH_POLICY")
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&out.stderr);
    let r = json(&out.stdout);
    assert_eq!(r["status"], "exited");
    assert_eq!(r["stdoutBytes"], 1u64 << 30);
    assert_eq!(r["truncated"], true);
    let text = r["stdout"].as_str().unwrap();
    assert!(text.starts_with('\0') && text.ends_with('\0'));
    assert!(text.contains("bytes elided]"));
    assert!(text.len() < 2 << 20, "capture is bounded: {}", text.len());
    let kib: u64 = report
        .lines()
        .find_map(|l| l.strip_prefix("maxrss_kib="))
        .and_then(|l| l.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no measurement: {report}"));
    assert!(kib / 1024 < 64, "peak RSS {} MiB", kib / 1024);
}

#[test]
fn events_arrive_live() {
    let p = shell_policy();
    let mut child = std::process::Command::new(BIN)
        .args(["run", "--events", "--policy"])
        .arg(&p.path)
        .arg("bash -c 'echo first; sleep 1; echo second'")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut arrivals = Vec::new();
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let v: Value = serde_json::from_str(&line.unwrap()).unwrap();
        if v["type"] == "output" {
            arrivals.push((Instant::now(), v["data"].as_str().unwrap().to_string()));
        }
        if v["type"] == "exit" {
            assert_eq!(v["exitCode"], 0);
        }
    }
    child.wait().unwrap();
    assert_eq!(arrivals.len(), 2, "{arrivals:?}");
    assert_eq!(arrivals[0].1, "first\n");
    let gap = arrivals[1].0 - arrivals[0].0;
    assert!(
        gap >= Duration::from_millis(500),
        "first output was not live: {gap:?}"
    );
}

#[test]
fn cwd_and_env_escapes_are_refused() {
    let ws = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink("/", ws.path().join("root")).unwrap();
    std::fs::create_dir(ws.path().join("sub")).unwrap();
    let run = |args: &[&str]| {
        let out = agent()
            .args(["run", "--json", "--workspace"])
            .arg(ws.path())
            .args(args)
            .output()
            .unwrap();
        (out.status.code(), json(&out.stdout))
    };
    for (args, rule) in [
        (&["--cwd", "../..", "pwd"][..], "cwd.escape"),
        (&["--cwd", "/", "pwd"][..], "cwd.absolute"),
        (&["--cwd", "root", "pwd"][..], "cwd.escape"),
        (&["--env", "LD_PRELOAD=x", "pwd"][..], "env.dangerous"),
        (&["--env", "BASH_ENV=x", "pwd"][..], "env.dangerous"),
    ] {
        let (code, r) = run(args);
        assert_eq!(code, Some(126), "{args:?}");
        assert_eq!(r["denial"]["rule"], rule, "{args:?}");
    }
    let (code, r) = run(&["--cwd", "sub", "pwd"]);
    assert_eq!(code, Some(0));
    let sub = ws.path().canonicalize().unwrap().join("sub");
    assert_eq!(r["stdout"], format!("{}\n", sub.display()));
}

/// HOME, TMPDIR, the XDG directories, the tool caches and PATH are pinned:
/// no face lets a call point one elsewhere. The attack: with
/// XDG_CONFIG_HOME pointed at a directory the run just wrote, `git x`
/// reads an alias that runs `id`, a program the policy does not allow, and
/// with confinement off nothing else would stop it. Each face is refused
/// before anything runs, naming the rule.
#[test]
fn pinned_variables_are_refused_from_every_face() {
    let p = policy(
        r#"
confinement = "off"
[commands]
allow = ["mkdir", "printf", "git", "env"]
"#,
    );
    let plant = r#"mkdir -p c/git && printf "[alias]\n\tx = !id\n" > c/git/config"#;
    let faces: [(&[&str], String, &str); 4] = [
        (
            &[],
            format!("{plant} && XDG_CONFIG_HOME=c git x"),
            "env.dangerous",
        ),
        (
            &[],
            format!("{plant} && export XDG_CONFIG_HOME=c && git x"),
            "env.dangerous",
        ),
        (
            &[],
            format!("{plant} && env XDG_CONFIG_HOME=c git x"),
            "wrapper.env.dangerous-variable",
        ),
        (
            &["--env", "XDG_CONFIG_HOME=c"],
            format!("{plant} && git x"),
            "env.dangerous",
        ),
    ];
    for (args, cmd, rule) in &faces {
        let ws = tempfile::tempdir().unwrap();
        let out = agent()
            .args(["run", "--json", "--policy"])
            .arg(&p.path)
            .arg("--workspace")
            .arg(ws.path())
            .args(*args)
            .args(["--", cmd])
            .output()
            .unwrap();
        let r = json(&out.stdout);
        assert_eq!(out.status.code(), Some(126), "{args:?} {cmd}: {r}");
        assert_eq!(r["denial"]["rule"], *rule, "{args:?} {cmd}: {r}");
        let reason = r["denial"]["reason"].as_str().unwrap();
        assert!(
            reason.contains("XDG_CONFIG_HOME") && reason.contains("pinned"),
            "{r}"
        );
        assert!(r["denial"]["hint"].as_str().is_some_and(|h| !h.is_empty()));
        assert!(!r.to_string().contains("uid="), "{r}");
        assert!(!ws.path().join("c").exists(), "{cmd}: something ran");
    }
    // The same through the MCP `env` argument.
    let mut cmd = std::process::Command::new(BIN);
    cmd.args(["mcp", "--policy"])
        .arg(&p.path)
        .env_remove("AGENT_RSH_POLICY");
    let mut mcp = common::mcp::Client::spawn(cmd);
    let r = mcp.call(
        serde_json::json!(1),
        "tools/call",
        serde_json::json!({"name": "run", "arguments": {
            "command": format!("{plant} && git x"),
            "env": {"XDG_CONFIG_HOME": "c"},
        }}),
    );
    let res = &r["result"];
    assert_eq!(res["isError"], true, "{r}");
    assert_eq!(res["structuredContent"]["status"], "denied", "{r}");
    assert_eq!(
        res["structuredContent"]["denial"]["rule"], "env.dangerous",
        "{r}"
    );
    assert!(!r.to_string().contains("uid="), "{r}");
}

#[test]
fn env_shows_only_passed_variables() {
    let p = shell_policy();
    let out = agent()
        .env("AGENT_RSH_TEST_SECRET", "hunter2")
        .env("LANG", "C.UTF-8")
        .args(["run", "--policy"])
        .arg(&p.path)
        .args(["--env", "MINE=1", "--", "env"])
        .assert()
        .success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).to_string();
    assert!(!text.contains("hunter2"), "{text}");
    assert!(text.contains("LANG=C.UTF-8\n"), "{text}");
    assert!(text.contains("MINE=1\n"));
    assert!(text.contains("PAGER=cat\n"));
    assert!(text.contains("PATH=/usr/local/bin:/usr/bin:/bin\n"));
    let home = text.lines().find(|l| l.starts_with("HOME=")).unwrap();
    assert!(
        home.contains("/agent-rsh-"),
        "HOME is the workspace: {home}"
    );
}

#[test]
fn bad_policies_fail_closed_with_position() {
    let ws = tempfile::tempdir().unwrap();
    let marker = ws.path().join("ran");
    let cases = [
        ("[commands]\nallow = [\"touch\"\n", Some(":2:")),
        ("[commands]\nallow = [\"touch\"]\nalow = 1\n", Some(":3:1:")),
        ("confinement = \"sometimes\"\n", Some(":1:")),
    ];
    for (body, pos) in cases {
        let p = policy(body);
        let out = agent()
            .args(["run", "--policy"])
            .arg(&p.path)
            .arg("--")
            .arg(format!("touch {}", marker.display()))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(125), "{body}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(p.path.to_str().unwrap()), "{err}");
        if let Some(pos) = pos {
            assert!(err.contains(pos), "{err}");
        }
    }
    let out = agent()
        .env("AGENT_RSH_POLICY", "/nonexistent/policy.toml")
        .args(["run", "touch"])
        .arg(&marker)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/policy.toml"));
    assert!(
        !Path::new(&marker).exists(),
        "nothing may run under a bad policy"
    );
}

#[test]
fn timeout_can_shorten_but_not_extend() {
    let p = policy("[commands]\nallow = [\"sleep\"]\n[limits]\ntimeout_ms = 300\n");
    let out = agent()
        .args(["run", "--json", "--policy"])
        .arg(&p.path)
        .args(["--timeout", "100000", "--", "sleep", "5"])
        .assert()
        .code(124);
    let r = json(&out.get_output().stdout);
    assert!(
        r["warnings"][0]
            .as_str()
            .unwrap()
            .contains("exceeds the policy maximum")
    );
}

#[test]
fn check_reports_without_running() {
    let out = agent()
        .args(["check", "--json", "ls -la"])
        .assert()
        .success();
    let v = json(&out.get_output().stdout);
    assert_eq!(v["verdict"], "allow");
    assert_eq!(v["argv"], serde_json::json!(["ls", "-la"]));
    let simple = policy("syntax = \"simple\"\n[commands]\nallow = [\"ls\", \"wc\"]\n");
    let out = agent()
        .args(["check", "--json", "--policy"])
        .arg(&simple.path)
        .arg("ls | wc")
        .assert()
        .code(126);
    let v = json(&out.get_output().stdout);
    assert_eq!(v["verdict"], "deny");
    assert_eq!(v["denial"]["rule"], "lex.pipe");
    assert_eq!(v["denial"]["offset"], 3);
}

#[test]
fn policy_subcommands() {
    agent()
        .args(["policy", "show"])
        .assert()
        .success()
        .stdout(predicate::str::contains("\"ls\"").and(predicate::str::contains("timeout_ms")));
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("p.toml");
    agent().args(["policy", "init"]).arg(&f).assert().success();
    agent().args(["policy", "check"]).arg(&f).assert().success();
    agent().args(["policy", "init"]).arg(&f).assert().code(125);
    agent().args(["run", "--bogus-flag", "ls"]).assert().code(2);
}

#[test]
fn report_commands_end_quietly_on_a_closed_stdout() {
    use std::os::fd::{FromRawFd, OwnedFd};
    use std::os::unix::process::ExitStatusExt;
    for args in [&["policy", "show"][..], &["check", "ls -la"][..]] {
        // A pipe whose reader is already gone: every write fails with EPIPE.
        let mut fds = [0; 2];
        // SAFETY: pipe(2) into a local array; both fds are owned below.
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        // SAFETY: fresh fds from pipe(2), each owned exactly once.
        let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        drop(r);
        let out = std::process::Command::new(BIN)
            .args(args)
            .env_remove("AGENT_RSH_POLICY")
            .stdout(Stdio::from(w))
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.signal(), Some(libc::SIGPIPE), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

#[test]
fn missing_program_is_127() {
    let p = policy("[commands]\nallow = [\"no-such-program-xyz\"]\n");
    agent()
        .args(["run", "--policy"])
        .arg(&p.path)
        .arg("no-such-program-xyz")
        .assert()
        .code(127);
}

#[test]
fn stdin_is_dev_null_unless_passed() {
    let p = shell_policy();
    agent()
        .args(["run", "--policy"])
        .arg(&p.path)
        .arg("cat")
        .write_stdin("secret input")
        .assert()
        .success()
        .stdout("");
    agent()
        .args(["run", "--stdin", "--policy"])
        .arg(&p.path)
        .arg("cat")
        .write_stdin("passed input")
        .assert()
        .success()
        .stdout("passed input");
}

#[test]
fn non_utf8_output_is_reported_or_base64() {
    let out = agent()
        .args(["run", "--json", r"printf 'a\377b'"])
        .assert()
        .success();
    let r = json(&out.get_output().stdout);
    assert_eq!(r["stdout"], "a\u{fffd}b");
    assert_eq!(r["stdoutEncoding"], "utf-8-lossy");
    assert_eq!(r["stdoutBytes"], 3);

    let out = agent()
        .args(["run", "--json", "--base64", r"printf 'a\377b'"])
        .assert()
        .success();
    let r = json(&out.get_output().stdout);
    assert_eq!(r["stdout"], "Yf9i");
    assert_eq!(r["stdoutEncoding"], "base64");

    let out = agent()
        .args(["run", "--events", r"printf 'a\377b'"])
        .assert()
        .success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).to_string();
    assert!(text.contains(r#""data_b64":"Yf9i""#), "{text}");
}

#[test]
fn ansi_escapes_are_stripped_unless_color() {
    let cmd = r"printf '\033[1;31mred\033[0m\n'";
    let out = agent().args(["run", "--json", cmd]).assert().success();
    assert_eq!(json(&out.get_output().stdout)["stdout"], "red\n");
    let out = agent()
        .args(["run", "--json", "--color", cmd])
        .assert()
        .success();
    assert_eq!(
        json(&out.get_output().stdout)["stdout"],
        "\u{1b}[1;31mred\u{1b}[0m\n"
    );
}

#[test]
fn fresh_workspace_is_removed_unless_kept() {
    let out = agent().args(["run", "--json", "pwd"]).assert().success();
    let r = json(&out.get_output().stdout);
    let ws = r["stdout"].as_str().unwrap().trim().to_string();
    assert!(ws.starts_with("/tmp/agent-rsh-"), "{ws}");
    assert!(!Path::new(&ws).exists(), "workspace {ws} was left behind");

    let out = agent()
        .args(["run", "--json", "--keep", "pwd"])
        .assert()
        .success();
    let r = json(&out.get_output().stdout);
    let kept = r["workspace"].as_str().unwrap().to_string();
    assert_eq!(r["stdout"].as_str().unwrap().trim(), kept);
    assert!(Path::new(&kept).is_dir());
    std::fs::remove_dir_all(&kept).unwrap();
}

#[test]
fn command_starts_with_default_sigpipe() {
    // agent-rsh itself ignores SIGPIPE; the command must not inherit that,
    // or `yes` would report a broken pipe instead of dying quietly.
    let p = policy("[commands]\nallow = [\"bash\", \"yes\", \"head\"]\n");
    let out = agent()
        .args(["run", "--json", "--policy"])
        .arg(&p.path)
        .arg("bash -c 'yes | head -n 1; echo \"${PIPESTATUS[0]}\"'")
        .assert()
        .success();
    let r = json(&out.get_output().stdout);
    assert_eq!(r["stdout"], "y\n141\n");
    assert_eq!(r["stderr"], "");
}

#[test]
fn max_output_keeps_head_and_tail_at_line_boundaries_for_both_streams() {
    // 3000 numbered lines on stdout (30 KB), 10 on stderr.
    let cmd = "bash -c 'for i in $(seq 1000 3999); do echo \"line $i\"; done; \
               for i in 1 2 3 4 5 6 7 8 9 10; do echo \"err $i\" >&2; done'";
    let p2 = policy("[commands]\nallow = [\"bash\", \"seq\"]\n");
    let out = agent()
        .args(["run", "--json", "--max-output", "1000", "--policy"])
        .arg(&p2.path)
        .arg(cmd)
        .assert()
        .success();
    let r = json(&out.get_output().stdout);
    let stdout = r["stdout"].as_str().unwrap();
    let stderr = r["stderr"].as_str().unwrap();
    assert_eq!(r["truncated"], true);
    assert_eq!(r["stdoutBytes"], 30_000);
    // stderr is small: whole; stdout gets the rest of the budget.
    assert_eq!(stderr.lines().count(), 10, "{stderr}");
    assert!(stdout.starts_with("line 1000\nline 1001\n"), "{stdout}");
    assert!(stdout.ends_with("line 3998\nline 3999\n"), "{stdout}");
    for l in stdout.lines() {
        assert!(
            (l.starts_with("line ") && l.len() == 9) || l.starts_with("[agent-rsh: "),
            "a line was cut: {l:?}"
        );
    }
    let marker = stdout
        .lines()
        .find(|l| l.starts_with("[agent-rsh: "))
        .unwrap();
    assert!(marker.ends_with(" bytes elided]"), "{marker}");
    let shown = stdout.len() - marker.len() - 1 + stderr.len();
    assert!(shown <= 1000, "{shown}");

    // The default suits a model's context: 32 KiB in all.
    let out = agent()
        .args(["run", "--json", "--policy"])
        .arg(&p2.path)
        .arg("bash -c 'for i in $(seq 1 20000); do echo \"line $i\"; done'")
        .assert()
        .success();
    let r = json(&out.get_output().stdout);
    assert!(r["stdout"].as_str().unwrap().len() <= 33 * 1024);
    assert!(r["stdoutBytes"].as_u64().unwrap() > 150_000);
    agent()
        .args(["run", "--json", "--max-output", "10", "true"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("--max-output"));
}

#[test]
fn the_confinement_report_is_a_summary_unless_verbose() {
    let p = shell_policy();
    let run = |extra: &[&str]| {
        let out = agent()
            .args(["run", "--json", "--policy"])
            .arg(&p.path)
            .args(extra)
            .arg("true")
            .assert()
            .success();
        json(&out.get_output().stdout)["confinement"].clone()
    };
    let short = run(&[]);
    let long = run(&["--verbose"]);
    assert_eq!(short["mode"], long["mode"]);
    assert_eq!(short["landlock"]["enforced"], long["landlock"]["enforced"]);
    assert!(short["landlock"].get("read").is_none(), "{short}");
    assert!(long["landlock"]["read"].is_array(), "{long}");
    assert!(short["detail"].as_str().unwrap().contains("--verbose"));
    // The guarantees are in both; the paths and rules only with --verbose.
    assert_eq!(short["guarantees"], long["guarantees"]);
    assert!(short["landlock"].to_string().len() * 4 < long["landlock"].to_string().len());
    assert!(short.to_string().len() < long.to_string().len());
}

#[test]
fn events_strip_ansi_as_json_does_and_carry_binary_as_base64() {
    let p = shell_policy();
    let lines = |args: &[&str], cmd: &str| -> Vec<Value> {
        let out = agent()
            .args(["run", "--events", "--policy"])
            .arg(&p.path)
            .args(args)
            .arg(cmd)
            .assert()
            .success();
        String::from_utf8_lossy(&out.get_output().stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .filter(|v: &Value| v["type"] == "output")
            .collect()
    };
    let cmd = r#"bash -c 'printf "\033[1;31mred"; sleep 0.2; printf "\033[0m done\n"'"#;
    let text: String = lines(&[], cmd)
        .iter()
        .map(|v| v["data"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(text, "red done\n");
    let colored: String = lines(&["--color"], cmd)
        .iter()
        .map(|v| v["data"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(colored, "\u{1b}[1;31mred\u{1b}[0m done\n");
    // NUL bytes are valid UTF-8 but go out as base64, not \u0000 escapes.
    let bin = lines(&[], r#"bash -c 'printf "a\0b"'"#);
    assert_eq!(bin.len(), 1);
    assert_eq!(bin[0]["data_b64"], "YQBi", "{bin:?}");
}

#[test]
fn refusals_give_hints_a_model_can_act_on() {
    // The hints for shell syntax are those of the strict contract.
    let p =
        policy("syntax = \"simple\"\n[commands]\nallow = [\"ls\", \"cat\", \"tee\", \"git\"]\n");
    let denial = |cmd: &str| {
        let out = agent()
            .args(["run", "--json", "--policy"])
            .arg(&p.path)
            .arg(cmd)
            .assert()
            .code(126);
        json(&out.get_output().stdout)["denial"].clone()
    };
    // The allowed programs inline, not a command the model cannot run.
    let d = denial("rm -rf build");
    assert_eq!(
        d["hint"],
        "run one of the allowed programs; allowed: cat, git, ls, tee"
    );
    // cd: the working directory is an option.
    let d = denial("cd src");
    let h = d["hint"].as_str().unwrap();
    assert!(h.contains("--cwd DIR") && h.contains("MCP `cwd`"), "{h}");
    // Writing a file: standard input to a writer.
    let d = denial("echo hi > notes.txt");
    assert_eq!(d["rule"], "lex.redirect");
    let h = d["hint"].as_str().unwrap();
    assert!(h.contains("--stdin") && h.contains("tee FILE"), "{h}");
    // A leading tilde: quoting, as for 'HEAD~1'.
    let d = denial("git show ~1");
    assert_eq!(d["rule"], "lex.tilde");
    assert!(d["hint"].as_str().unwrap().contains("'HEAD~1'"), "{d}");
}

#[test]
fn compound_refusals_teach_the_here_document_and_list_programs_inline() {
    let p = policy("[commands]\nallow = [\"ls\", \"cat\", \"echo\"]\n");
    let run = |cmd: &str| {
        let out = agent()
            .args(["run", "--json", "--policy"])
            .arg(&p.path)
            .arg(cmd)
            .assert()
            .code(126);
        json(&out.get_output().stdout)
    };
    // A redirection outside the workspace, static and after expansion:
    // the hint says how to write a file where writing is allowed.
    for cmd in ["echo hi > /etc/notes.txt", "f=/etc/notes.txt; echo hi > $f"] {
        let r = run(cmd);
        assert_eq!(r["denial"]["rule"], "redirect.outside", "{r}");
        let h = r["denial"]["hint"].as_str().unwrap();
        assert!(
            h.contains("a relative path")
                && h.contains("`cat <<'EOF' > FILE`, then the file's lines, then a line `EOF`"),
            "{h}"
        );
    }
    // What the hint teaches runs.
    agent()
        .args(["run", "--policy"])
        .arg(&p.path)
        .arg("cat <<'EOF' > notes.txt\n$x `y`\nEOF\ncat notes.txt")
        .assert()
        .success()
        .stdout("$x `y`\n");
    // A long allowlist: the nearest programs, and nothing the caller
    // cannot run itself.
    let mut names: Vec<String> = (0..60).map(|i| format!("\"tool{i:02}\"")).collect();
    names.extend(["\"python3\"", "\"pytest\""].map(String::from));
    let long = policy(&format!("[commands]\nallow = [{}]\n", names.join(", ")));
    let out = agent()
        .args(["run", "--json", "--policy"])
        .arg(&long.path)
        .arg("python -V")
        .assert()
        .code(126);
    let d = json(&out.get_output().stdout)["denial"].clone();
    let h = d["hint"].as_str().unwrap();
    assert!(h.contains("nearest allowed: python3, pytest"), "{h}");
    assert!(h.ends_with("(62 in all)"), "{h}");
    assert!(!h.contains("policy show"), "{h}");
}

#[test]
fn without_network_tools_are_offline_and_a_failed_lookup_says_why() {
    let p = policy("[commands]\nallow = [\"env\", \"git\"]\n");
    let out = agent()
        .args(["run", "--json", "--policy"])
        .arg(&p.path)
        .arg("env")
        .assert()
        .success();
    let env = json(&out.get_output().stdout)["stdout"]
        .as_str()
        .unwrap()
        .to_string();
    for var in [
        "npm_config_offline=true",
        "PIP_NO_INDEX=1",
        "CARGO_NET_OFFLINE=true",
        "GIT_ALLOW_PROTOCOL=file",
    ] {
        assert!(env.lines().any(|l| l == var), "{var} missing: {env}");
    }
    // git fails at once (no DNS lookup, no retry), and the warning says
    // the policy is why.
    let out = agent()
        .args(["run", "--json", "--policy"])
        .arg(&p.path)
        .arg("git ls-remote https://git.example.invalid/repo.git")
        .assert()
        .failure();
    let r = json(&out.get_output().stdout);
    let w = r["warnings"].as_array().unwrap();
    assert!(
        w.iter().any(|w| w
            .as_str()
            .unwrap()
            .starts_with("network is off by the policy")),
        "{r}"
    );
    // With the network allowed, none of it.
    let p = policy("network = \"allow\"\n[commands]\nallow = [\"env\"]\n");
    let out = agent()
        .args(["run", "--json", "--policy"])
        .arg(&p.path)
        .arg("env")
        .assert()
        .success();
    let env = json(&out.get_output().stdout)["stdout"].clone();
    assert!(
        !env.as_str().unwrap().contains("npm_config_offline"),
        "{env}"
    );
}

#[test]
fn bare_invocation_prints_usage_and_a_program_name_suggests_run() {
    // Not a login shell, no system policy (this test machine has none
    // unless a test overlays one in its own mount namespace).
    if std::path::Path::new("/etc/agent-rsh/policy.toml").exists() {
        common::unavailable(
            "bare_invocation_prints_usage_and_a_program_name_suggests_run",
            "this machine has a system policy (/etc/agent-rsh/policy.toml)",
        );
    } else {
        agent()
            .env_remove("AGENT_RSH_POLICY")
            .write_stdin("")
            .assert()
            .code(2)
            .stderr(predicates::str::contains("Usage: agent-rsh"))
            .stderr(predicates::str::contains("agent-rsh run -- ls -la"));
    }
    agent()
        .env_remove("AGENT_RSH_POLICY")
        .args(["ls", "-la"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains(
            "`ls` is a program the policy allows; to run it: agent-rsh run -- ls -la",
        ));
    agent()
        .env_remove("AGENT_RSH_POLICY")
        .args(["frobnicate"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("is a program").not());
}

#[test]
fn a_repository_workspace_stays_clean_and_git_takes_its_identity_from_the_policy() {
    if !common::ready("workspace_hygiene", false, &["git", "python3"]) {
        return;
    }
    let repo = tempfile::tempdir().unwrap();
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@example.org"])
            .args(args)
            .current_dir(repo.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    git(&["init", "-q"]);
    std::fs::write(
        repo.path().join("lib.py"),
        "import os, tempfile\n\
         tempfile.mkdtemp()\n\
         for d in ('HOME', 'TMPDIR', 'XDG_CACHE_HOME', 'npm_config_cache', 'CARGO_HOME'):\n\
         \x20   os.makedirs(os.environ[d], exist_ok=True)\n\
         \x20   open(os.path.join(os.environ[d], 'junk'), 'w').write('x')\n\
         print(os.environ['HOME'])\n",
    )
    .unwrap();
    std::fs::write(repo.path().join("main.py"), "import lib\n").unwrap();
    git(&["add", "-A"]);
    git(&["commit", "-qm", "init"]);
    let p = policy(
        "[commands]\nallow = [\"python3\", \"git\"]\n\
         [env.set]\nGIT_AUTHOR_NAME = \"Agent\"\nGIT_AUTHOR_EMAIL = \"agent@example.org\"\n\
         GIT_COMMITTER_NAME = \"Agent\"\nGIT_COMMITTER_EMAIL = \"agent@example.org\"\n",
    );
    let run = |cmd: &str| {
        let out = agent()
            .args(["run", "--json", "--policy"])
            .arg(&p.path)
            .arg("--workspace")
            .arg(repo.path())
            .arg(cmd)
            .assert()
            .success();
        json(&out.get_output().stdout)
    };
    let r = run("python3 main.py");
    let home = r["stdout"].as_str().unwrap().trim().to_string();
    let root = repo.path().canonicalize().unwrap();
    assert!(!std::path::Path::new(&home).starts_with(&root), "{home}");
    // Caches, temporary files, bytecode: nothing in the repository.
    assert_eq!(git(&["status", "--porcelain", "--ignored"]), "");
    // The same workspace gets the same state directory (warm caches).
    assert_eq!(run("python3 main.py")["stdout"], r["stdout"]);
    // A commit made by the run carries the policy's identity.
    std::fs::write(repo.path().join("new.txt"), "x").unwrap();
    run("git add new.txt");
    run("git commit -qm from-the-run");
    assert_eq!(
        git(&["log", "-1", "--format=%an <%ae>"]).trim(),
        "Agent <agent@example.org>"
    );
    assert_eq!(git(&["status", "--porcelain", "--ignored"]), "");
}

#[test]
fn a_script_warns_only_when_its_interpreter_cannot_execute() {
    if !Path::new("/usr/bin/python3").exists() {
        common::unavailable(
            "a_script_warns_only_when_its_interpreter_cannot_execute",
            "needs /usr/bin/python3",
        );
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("hello");
    std::fs::write(
        &script,
        "#!/usr/bin/python3\nprint('hello from a script')\n",
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let script = script.canonicalize().unwrap();
    let body = |allow: &str| {
        format!(
            "[commands]\nallow = [{allow}{:?}]\n[scopes]\nread = [\"/usr\", \"/lib\", \"/lib64\", \"/etc\", {:?}]\n",
            script.display().to_string(),
            dir.path().canonicalize().unwrap().display().to_string()
        )
    };
    let run = |p: &TestPolicy| {
        let out = agent()
            .args(["run", "--json", "--policy"])
            .arg(&p.path)
            .arg(&script)
            .output()
            .unwrap();
        json(&out.stdout)
    };
    let is_warning = |w: &Value| w.as_str().unwrap().contains("is a script run by");
    // The interpreter is allowed: the script runs, and nothing says it will not.
    let p = policy(&body("\"python3\", "));
    let r = run(&p);
    assert_eq!(r["exitCode"], 0, "{r}");
    assert_eq!(r["stdout"], "hello from a script\n", "{r}");
    assert!(
        !r["warnings"].as_array().unwrap().iter().any(is_warning),
        "{r}"
    );
    // It is not: the script is judged as its interpreter would start it, and
    // refused before anything runs, naming the interpreter.
    let p = policy(&body(""));
    let r = run(&p);
    assert_eq!(r["status"], "denied", "{r}");
    assert!(
        r["denial"]["reason"]
            .as_str()
            .unwrap()
            .contains("/usr/bin/python3"),
        "{r}"
    );
}

/// An account without a cgroup of the run's own (simulated here, as a
/// newcomer's account has none) cannot have `limits.memory_bytes`
/// enforced: a run says so once and how to silence it, and with
/// `limits.memory_bytes = 0` it says nothing. Root without a run cgroup is
/// refused instead; `resources::an_account_without_a_cgroup_is_told_memory_is_bounded_per_process_only`
/// checks the same words as a throwaway account.
#[test]
fn an_unenforced_memory_bound_says_how_to_silence_it() {
    if common::root() {
        return;
    }
    let run = |memory: &str| {
        let p = policy(&format!(
            "[commands]\nallow = [\"echo\"]\n[limits]\nmemory_bytes = {memory}\n"
        ));
        let out = agent()
            .args(["run", "--policy"])
            .arg(&p.path)
            .arg("echo hi")
            .env(agent_rsh::confine::probe::SIMULATE_ENV, "cgroup")
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "hi\n");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let err = run("1073741824");
    let said: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("limits.memory_bytes (1073741824 bytes) is not enforced"))
        .collect();
    assert_eq!(said.len(), 1, "{err}");
    assert!(
        said[0].ends_with(
            "`limits.memory_bytes = 0` in the policy silences this (a delegated cgroup enforces it)"
        ),
        "{err}"
    );
    let err = run("0");
    assert!(!err.contains("limits.memory_bytes"), "{err}");
}

#[test]
fn kernel_refusal_warnings_name_the_path_or_program() {
    // No memory bound: an account without a cgroup of its own would get a
    // warning that it is not enforced on every run.
    let p = policy(
        "[commands]\nallow = [\"bash\", \"cat\", \"python3\"]\n[limits]\nmemory_bytes = 0\n",
    );
    let warnings = |cmd: &str| {
        let out = agent()
            .args(["run", "--json", "--policy"])
            .arg(&p.path)
            .arg(cmd)
            .output()
            .unwrap();
        let r = json(&out.stdout);
        assert_ne!(r["exitCode"], 0, "{r}");
        let w: Vec<String> = r["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w.as_str().unwrap().to_string())
            .collect();
        (w, r)
    };
    // A program the kernel refuses to execute: the shell names it.
    let (w, r) = warnings("cat <<'EOF' > s.sh\nid\nEOF\nbash s.sh");
    assert!(
        w.iter()
            .any(|w| w.contains("\"Permission denied\" for /usr/bin/id")
                && w.contains("allow `id` in commands.allow")),
        "{r}"
    );
    // A relative file that is not there is not the kernel's doing.
    let (w, r) = warnings("cat missing.txt");
    assert!(w.is_empty(), "{r}");
    if !common::system_python3() {
        common::unavailable(
            "kernel_refusal_warnings_name_the_path_or_program",
            "needs python3",
        );
        return;
    }
    // A directory Landlock does not let it read, as Python names it.
    let (w, r) = warnings("cat <<'EOF' > t.py\nimport os\nos.listdir('/etc')\nEOF\npython3 t.py");
    assert!(
        w.iter().any(
            |w| w.contains("\"Permission denied\" for /etc inside the run")
                && w.contains("add /etc to scopes.read")
        ),
        "{r}"
    );
    // An inet socket with network = "none": the network is off, not a
    // mysterious EPERM.
    let (w, r) = warnings("cat <<'EOF' > t.py\nimport socket\nsocket.socket()\nEOF\npython3 t.py");
    assert!(
        w.iter()
            .any(|w| w.starts_with("network is off by the policy (network = \"none\")")),
        "{r}"
    );
    assert!(
        !w.iter()
            .any(|w| w.contains("most likely the seccomp filter")),
        "{r}"
    );
}

#[test]
fn the_allowed_programs_directories_list_but_their_other_files_stay_unreadable() {
    if !Path::new("/usr/bin/python3").exists() {
        common::unavailable(
            "the_allowed_programs_directories_list_but_their_other_files_stay_unreadable",
            "needs /usr/bin/python3",
        );
        return;
    }
    // What `pip list` does with /usr/bin (a script's directory is on
    // sys.path), and what it must not gain: reading another program.
    let p = policy("[commands]\nallow = [\"python3\", \"cat\"]\n");
    let script = "import os\nprint('python3' in os.listdir('/usr/bin'))\ntry:\n    open('/usr/bin/id', 'rb')\nexcept PermissionError as e:\n    print('refused', e.filename)\n";
    agent()
        .args(["run", "--policy"])
        .arg(&p.path)
        .arg(format!("cat <<'EOF' > t.py\n{script}EOF\npython3 t.py"))
        .assert()
        .success()
        .stdout("True\nrefused /usr/bin/id\n");
}

/// An option of agent-rsh's after the command's words is refused as a
/// usage error and nothing runs; after `--` it is the program's word.
#[test]
fn options_after_the_command_are_refused_unless_after_double_dash() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    for args in [
        vec!["run", "touch made", "--json"],
        vec!["run", "touch", "made", "--timeout=5"],
        vec!["check", "ls", "--json"],
    ] {
        agent()
            .current_dir(dir.path())
            .args(&args)
            .assert()
            .code(2)
            .stderr(predicate::str::contains("put options before the command"));
    }
    assert!(!marker.exists());
    agent()
        .args(["run", "--", "echo", "hi", "--json"])
        .assert()
        .success()
        .stdout("hi --json\n");
    // An option of the program that agent-rsh does not have is its word.
    agent()
        .args(["run", "echo", "hi", "--jsonx"])
        .assert()
        .success()
        .stdout("hi --jsonx\n");
}
