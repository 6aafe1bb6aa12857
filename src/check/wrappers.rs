//! Wrappers: programs whose arguments are another command (`timeout 5 rm
//! -rf /`, `env -S 'sh -c id'`, `xargs cat`, `bash -c 'ls'`).
//!
//! The inner command is found by the wrapper's own grammar (its options
//! end at the first positional), then judged as a command in its own right.

use super::args::{Normalized, Opt, name_matches};
use super::rules::{Severity, find_option, find_options};
use crate::lex;
use crate::policy::Policy;
use regex::Regex;
use serde::{Deserialize, Serialize};
use std::sync::OnceLock;

/// Wrappers nest at most this deep; a deeper command is refused.
pub const MAX_DEPTH: usize = 5;

/// At most this many commands are judged for one argv (find's actions,
/// each read once per starting point outside, nest): more are refused, so
/// a crafted line cannot make the judge's work grow without bound.
pub const MAX_COMMANDS: usize = 64;

/// A wrapper of a pack that is not well formed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WrapperError {
    #[error("wrapper: commands must name at least one program")]
    NoCommands,
    #[error("wrapper {0}: opaque_reason and opaque_hint are required when it can be opaque")]
    NoOpaqueReason(String),
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WrapperSpec {
    pub commands: Vec<String>,
    /// Only for these subcommands of the program (`git for-each-repo`);
    /// empty: the program itself.
    pub subcommand: Vec<String>,
    /// The inner command is the program itself, run with the words that
    /// follow the options (`git for-each-repo --config K ARGS` runs
    /// `git ARGS` in each repository).
    pub runs_itself: bool,
    /// The options the wrapper (or its subcommand) takes: any other one
    /// before the inner command makes what runs unreadable (`wrapper.opaque`).
    pub known_options: Vec<String>,
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
    /// Option words before the inner command that mean nothing is started
    /// (`screen -ls`): a regex over the raw word.
    pub no_command_word: Option<String>,
    /// The built-in pack the wrapper belongs to: with that pack switched
    /// off (`[packs] off`), the inner commands are left to the kernel layer.
    pub pack: Option<String>,
    /// Words that start an inner command ending at `;`, or at `+` right
    /// after `{}` (find's `-exec`, `-execdir`, `-ok`, `-okdir`). `{}` is
    /// replaced by each starting point outside the workspace, if any.
    pub actions: Vec<String>,
    /// Options whose value is a shell script the wrapper runs with
    /// `sh -c` (`su -c`, `script -c`, `split --filter`).
    pub script: Vec<String>,
    /// The inner command is a shell script when its first word is one of
    /// these: the next word is the script (`flock FILE -c SCRIPT`).
    pub script_word: Vec<String>,
    /// Only `script` options start a command; positionals are data
    /// (`split`, `su USER`, `script FILE`).
    pub script_only: bool,
    /// The inner command's words are joined with spaces into a shell
    /// script run with `sh -c` (`watch`) unless an `exec_with` option is given.
    pub join: bool,
    pub exec_with: Vec<String>,
    /// Without an inner command the wrapper starts an interactive shell
    /// (`su`, `screen`, `script`): refused as `wrapper.opaque`.
    pub shell_without_command: bool,
    /// Options that make what runs unreadable (`screen -X`, `su -s`).
    pub opaque_with: Vec<String>,
    /// What runs is never on the command line (`at`, `crontab FILE`,
    /// `parallel`): refused as `wrapper.opaque` unless `no_command_with`.
    pub opaque: bool,
    /// Options naming a module the interpreter runs as a program
    /// (python's `-m`): with one of `modules`, the words after it are read
    /// as that program's (`python3 -m pip uninstall x` as `pip uninstall
    /// x`) for the rules; the interpreter is what runs, so the program
    /// need not be allowed. Without one, the interpreter has no inner command.
    pub module_option: Vec<String>,
    /// Module name -> the program (and words) whose command line it takes.
    pub modules: std::collections::BTreeMap<String, String>,
    /// Options whose value is inline code (`python3 -c`, `perl -e`).
    pub code_option: Vec<String>,
    /// Calls in that code whose effect is a command: each match of
    /// `pattern` whose `arg` group is a literal is read as `command` with
    /// that literal appended (`os.system('rm -rf .git')` as `sh -c 'rm -rf
    /// .git'`, `shutil.rmtree('/')` as `rm -rf /`), by that command's
    /// rules; the interpreter is what runs.
    pub calls: Vec<CallSpec>,
    /// Why the string layer cannot read it, and what to run instead.
    pub opaque_reason: String,
    pub opaque_hint: String,
    #[serde(skip)]
    no_command_re: OnceLock<Option<Regex>>,
    #[serde(skip)]
    calls_re: OnceLock<Vec<Option<Regex>>>,
}

/// A call in inline code read as a command (`WrapperSpec::calls`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CallSpec {
    /// A regex with a group named `arg`: the call's literal argument.
    pub pattern: String,
    /// The command it is read as; the literal is its last word.
    pub command: Vec<String>,
}

impl WrapperSpec {
    pub fn applies_to(&self, program: &str) -> bool {
        self.commands.iter().any(|c| name_matches(c, program))
    }

    /// Does it apply to this subcommand (`None`: the program has none)?
    pub fn applies_to_subcommand(&self, subcommand: Option<&str>) -> bool {
        self.subcommand.is_empty()
            || subcommand.is_some_and(|s| self.subcommand.iter().any(|x| x == s))
    }

    /// Checks the wrapper is well formed (packs load it once per process).
    pub fn validate(&self) -> Result<(), WrapperError> {
        let Some(name) = self.commands.first() else {
            return Err(WrapperError::NoCommands);
        };
        // no_command_word compiles on first use (a unit test compiles it):
        // compiling at load would cost every process.
        let opaque = self.opaque
            || self.shell_without_command
            || !self.opaque_with.is_empty()
            || !self.known_options.is_empty();
        if opaque && (self.opaque_reason.trim().is_empty() || self.opaque_hint.trim().is_empty()) {
            return Err(WrapperError::NoOpaqueReason(name.clone()));
        }
        Ok(())
    }

    /// Compiles `calls` (once per process, on first use).
    pub fn calls_re(&self) -> &[Option<Regex>] {
        self.calls_re.get_or_init(|| {
            self.calls
                .iter()
                .map(|c| Regex::new(&c.pattern).ok())
                .collect()
        })
    }

    /// Compiles `no_command_word` (the packs' unit test calls it for each).
    pub fn no_command_re(&self) -> Option<&Regex> {
        self.no_command_re
            .get_or_init(|| {
                self.no_command_word
                    .as_deref()
                    .and_then(|p| Regex::new(p).ok())
            })
            .as_ref()
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
    /// Several commands (find's actions), each judged on its own.
    Commands(Vec<Vec<(String, usize)>>),
    /// The wrapper itself runs, reading these words as the named program
    /// would (`python3 -m pip ...`): judged by that program's rules, not
    /// looked up on the allowlist.
    ReadAs(Vec<Vec<(String, usize)>>),
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
pub fn inner(w: &WrapperSpec, n: &Normalized, argv: &[&str], policy: &Policy) -> Inner {
    let max_bytes = policy.max_command_bytes;
    // First: an option that makes it unreadable outweighs one that would
    // mean "nothing runs" (`at -l -b`: the last mode given wins).
    if let Some(o) = find_option(n, &w.opaque_with) {
        return opaque(w, argv, o.index);
    }
    if find_option(n, &w.no_command_with).is_some() {
        return Inner::Nothing;
    }
    if let Some(o) = unknown_option(w, n) {
        return opaque(w, argv, o.index);
    }
    if let Some(re) = w.no_command_re() {
        // Option words only: `screen -S -ls sh` names a session `-ls`.
        let end = n.first_positional().map_or(argv.len(), |(_, i)| i);
        if n.options()
            .filter(|o| o.index < end)
            .any(|o| re.is_match(argv[o.index]))
        {
            return Inner::Nothing;
        }
    }
    if !w.actions.is_empty() {
        return actions(w, argv);
    }
    // An interpreter runs no other program of its own: only its inline
    // code's calls and its modules are read as commands.
    if find_option(n, &w.code_option).is_some() {
        return calls(w, n);
    }
    if !w.module_option.is_empty() {
        return module(w, n, argv);
    }
    if !w.code_option.is_empty() {
        return Inner::Nothing;
    }
    if w.opaque {
        return opaque(w, argv, 0);
    }
    if let Some(o) = find_option(n, &w.split) {
        return split(o, argv, max_bytes);
    }
    if find_option(n, &w.script).is_some() {
        // Each one is judged: the program may run the last one given.
        let scripts: Vec<Vec<(String, usize)>> = find_options(n, &w.script)
            .filter_map(|o| o.value.map(|v| shell_words(v, o.value_index)))
            .collect();
        return match scripts.is_empty() {
            true => Inner::Nothing,
            false => Inner::Commands(scripts),
        };
    }
    if w.shell {
        return shell(n, argv, max_bytes);
    }
    if w.script_only {
        return match w.shell_without_command {
            true => opaque(w, argv, 0),
            false => Inner::Nothing,
        };
    }
    if w.join && find_option(n, &w.exec_with).is_none() {
        let mut words = n.positionals().skip(w.skip).peekable();
        let Some(&(_, at)) = words.peek() else {
            return Inner::Nothing;
        };
        let script: Vec<&str> = words.map(|(word, _)| word).collect();
        return run_by_shell(&script.join(" "), at);
    }
    let mut positionals = n.positionals().skip(w.skip);
    loop {
        let Some((word, i)) = positionals.next() else {
            return match w.shell_without_command {
                true => opaque(w, argv, 0),
                false => Inner::Nothing,
            };
        };
        if w.script_word.iter().any(|s| s == word) {
            return match positionals.next() {
                Some((script, k)) => run_by_shell(script, k),
                None => Inner::Nothing,
            };
        }
        if w.assignments && word == "-" {
            continue; // `env -`: -i
        }
        if w.assignments && word.contains('=') {
            // GNU env takes every word with `=` before the command as an assignment.
            let (name, value) = word.split_once('=').unwrap_or((word, ""));
            let why = match super::env::value_verdict(policy, None, name, value) {
                super::env::ValueVerdict::Safe => None,
                super::env::ValueVerdict::Refused(why) => Some(why),
                super::env::ValueVerdict::ByName => super::env::dangerous(name)
                    .map(|w| format!("`{name}` set by env is refused: {w}")),
            };
            if let Some(reason) = why {
                return Inner::Finding(Problem {
                    rule: "wrapper.env.dangerous-variable",
                    severity: Severity::Critical,
                    reason,
                    hint: "leave it unset; set harmless variables with --env NAME=VALUE".into(),
                    index: i,
                });
            }
            continue;
        }
        if w.runs_itself {
            // The program again, with the words from the inner command on.
            let mut words = vec![(argv[0].to_string(), 0)];
            words.extend((i..argv.len()).map(|k| (argv[k].to_string(), k)));
            return Inner::Words(words);
        }
        return Inner::At(i);
    }
}

/// `python3 -m MODULE ARGS`: ARGS as the program MODULE stands for reads
/// them. The module's value is the last one given before the positionals.
fn module(w: &WrapperSpec, n: &Normalized, argv: &[&str]) -> Inner {
    let Some(o) = find_options(n, &w.module_option).last() else {
        return Inner::Nothing;
    };
    let Some(program) = o.value.and_then(|m| w.modules.get(m)) else {
        return Inner::Nothing;
    };
    let mut words: Vec<(String, usize)> = program
        .split_whitespace()
        .map(|p| (p.to_string(), o.value_index))
        .collect();
    words.extend((o.value_index + 1..argv.len()).map(|k| (argv[k].to_string(), k)));
    Inner::ReadAs(vec![words])
}

/// At most this many calls of inline code are read as commands.
const MAX_CALLS: usize = 16;

/// Inline code (`python3 -c CODE`): each call `calls` knows, with a
/// literal argument, read as the command it amounts to.
fn calls(w: &WrapperSpec, n: &Normalized) -> Inner {
    let mut out = Vec::new();
    let codes = find_options(n, &w.code_option).filter_map(|o| Some((o.value?, o.value_index)));
    for ((code, at), (spec, re)) in
        codes.flat_map(|c| w.calls.iter().zip(w.calls_re()).map(move |x| (c, x)))
    {
        let Some(re) = re else { continue };
        for m in re.captures_iter(code).take(MAX_CALLS) {
            let Some(arg) = m.name("arg") else { continue };
            let mut words: Vec<(String, usize)> =
                spec.command.iter().map(|c| (c.clone(), at)).collect();
            words.push((arg.as_str().to_string(), at));
            out.push(words);
        }
    }
    out.truncate(MAX_CALLS);
    match out.is_empty() {
        true => Inner::Nothing,
        false => Inner::ReadAs(out),
    }
}

/// The first option before the inner command that is not among
/// `known_options` (options before the subcommand belong to the program).
fn unknown_option<'n, 'a>(w: &WrapperSpec, n: &'n Normalized<'a>) -> Option<&'n Opt<'a>> {
    if w.known_options.is_empty() {
        return None;
    }
    let from = n.subcommand.map_or(0, |(_, i)| i);
    let end = n.first_positional().map_or(usize::MAX, |(_, i)| i);
    let known: Vec<&Opt> = find_options(n, &w.known_options).collect();
    n.options()
        .filter(|o| o.index > from && o.index < end)
        .find(|o| !known.iter().any(|k| std::ptr::eq(*k, *o)))
}

/// `sh -c SCRIPT`, as the wrapper starts it: the shell must be allowed,
/// and the script is judged as a shell's (`wrappers.toml`, `shell`).
fn run_by_shell(script: &str, index: usize) -> Inner {
    Inner::Words(shell_words(script, index))
}

fn shell_words(script: &str, index: usize) -> Vec<(String, usize)> {
    vec![
        ("sh".to_string(), index),
        ("-c".to_string(), index),
        (script.to_string(), index),
    ]
}

/// What runs cannot be read from the command line.
fn opaque(w: &WrapperSpec, argv: &[&str], index: usize) -> Inner {
    let program = argv[0].rsplit('/').next().unwrap_or(argv[0]);
    Inner::Finding(Problem {
        rule: "wrapper.opaque",
        severity: Severity::High,
        reason: format!(
            "`{program}` {}; the string layer cannot judge it",
            w.opaque_reason
        ),
        hint: w.opaque_hint.clone(),
        index,
    })
}

/// find's actions: every `-exec CMD ... ;` (or `{} +`) is a command of its
/// own. `{}` stands for the files found; when a starting point lies
/// outside the workspace (absolute, or climbing with `..`), each command is
/// judged once with `{}` as each such starting point, so `find / -exec rm
/// -rf {} +` reads as `rm -rf /`. An unterminated action is judged too
/// (find refuses it, but nothing is lost by looking).
fn actions(w: &WrapperSpec, argv: &[&str]) -> Inner {
    // Options before the starting points: -H -L -P, -D LIST, -O LEVEL.
    let mut k = 1;
    while let Some(word) = argv.get(k) {
        match *word {
            "-H" | "-L" | "-P" => k += 1,
            "-D" => k += 2,
            o if o.starts_with("-O") => k += 1,
            _ => break,
        }
    }
    let starts = argv
        .iter()
        .skip(k)
        .take_while(|a| !(a.starts_with('-') || **a == "(" || **a == "!"));
    let mut outside: Vec<String> = Vec::new();
    let mut seen: Vec<String> = Vec::new();
    let mut inside: Vec<&str> = Vec::new();
    for a in starts {
        let p = super::rules::lexical_path(a);
        if (p.starts_with('/') || p == ".." || p.starts_with("../")) && !seen.contains(&p) {
            seen.push(p);
            outside.push(a.to_string());
        } else if !p.starts_with('/') {
            inside.push(a);
        }
    }
    outside.extend(repository_candidates(&inside, &argv[k..]));
    let mut commands = Vec::new();
    let mut j = k;
    while j < argv.len() {
        if !w.actions.iter().any(|a| a == argv[j]) {
            j += 1;
            continue;
        }
        let from = j + 1;
        let mut end = from;
        while end < argv.len() && argv[end] != ";" && !(argv[end] == "+" && argv[end - 1] == "{}") {
            end += 1;
        }
        if end > from {
            let words = || (from..end).map(|i| (argv[i], i));
            if outside.is_empty() {
                commands.push(words().map(|(a, i)| (a.to_string(), i)).collect());
            }
            for start in &outside {
                commands.push(words().map(|(a, i)| (a.replace("{}", start), i)).collect());
            }
        }
        j = end + 1;
    }
    if commands.is_empty() {
        Inner::Nothing
    } else {
        Inner::Commands(commands)
    }
}

/// What `{}` stands for that matters to a guard, for starting points in the
/// workspace: the starting point itself, which find yields first unless a
/// name test excludes it (`find . -exec rm -rf {} +` reads as `rm -rf .`),
/// and the repository below it, `START/.git`, when a name or path test
/// could match it (`find . -name .git -exec rm -rf {} +` reads as `rm -rf
/// ./.git`; `-name '.g*'` too). Tests are read as a union, whatever the
/// operators between them: a path find might yield is a candidate.
fn repository_candidates(starts: &[&str], expr: &[&str]) -> Vec<String> {
    let mut names: Vec<(&str, bool)> = Vec::new();
    let mut paths: Vec<(&str, bool)> = Vec::new();
    for pair in expr.windows(2) {
        match pair[0] {
            "-name" => names.push((pair[1], false)),
            "-iname" => names.push((pair[1], true)),
            "-path" | "-wholename" => paths.push((pair[1], false)),
            "-ipath" | "-iwholename" => paths.push((pair[1], true)),
            _ => {}
        }
    }
    let matches = |(pat, fold): (&str, bool), text: &str| {
        if fold {
            fnmatch(&pat.to_lowercase(), &text.to_lowercase())
        } else {
            fnmatch(pat, text)
        }
    };
    let tests = !names.is_empty() || !paths.is_empty();
    let mut out = Vec::new();
    for start in starts {
        let base = start
            .trim_end_matches('/')
            .rsplit('/')
            .next()
            .unwrap_or(start);
        let git = format!("{}/.git", start.trim_end_matches('/'));
        let start_named =
            names.iter().any(|&n| matches(n, base)) || paths.iter().any(|&p| matches(p, start));
        if !tests || start_named {
            out.push(start.to_string());
        }
        if names.iter().any(|&n| matches(n, ".git")) || paths.iter().any(|&p| matches(p, &git)) {
            out.push(git);
        }
    }
    out
}

/// fnmatch(3) without flags, as find's -name and -path use it: `*` and `?`
/// match any character, `/` and a leading `.` included; `[...]` a class
/// (`!` or `^` negates, `a-z` ranges); a backslash quotes. Iterative, with
/// one star to return to, so a hostile pattern costs O(pattern x text).
fn fnmatch(pat: &str, text: &str) -> bool {
    enum Tok {
        Star,
        Any,
        Char(char),
        Class(Vec<(char, char)>, bool),
    }
    let p: Vec<char> = pat.chars().collect();
    let mut toks = Vec::new();
    let mut i = 0;
    while i < p.len() {
        match p[i] {
            '*' => toks.push(Tok::Star),
            '?' => toks.push(Tok::Any),
            '\\' if i + 1 < p.len() => {
                i += 1;
                toks.push(Tok::Char(p[i]));
            }
            '[' => {
                let mut k = i + 1;
                let negate = matches!(p.get(k), Some('!') | Some('^'));
                if negate {
                    k += 1;
                }
                let mut ranges = Vec::new();
                let mut first = true;
                while k < p.len() && (first || p[k] != ']') {
                    first = false;
                    if k + 2 < p.len() && p[k + 1] == '-' && p[k + 2] != ']' {
                        ranges.push((p[k], p[k + 2]));
                        k += 3;
                    } else {
                        ranges.push((p[k], p[k]));
                        k += 1;
                    }
                }
                if k < p.len() {
                    toks.push(Tok::Class(ranges, negate));
                    i = k;
                } else {
                    toks.push(Tok::Char('['));
                }
            }
            c => toks.push(Tok::Char(c)),
        }
        i += 1;
    }
    let t: Vec<char> = text.chars().collect();
    let one = |tok: &Tok, c: char| match tok {
        Tok::Any => true,
        Tok::Char(x) => *x == c,
        Tok::Class(r, negate) => r.iter().any(|&(a, b)| a <= c && c <= b) != *negate,
        Tok::Star => false,
    };
    let (mut pi, mut ti) = (0, 0);
    let mut back: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < toks.len() && matches!(toks[pi], Tok::Star) {
            back = Some((pi, ti));
            pi += 1;
        } else if pi < toks.len() && one(&toks[pi], t[ti]) {
            pi += 1;
            ti += 1;
        } else if let Some((bp, bt)) = back {
            pi = bp + 1;
            ti = bt + 1;
            back = Some((bp, bt + 1));
        } else {
            return false;
        }
    }
    toks[pi..].iter().all(|t| matches!(t, Tok::Star))
}

/// `env -S STRING`: the string is split into words that take the place of
/// the option, and env reads its arguments again.
fn split(o: &Opt, argv: &[&str], max_bytes: usize) -> Inner {
    let Some(value) = o.value else {
        return Inner::Nothing;
    };
    // env reads its own escapes, not a shell's: `\_` separates words
    // outside quotes (`rm -rf\_.git` is `rm -rf .git`), `\c` ends the
    // string, `\t` is a tab. Lexed as a shell would, such a string would
    // be judged as other words than env runs, so none is read.
    if value.contains('\\') {
        return Inner::Finding(Problem {
            rule: "wrapper.env.split-string",
            severity: Severity::Critical,
            reason: "the string given to env -S has a backslash escape, which env reads \
                     otherwise than a shell (`\\_` separates words)"
                .into(),
            hint: "give the command as separate words instead of env -S".into(),
            index: o.index,
        });
    }
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
    // `sh -s ARG...`: the script is read from the input and the words are
    // its arguments (guard.obfuscation.stdin-script says so).
    if !has_c && n.options().any(|o| o.short == Some('s')) {
        return Inner::Nothing;
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnmatch_reads_patterns_as_find_does() {
        for (pat, text, want) in [
            (".git", ".git", true),
            (".g*", ".git", true),
            ("*", ".git", true),
            ("*.pyc", ".git", false),
            ("[.]git", ".git", true),
            ("[!.]git", ".git", false),
            ("?git", ".git", true),
            ("*/.git", "./.git", true),
            ("\\.git", ".git", true),
            ("[", "[", true),
            (
                "a*b*c*d*e*f*g*h*i*j*k",
                "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
                false,
            ),
        ] {
            assert_eq!(fnmatch(pat, text), want, "{pat} {text}");
        }
    }

    #[test]
    fn find_gives_braces_the_start_and_the_repository_it_could_match() {
        let c = |starts: &[&str], expr: &[&str]| repository_candidates(starts, expr);
        assert_eq!(c(&["."], &["-exec", "rm"]), vec!["."]);
        assert_eq!(c(&["."], &["-name", ".git"]), vec!["./.git"]);
        assert_eq!(c(&["src"], &["-name", "*.pyc"]), Vec::<String>::new());
        assert_eq!(c(&["a/"], &["-iname", ".GI?"]), vec!["a/.git"]);
        assert_eq!(c(&["."], &["-path", "./.git"]), vec!["./.git"]);
    }
}
