//! The examples in README.md and docs/*.md run as shown.
//!
//! An example meant to run is a fenced `console` block with the line
//! `<!-- doc-test -->` right before its opening fence:
//!
//! ````text
//! <!-- doc-test -->
//! ```console
//! $ agent-rsh run 'echo hello'
//! hello
//! $ agent-rsh check 'id'
//! ...
//! [exit 126]
//! ```
//! ````
//!
//! - A line starting with `$ ` is a command; a command line ending with
//!   `\` goes on to the next line, and lines right after it that start
//!   with `> ` (a shell's second prompt) continue it, as the lines of a
//!   quoted string or a here-document. The lines after it, up to the next
//!   command or the end of the block, are its expected output: stdout and
//!   stderr together, as `2>&1` gives them.
//! - A last expected line `[exit N]` says the command exits with N;
//!   without it the command must exit 0.
//! - A line `...` stands for any number of lines (none included).
//! - Lines are compared without trailing white space; trailing empty lines
//!   do not count.
//! - Each block runs in a fresh empty directory, its commands one after
//!   the other with `bash -c` (so one command can use a file the previous
//!   one wrote), with an environment of only `PATH` (the directory of the
//!   binary under test first, so `agent-rsh` is it), `HOME` (the block's
//!   directory) and `LANG=C`: no `AGENT_RSH_POLICY`, so the embedded
//!   default policy applies unless the command names one.
//!
//! - The warning an account without a cgroup of its own gets on every
//!   run, that `limits.memory_bytes` is not enforced for the whole run
//!   (README, Quick start), is the machine's, not the example's: it is
//!   left out of the output compared.
//!
//! Examples whose output depends on the machine (times, paths, ids,
//! installed toolchains) are left unmarked.

use crate::common::BIN;
use std::path::{Path, PathBuf};
use std::process::Command;

const MARK: &str = "<!-- doc-test -->";

/// One command of an example and what it must print.
struct Step {
    file: String,
    line: usize,
    command: String,
    expected: Vec<String>,
    exit: i32,
}

/// README.md and every docs/*.md.
fn doc_files() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![root.join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("docs/ exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    files
}

/// The marked blocks of one file, each a list of steps.
fn examples(path: &Path) -> Vec<Vec<Step>> {
    let text = std::fs::read_to_string(path).unwrap();
    let name = path
        .strip_prefix(env!("CARGO_MANIFEST_DIR"))
        .unwrap()
        .display()
        .to_string();
    let lines: Vec<&str> = text.lines().collect();
    let mut blocks = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if lines[i].trim() != MARK {
            i += 1;
            continue;
        }
        assert_eq!(
            lines.get(i + 1).map(|l| l.trim()),
            Some("```console"),
            "{name}:{}: {MARK} must stand right before a ```console block",
            i + 1
        );
        i += 2;
        let mut steps: Vec<Step> = Vec::new();
        while i < lines.len() && lines[i].trim_end() != "```" {
            let l = lines[i];
            if let Some(cmd) = l.strip_prefix("$ ") {
                let line = i + 1;
                let mut command = cmd.to_string();
                loop {
                    let next = lines.get(i + 1).copied().unwrap_or("```");
                    if command.ends_with('\\') {
                        // bash reads backslash-newline as a continuation.
                        command.push('\n');
                        command.push_str(next);
                    } else if next == ">" || next.starts_with("> ") {
                        command.push('\n');
                        command.push_str(next.get(2..).unwrap_or(""));
                    } else {
                        break;
                    }
                    i += 1;
                }
                steps.push(Step {
                    file: name.clone(),
                    line,
                    command,
                    expected: Vec::new(),
                    exit: 0,
                });
            } else {
                let step = steps
                    .last_mut()
                    .unwrap_or_else(|| panic!("{name}:{}: output before any `$ ` line", i + 1));
                step.expected.push(l.trim_end().to_string());
            }
            i += 1;
        }
        assert!(i < lines.len(), "{name}: unterminated example block");
        for s in &mut steps {
            while s.expected.last().is_some_and(|l| l.is_empty()) {
                s.expected.pop();
            }
            if let Some(n) = s
                .expected
                .last()
                .and_then(|l| l.strip_prefix("[exit "))
                .and_then(|l| l.strip_suffix(']'))
            {
                s.exit = n.parse().expect("[exit N] takes a number");
                s.expected.pop();
            }
        }
        blocks.push(steps);
    }
    blocks
}

/// Whether `got` matches `want`, where a `...` line in `want` stands for
/// any number of lines.
fn matches(want: &[String], got: &[&str]) -> bool {
    match want.split_first() {
        None => got.is_empty(),
        Some((w, rest)) if w == "..." => (0..=got.len()).any(|k| matches(rest, &got[k..])),
        Some((w, rest)) => got.first().is_some_and(|g| g == w) && matches(rest, &got[1..]),
    }
}

/// The warning that `limits.memory_bytes` is not enforced: no cgroup of
/// the run's own on this machine for this account.
fn is_unenforced_memory_warning(line: &str) -> bool {
    line.starts_with("agent-rsh: warning: limits.memory_bytes (")
        && line.contains(") is not enforced: ")
}

fn run(step: &Step, dir: &Path) -> Option<String> {
    let bin_dir = Path::new(BIN).parent().unwrap();
    let out = Command::new("bash")
        .arg("-c")
        .arg(format!("exec 2>&1\n{}", step.command))
        .current_dir(dir)
        .env_clear()
        .env("PATH", format!("{}:/usr/bin:/bin", bin_dir.display()))
        .env("HOME", dir)
        .env("LANG", "C")
        .output()
        .expect("bash runs");
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let mut got: Vec<&str> = text
        .lines()
        .map(|l| l.trim_end())
        .filter(|l| !is_unenforced_memory_warning(l))
        .collect();
    while got.last().is_some_and(|l| l.is_empty()) {
        got.pop();
    }
    let code = out.status.code().unwrap_or(-1);
    if matches(&step.expected, &got) && code == step.exit {
        return None;
    }
    Some(format!(
        "{}:{}: `{}`\n--- expected (exit {}) ---\n{}\n--- got (exit {code}) ---\n{}\n",
        step.file,
        step.line,
        step.command,
        step.exit,
        step.expected.join("\n"),
        got.join("\n")
    ))
}

#[test]
fn marked_examples_in_the_docs_print_what_they_show() {
    let mut failures = Vec::new();
    let mut count = 0;
    for file in doc_files() {
        for steps in examples(&file) {
            let dir = tempfile::tempdir().unwrap();
            for step in &steps {
                count += 1;
                failures.extend(run(step, dir.path()));
            }
        }
    }
    // A marker typo must not quietly turn the test into nothing.
    assert!(count >= 10, "only {count} marked example commands found");
    assert!(
        failures.is_empty(),
        "{} of {count} doc examples differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn the_matcher_takes_ellipsis_for_any_lines() {
    let w = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert!(matches(&w(&["a", "...", "d"]), &["a", "b", "c", "d"]));
    assert!(matches(&w(&["a", "...", "d"]), &["a", "d"]));
    assert!(!matches(&w(&["a", "...", "d"]), &["a", "b"]));
    assert!(!matches(&w(&["a"]), &["a", "b"]));
}
