//! The compound-command parser and its static check: nothing panics,
//! refusals point inside the input, and every script the parser accepts
//! has the structure bash gives it.
//!
//! The oracle is bash's own printer: the parsed structure, written back
//! with each word and redirection spelled as in the input
//! (`script::render::verbatim`), and the input itself are each made the
//! body of a function, and `declare -f` must print the same body for both.
//! bash normalizes lists, pipelines, compound commands and spacing, and
//! keeps words as written, so equal output means agent-rsh split the
//! script into the same commands, words and redirections as bash did.
//! Scripts with here-documents or backquotes are checked for panics only
//! (their spans are not exact). bash runs in an empty directory with an
//! empty PATH, so a wrongly accepted script that escapes the function
//! finds nothing to run.
#![no_main]

use agent_rsh::admit::{self, Request};
use agent_rsh::policy::{Policy, Syntax};
use agent_rsh::script::{self, render};
use libfuzzer_sys::fuzz_target;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

struct Bash {
    _child: Child,
    _dir: std::path::PathBuf,
    stdin: ChildStdin,
    records: Receiver<Vec<u8>>,
}

impl Bash {
    // Records end in a NUL byte: `declare -f` prints `$'...'` words
    // decoded, so any other byte can appear inside a body, but no bash
    // string can hold a NUL.
    fn start() -> Bash {
        let dir = std::env::temp_dir().join(format!("agent-rsh-fuzz-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let bash = ["/bin/bash", "/usr/bin/bash"]
            .into_iter()
            .find(|p| std::path::Path::new(p).exists())
            .expect("bash is needed for the parser's oracle");
        let mut child = Command::new(bash)
            .args(["--noprofile", "--norc", "-s"])
            .current_dir(&dir)
            .env_clear()
            .env("PATH", "/nonexistent")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start bash");
        let stdin = child.stdin.take().unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            loop {
                let mut rec = Vec::new();
                match out.read_until(0, &mut rec) {
                    Ok(0) | Err(_) => return,
                    Ok(_) => {
                        if tx.send(rec).is_err() {
                            return;
                        }
                    }
                }
            }
        });
        Bash {
            _child: child,
            _dir: dir,
            stdin,
            records: rx,
        }
    }

    /// `declare -f` of a function whose body is `body`, minus its name.
    fn structure(&mut self, body: &str) -> String {
        let sent = self
            .stdin
            .write_all(
                format!("unset -f f\nf() {{\n{body}\n}}\ndeclare -f f; printf '\\0'\n").as_bytes(),
            )
            .and_then(|()| self.stdin.flush());
        assert!(sent.is_ok(), "bash exited before reading {body:?}");
        let rec = match self.records.recv_timeout(Duration::from_secs(20)) {
            Ok(r) => r,
            Err(RecvTimeoutError::Timeout) => {
                panic!(
                    "bash still waits for input after {body:?}: the parser accepted an unfinished script"
                )
            }
            Err(RecvTimeoutError::Disconnected) => {
                panic!("bash exited on {body:?}: the parser accepted something bash cannot parse")
            }
        };
        String::from_utf8_lossy(&rec).into_owned()
    }
}

fn bash() -> &'static Mutex<Bash> {
    static BASH: OnceLock<Mutex<Bash>> = OnceLock::new();
    BASH.get_or_init(|| Mutex::new(Bash::start()))
}

fn policy() -> &'static Policy {
    static POLICY: OnceLock<Policy> = OnceLock::new();
    POLICY.get_or_init(|| {
        let mut p = Policy::embedded();
        p.syntax = Syntax::Compound;
        p
    })
}

/// Variables for the arithmetic evaluator.
#[derive(Default)]
struct Vars(std::collections::HashMap<String, String>);

impl script::arith::Vars for Vars {
    fn get(&mut self, name: &str) -> Option<String> {
        self.0.get(name).cloned()
    }
    fn set(&mut self, name: &str, value: i64) -> Result<(), script::arith::Error> {
        self.0.insert(name.to_string(), value.to_string());
        Ok(())
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    // The input as an arithmetic expression (`$(( ))`, `(( ))`): a value
    // or bash's message, never a panic; `x` refers back to the input.
    let mut vars = Vars::default();
    vars.0.insert("x".into(), s.to_string());
    let _ = script::arith::eval(s, &mut vars);
    for max in [8192, s.len() / 2] {
        if let Err(e) = script::parse(s, max) {
            assert!(e.offset <= s.len().max(max), "offset past the end: {e:?}");
            if e.rule != "lex.too-long" {
                assert!(
                    s.is_char_boundary(e.offset),
                    "offset inside a character: {e:?}"
                );
            }
            assert!(!e.hint.is_empty());
            let _ = e.to_string();
        }
    }
    // The whole check of the compound command: no panic, and a refusal
    // names a place inside the input.
    if let Err(d) = admit::admit(policy(), &Request::line(s), None) {
        if let Some(o) = d.offset {
            assert!(o <= s.len().max(8192), "{d:?}");
        }
        let _ = d.to_string();
    }
    let Ok(parsed) = script::parse(s, 8192) else {
        return;
    };
    let _ = render::script(&parsed);
    if s.ends_with('\\') {
        return;
    }
    let Some(ours) = render::verbatim(&parsed, s) else {
        return;
    };
    let mut b = bash().lock().unwrap();
    let want = b.structure(s);
    let got = b.structure(&ours);
    assert_eq!(got, want, "agent-rsh read {s:?} as {ours:?}");
});
