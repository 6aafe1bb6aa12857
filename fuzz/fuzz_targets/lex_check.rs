//! Lexer and checker: nothing panics, refusals point inside the input, and
//! every accepted string yields exactly the argv bash builds from it.
//!
//! Accepted strings go to one long-lived bash as `f STRING` lines, where `f`
//! prints its arguments NUL-separated (as tests/it/lex_bash.rs does). A string
//! bash reads differently, cannot parse, or that leaves it waiting for more
//! input (a quote the lexer thought closed) is a crash.
#![no_main]

use agent_rsh::admit::{self, CommandInput, Request};
use agent_rsh::lex;
use agent_rsh::policy::Policy;
use libfuzzer_sys::fuzz_target;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

struct Bash {
    _child: Child,
    stdin: ChildStdin,
    records: Receiver<Vec<u8>>,
}

impl Bash {
    fn start() -> Bash {
        let bash = ["/bin/bash", "/usr/bin/bash"]
            .into_iter()
            .find(|p| std::path::Path::new(p).exists())
            .expect("bash is needed for the differential check");
        // An empty PATH: a wrongly accepted substitution finds no program.
        let mut child = Command::new(bash)
            .args(["--noprofile", "--norc", "-s"])
            .env_clear()
            .env("PATH", "/nonexistent")
            .env("LC_ALL", "C.UTF-8")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start bash");
        let mut stdin = child.stdin.take().unwrap();
        stdin
            .write_all(b"f() { printf '%s\\0' \"$@\"; printf '\\1'; }\n")
            .unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            loop {
                let mut rec = Vec::new();
                match out.read_until(1, &mut rec) {
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
            stdin,
            records: rx,
        }
    }

    /// The argv bash builds for `f LINE`.
    fn argv(&mut self, line: &str) -> Vec<String> {
        let sent = self
            .stdin
            .write_all(format!("f {line}\n").as_bytes())
            .and_then(|()| self.stdin.flush());
        assert!(sent.is_ok(), "bash exited before reading {line:?}");
        let rec = match self.records.recv_timeout(Duration::from_secs(20)) {
            Ok(r) => r,
            Err(RecvTimeoutError::Timeout) => {
                panic!(
                    "bash is still waiting for input after {line:?}: the lexer accepted an unfinished command"
                )
            }
            Err(RecvTimeoutError::Disconnected) => {
                panic!("bash exited on {line:?}: the lexer accepted something bash cannot parse")
            }
        };
        let rec = rec.strip_suffix(&[1]).expect("record ends with \\1");
        let mut words: Vec<String> = rec
            .split(|&b| b == 0)
            .map(|w| String::from_utf8(w.to_vec()).expect("bash argv is UTF-8"))
            .collect();
        words.pop(); // after the last NUL
        words
    }
}

fn bash() -> &'static Mutex<Bash> {
    static BASH: OnceLock<Mutex<Bash>> = OnceLock::new();
    BASH.get_or_init(|| Mutex::new(Bash::start()))
}

/// The embedded policy with `syntax = "simple"`: the lexer's contract is
/// checked against the checker that uses it alone.
fn policy() -> &'static Policy {
    static POLICY: OnceLock<Policy> = OnceLock::new();
    POLICY.get_or_init(|| {
        let mut p = Policy::embedded();
        p.syntax = agent_rsh::policy::Syntax::Simple;
        p
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    // A smaller limit too, to reach the length check.
    for max in [8192, s.len() / 2] {
        if let Err(e) = lex::lex(s, max) {
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

    let lexed = lex::lex(s, 8192);
    let req = Request::line(s);
    let checked = admit::admit(policy(), &req, None);
    match (&lexed, &checked) {
        (Ok(words), Ok(plan)) => {
            let texts: Vec<&str> = words.iter().map(|w| w.text.as_str()).collect();
            assert_eq!(plan.argv, texts, "check changed the argv of {s:?}");
        }
        (Err(e), Err(d)) => assert_eq!(d.rule, e.rule, "check reported another rule"),
        (Err(e), Ok(_)) => panic!("check allowed {s:?}, which the lexer refused: {e:?}"),
        (Ok(_), Err(d)) => assert!(!d.rule.starts_with("lex."), "{d:?}"),
    }
    if let Err(d) = &checked {
        let _ = d.to_string();
    }

    // The same words through `run --argv`: no panic, and no word the
    // character rules refuse gets through.
    let words: Vec<String> = s.split(' ').map(str::to_string).collect();
    let argv_req = Request {
        command: CommandInput::Argv(words.clone()),
        ..Request::line("")
    };
    if admit::admit(policy(), &argv_req, None).is_ok() {
        for w in &words {
            assert!(lex::check_argv_word(w, 0).is_ok(), "{w:?} passed --argv");
        }
    }

    if let Ok(words) = lexed {
        let ours: Vec<String> = words.into_iter().map(|w| w.text).collect();
        let theirs = bash().lock().unwrap().argv(s);
        assert_eq!(ours, theirs, "lexer and bash disagree on {s:?}");
    }
});
