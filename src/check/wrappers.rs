//! Wrappers: programs whose arguments are another command (`timeout 5 rm
//! -rf /`, `env -S 'sh -c id'`, `xargs cat`, `bash -c 'ls'`).
//!
//! The inner command is found by the wrapper's own grammar (its options
//! end at the first positional), then judged as a command in its own right.

use super::args::{Normalized, Opt, name_matches};
use super::rules::{Severity, find_option};
use crate::lex;
use serde::{Deserialize, Serialize};

/// Wrappers nest at most this deep; a deeper command is refused.
pub const MAX_DEPTH: usize = 5;

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WrapperSpec {
    pub commands: Vec<String>,
    /// Positionals before the inner command (timeout's DURATION).
    pub skip: usize,
    /// `NAME=VALUE` words before the inner command (env).
    pub assignments: bool,
    /// Options whose value is split into words and read as further
    /// arguments of the wrapper itself (`env -S`).
    pub split: Vec<String>,
    /// A shell: with `-c` the first positional is a script.
    pub shell: bool,
    /// With any of these options there is no inner command (`ionice -p`).
    pub no_command_with: Vec<String>,
}

impl WrapperSpec {
    pub fn applies_to(&self, program: &str) -> bool {
        self.commands.iter().any(|c| name_matches(c, program))
    }
}

/// What a wrapper runs.
#[derive(Debug)]
pub enum Inner {
    /// Nothing (`xargs` alone runs echo; `env` alone prints).
    Nothing,
    /// The command starts at this index of the wrapper's argv.
    At(usize),
    /// New words, each with the index of the word it came from: a shell
    /// script lexed, or the wrapper's argv with `env -S` split in place.
    Words(Vec<(String, usize)>),
    /// Something the string layer cannot or must not pass.
    Finding(Problem),
}

#[derive(Debug)]
pub struct Problem {
    pub rule: &'static str,
    pub severity: Severity,
    pub reason: String,
    pub hint: String,
    pub index: usize,
}

/// Builtins a `sh -c` script may start with; the script is then shell
/// code, not a program, and is left to the kernel layer.
const SHELL_BUILTINS: &[&str] = &[
    ".",
    ":",
    "alias",
    "bg",
    "break",
    "builtin",
    "caller",
    "cd",
    "continue",
    "declare",
    "dirs",
    "disown",
    "echo",
    "enable",
    "eval",
    "exit",
    "export",
    "fc",
    "fg",
    "getopts",
    "hash",
    "help",
    "history",
    "jobs",
    "kill",
    "let",
    "local",
    "logout",
    "mapfile",
    "popd",
    "printf",
    "pushd",
    "pwd",
    "read",
    "readarray",
    "readonly",
    "return",
    "set",
    "shift",
    "shopt",
    "source",
    "suspend",
    "test",
    "times",
    "trap",
    "type",
    "typeset",
    "ulimit",
    "umask",
    "unalias",
    "unset",
    "wait",
    "[",
];

/// The inner command of wrapper `w` over `argv` read as `n`.
pub fn inner(w: &WrapperSpec, n: &Normalized, argv: &[&str], max_bytes: usize) -> Inner {
    if find_option(n, &w.no_command_with).is_some() {
        return Inner::Nothing;
    }
    if let Some(o) = find_option(n, &w.split) {
        return split(o, argv, max_bytes);
    }
    if w.shell {
        return shell(n, argv, max_bytes);
    }
    let mut positionals = n.positionals().skip(w.skip);
    loop {
        let Some((word, i)) = positionals.next() else {
            return Inner::Nothing;
        };
        if w.assignments && word == "-" {
            continue; // `env -`: -i
        }
        if w.assignments && word.contains('=') {
            // GNU env takes every word with `=` before the command as an assignment.
            let name = word.split_once('=').map_or(word, |(n, _)| n);
            if let Some(why) = super::env::dangerous(name) {
                return Inner::Finding(Problem {
                    rule: "wrapper.env.dangerous-variable",
                    severity: Severity::Critical,
                    reason: format!("`{name}` set by env {why}"),
                    hint: "leave it unset; set harmless variables with --env NAME=VALUE".into(),
                    index: i,
                });
            }
            continue;
        }
        return Inner::At(i);
    }
}

/// `env -S STRING`: the string is split into words that take the place of
/// the option, and env reads its arguments again.
fn split(o: &Opt, argv: &[&str], max_bytes: usize) -> Inner {
    let Some(value) = o.value else {
        return Inner::Nothing;
    };
    let words = match lex::lex(value, max_bytes) {
        Ok(w) => w,
        Err(e) => {
            return Inner::Finding(Problem {
                rule: "wrapper.env.split-string",
                severity: Severity::Critical,
                reason: format!(
                    "the string given to env -S cannot be read as plain words: {}",
                    e.reason
                ),
                hint: "give the command as separate words instead of env -S".into(),
                index: o.index,
            });
        }
    };
    let mut out: Vec<(String, usize)> = Vec::with_capacity(argv.len() + words.len());
    out.extend(
        argv[..o.index]
            .iter()
            .enumerate()
            .map(|(i, w)| (w.to_string(), i)),
    );
    // Letters bundled before S (`-iS...`) stay options of env.
    if let Some(prefix) = argv[o.index]
        .get(..o.offset)
        .filter(|p| p.len() > 1 && o.short.is_some())
    {
        out.push((prefix.to_string(), o.index));
    }
    out.extend(words.into_iter().map(|w| (w.text, o.index)));
    out.extend(
        argv.iter()
            .enumerate()
            .skip(o.value_index + 1)
            .map(|(i, w)| (w.to_string(), i)),
    );
    Inner::Words(out)
}

/// `sh -c SCRIPT`: a script that is one simple command is judged as that
/// command; anything else is shell code the string layer cannot read.
fn shell(n: &Normalized, argv: &[&str], max_bytes: usize) -> Inner {
    let has_c = n.options().any(|o| o.short == Some('c'));
    let Some((script, i)) = n.first_positional() else {
        return Inner::Nothing;
    };
    let program = argv[0].rsplit('/').next().unwrap_or(argv[0]);
    if !has_c {
        return Inner::Finding(Problem {
            rule: "wrapper.shell.script-file",
            severity: Severity::Medium,
            reason: format!("`{program} {script}` runs a script file the string layer cannot read"),
            hint: "run the commands of the script one by one".into(),
            index: i,
        });
    }
    let unchecked = |why: String| {
        Inner::Finding(Problem {
            rule: "wrapper.shell.script",
            severity: Severity::Medium,
            reason: format!(
                "the script of `{program} -c` {why}; only the kernel layer confines it"
            ),
            hint: "run the command directly, without a shell, so it can be checked".into(),
            index: i,
        })
    };
    let words = match lex::lex(script, max_bytes) {
        Ok(w) => w,
        Err(e) => return unchecked(format!("is shell code ({})", e.reason)),
    };
    let mut words: Vec<(String, usize)> = words.into_iter().map(|w| (w.text, i)).collect();
    // `exec cmd` and `command cmd` run cmd.
    while words
        .first()
        .is_some_and(|(w, _)| w == "exec" || w == "command")
    {
        words.remove(0);
    }
    match words.first() {
        None => Inner::Nothing,
        Some((w, _)) if SHELL_BUILTINS.contains(&w.as_str()) => {
            unchecked(format!("starts with the shell builtin `{w}`"))
        }
        Some(_) => Inner::Words(words),
    }
}
