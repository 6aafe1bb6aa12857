//! Scripts on the interpreter: what a command that runs a shell script
//! (`./x.sh`, `sh x.sh`, `bash -c '...'`, `source x.sh`) asks for, read
//! from its words and the file's first line. Pure: the interpreter reads
//! the file (inside the confined process) and runs what this describes.
//!
//! A shell script is never handed to a real shell: its text is parsed and
//! run by agent-rsh's interpreter, every command checked against the run's
//! policy as it runs, so a script the run itself wrote is covered. A
//! script with another interpreter's shebang (`#!/usr/bin/env python3`)
//! is judged and run as that interpreter running the file.

use super::ShellError;
use crate::policy::shell::is_shell;

fn file_name(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

/// What the first bytes of an executable file say runs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shebang {
    /// A shell's (`#!/bin/sh`, `#!/usr/bin/env bash`), or no `#!` line at
    /// all (bash runs such a file as a script itself).
    Shell,
    /// Another interpreter: `path` as written (`/usr/bin/env` resolved to
    /// the name it runs), with its optional single argument.
    Program {
        path: String,
        /// The program was named through `env`: `path` is a bare name.
        via_env: bool,
        arg: Option<String>,
    },
    /// A binary (ELF, or NUL bytes in the first line, which bash refuses
    /// as "cannot execute binary file").
    Binary,
}

/// Classifies a file by its first bytes.
pub fn classify(head: &[u8]) -> Shebang {
    if head.starts_with(b"\x7fELF") {
        return Shebang::Binary;
    }
    let line = head.split(|b| *b == b'\n').next().unwrap_or_default();
    if line.contains(&0) {
        return Shebang::Binary;
    }
    let Some(rest) = line.strip_prefix(b"#!") else {
        return Shebang::Shell;
    };
    let rest = String::from_utf8_lossy(rest);
    let rest = rest.trim_matches(|c| c == ' ' || c == '\t' || c == '\r');
    // Linux passes everything after the interpreter as one argument.
    let (path, arg) = match rest.split_once([' ', '\t']) {
        Some((p, a)) => (p, Some(a.trim_matches([' ', '\t']).to_string())),
        None => (rest, None),
    };
    let arg = arg.filter(|a| !a.is_empty());
    if path.is_empty() {
        return Shebang::Shell;
    }
    if file_name(path) == "env"
        && let Some(a) = &arg
    {
        let mut words = a.split([' ', '\t']).filter(|w| !w.is_empty());
        let name = words.next().unwrap_or_default();
        if is_shell(name) {
            return Shebang::Shell;
        }
        let more: Vec<&str> = words.collect();
        return Shebang::Program {
            path: name.to_string(),
            via_env: true,
            arg: (!more.is_empty()).then(|| more.join(" ")),
        };
    }
    if is_shell(path) {
        return Shebang::Shell;
    }
    Shebang::Program {
        path: path.to_string(),
        via_env: false,
        arg,
    }
}

/// What `sh ARGS` asks for (the words after the shell's name).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShellArgs {
    /// `-c STRING`.
    pub command: Option<String>,
    /// The script file (without `-c`); None and no command: stdin.
    pub file: Option<String>,
    /// `$0` when given (`sh -c CMD NAME ARGS...`).
    pub arg0: Option<String>,
    pub args: Vec<String>,
    /// Options for `set` (`-e`, `+u`, `-o pipefail`), in order.
    pub set: Vec<String>,
}

/// Reads a shell's options and operands as bash does: options first
/// (`-c`, `-e`, `-u`, `-o NAME`, `-s`, grouped as `-ec`; `--login`,
/// `--norc`, `--noprofile`, `-l` and `-p` change nothing here), then the
/// operands. An error is bash's message and its status 2.
pub fn shell_args(words: &[String]) -> Result<ShellArgs, ShellError> {
    let mut out = ShellArgs::default();
    let mut dash_c = false;
    let mut i = 0;
    while i < words.len() {
        let w = &words[i];
        if w == "--" || w == "-" {
            i += 1;
            break;
        }
        if matches!(
            w.as_str(),
            "--login" | "--norc" | "--noprofile" | "--posix" | "--noediting"
        ) {
            i += 1;
            continue;
        }
        if w.starts_with("--") {
            return Err(format!("{w}: invalid option").into());
        }
        let (on, flags) = match w.as_bytes().first() {
            Some(b'-') if w.len() > 1 => ('-', &w[1..]),
            Some(b'+') if w.len() > 1 => ('+', &w[1..]),
            _ => break,
        };
        for f in flags.chars() {
            match f {
                'c' if on == '-' => dash_c = true,
                's' | 'l' | 'p' => {}
                'i' => return Err("-i: an interactive shell is not run inside a run".into()),
                'o' => {
                    i += 1;
                    let Some(name) = words.get(i) else {
                        return Err("-o: option requires an argument".into());
                    };
                    out.set.push(format!("{on}o"));
                    out.set.push(name.clone());
                }
                other => out.set.push(format!("{on}{other}")),
            }
        }
        i += 1;
    }
    let mut operands = words[i.min(words.len())..].iter().cloned();
    if dash_c {
        out.command = Some(
            operands
                .next()
                .ok_or_else(|| "-c: option requires an argument".to_string())?,
        );
        out.arg0 = operands.next();
    } else {
        out.file = operands.next();
    }
    out.args = operands.collect();
    Ok(out)
}

/// The 1-based line of a byte offset in a script's text.
pub fn line_of(text: &str, offset: Option<usize>) -> usize {
    let at = offset.unwrap_or(0).min(text.len());
    text.as_bytes()[..at]
        .iter()
        .filter(|b| **b == b'\n')
        .count()
        + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn first_lines_say_what_runs_the_file() {
        let program = |p: &str, via_env, arg: Option<&str>| Shebang::Program {
            path: p.into(),
            via_env,
            arg: arg.map(String::from),
        };
        for (head, want) in [
            (&b"#!/bin/sh\necho"[..], Shebang::Shell),
            (b"#!/bin/bash -e\n", Shebang::Shell),
            (b"#! /usr/bin/env bash\n", Shebang::Shell),
            (b"#!/usr/bin/dash", Shebang::Shell),
            (b"echo hi\n", Shebang::Shell),
            (b"", Shebang::Shell),
            (b"#!/usr/bin/env python3\n", program("python3", true, None)),
            (
                b"#!/usr/bin/env -S node --x\n",
                program("-S", true, Some("node --x")),
            ),
            (
                b"#!/usr/bin/python3 -u\r\n",
                program("/usr/bin/python3", false, Some("-u")),
            ),
            (b"\x7fELF\x02\x01", Shebang::Binary),
            (b"ab\0cd\n", Shebang::Binary),
        ] {
            assert_eq!(classify(head), want, "{:?}", String::from_utf8_lossy(head));
        }
    }

    #[test]
    fn shell_words_are_read_as_bash_reads_them() {
        let a = shell_args(&words("-ec echo x")).unwrap();
        assert_eq!(a.command.as_deref(), Some("echo"));
        assert_eq!(a.arg0.as_deref(), Some("x"));
        assert_eq!(a.set, ["-e"]);
        let a = shell_args(&words("-o pipefail run.sh 1 2")).unwrap();
        assert_eq!(a.file.as_deref(), Some("run.sh"));
        assert_eq!(a.args, ["1", "2"]);
        assert_eq!(a.set, ["-o", "pipefail"]);
        let a = shell_args(&words("--norc -- -x.sh")).unwrap();
        assert_eq!(a.file.as_deref(), Some("-x.sh"));
        assert_eq!(shell_args(&[]).unwrap(), ShellArgs::default());
        assert!(shell_args(&words("-c")).is_err());
        assert!(shell_args(&words("-i")).is_err());
        assert!(shell_args(&words("--rcfile x")).is_err());
    }

    #[test]
    fn lines_are_counted_from_one() {
        assert_eq!(line_of("a\nb\nc", Some(4)), 3);
        assert_eq!(line_of("a", None), 1);
        assert_eq!(line_of("a\n", Some(99)), 2);
    }
}
