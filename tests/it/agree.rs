//! `check` and `run` give one verdict: for every kind of refusal (and for
//! an allowed command) `agent-rsh check` says what `agent-rsh run` does,
//! with the same rule and exit code, the policy's reach included.

use crate::common::BIN;
use serde_json::Value;
use std::path::Path;
use std::process::Command;

const POLICY: &str = r#"
trust = "low"
[commands]
allow = ["echo", "find", "no-such-program-xyz"]
"#;

/// `agent-rsh SUB --json --policy P FLAGS -- WORDS`: the rule refused (or
/// None) and the exit code.
fn verdict(sub: &str, policy: &Path, flags: &[&str], words: &[&str]) -> (Option<String>, i32) {
    let out = Command::new(BIN)
        .env_remove("AGENT_RSH_POLICY")
        .args([sub, "--json", "--policy"])
        .arg(policy)
        .args(flags)
        .arg("--")
        .args(words)
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{sub} {words:?}: not JSON ({e}): {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let rule = v["denial"]["rule"].as_str().map(str::to_string);
    (rule, out.status.code().expect("exited"))
}

/// Policy file, flags, command words, the rule refused (None: allowed),
/// the exit code.
type Case<'a> = (&'a Path, &'a [&'a str], &'a [&'a str], Option<&'a str>, i32);

#[test]
fn check_and_run_agree_on_every_kind_of_verdict() {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.toml");
    std::fs::write(&policy, POLICY).unwrap();
    // The same policy, in a directory the command may write.
    let open = tempfile::tempdir().unwrap();
    let reachable = open.path().join("policy.toml");
    std::fs::write(
        &reachable,
        format!(
            "{POLICY}[scopes]\nwrite = [\"{}\"]\n",
            open.path().display()
        ),
    )
    .unwrap();
    // The strict contract: one simple command, every list refused.
    let simple = dir.path().join("simple.toml");
    std::fs::write(&simple, format!("syntax = \"simple\"\n{POLICY}")).unwrap();
    let ws = dir.path().display().to_string();
    let argv = ["--argv"];
    #[rustfmt::skip]
    let cases: &[Case] = &[
        (&policy, &[], &["echo hi"], None, 0),
        (&policy, &["--timeout", "99999999"], &["echo hi"], None, 0),
        (&simple, &[], &["echo a;b"], Some("lex.list"), 126),
        // A compound command is refused for the command it may not run.
        (&policy, &[], &["echo a;b"], Some("command.not-allowed"), 126),
        (&policy, &[], &["echo a; echo b"], None, 0),
        (&policy, &argv, &["echo", "a\nb"], Some("lex.newline"), 126),
        (&policy, &[], &["nope"], Some("command.not-allowed"), 126),
        (&policy, &[], &["/bin/echo x"], Some("command.path"), 126),
        (&policy, &[], &["no-such-program-xyz"], Some("command.not-found"), 127),
        (&policy, &[], &["find . -fprint ../out"], Some("args.find.write"), 126),
        (&policy, &[], &[r"find . -exec id \;"], Some("command.not-allowed"), 126),
        (&policy, &[], &["find . -delete"], Some("guard.fs.find-delete"), 126),
        (&policy, &["--env", "LD_PRELOAD=x"], &["echo"], Some("env.dangerous"), 126),
        (&policy, &["--cwd", ".."], &["echo"], Some("cwd.escape"), 126),
        (&policy, &["--cwd", "/etc"], &["echo"], Some("cwd.absolute"), 126),
        (&policy, &["--timeout", "0"], &["echo"], Some("timeout.zero"), 126),
        (&policy, &["--workspace", &ws], &["echo hi"], Some("workspace.system"), 126),
        (&policy, &["--workspace", "/"], &["echo hi"], Some("workspace.system"), 126),
        (&reachable, &[], &["echo hi"], Some("policy.reachable"), 126),
        // A command refused for itself is reported for that, first.
        (&reachable, &[], &["nope"], Some("command.not-allowed"), 126),
    ];
    for (policy, flags, words, rule, code) in cases {
        let want = (rule.map(str::to_string), *code);
        let checked = verdict("check", policy, flags, words);
        let ran = verdict("run", policy, flags, words);
        assert_eq!(checked, want, "check {flags:?} {words:?}");
        assert_eq!(ran, want, "run {flags:?} {words:?}");
    }
}
