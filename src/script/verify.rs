//! Static checking of a parsed script, before anything runs: every
//! simple command whose words are known is checked as a command (the
//! allowlist, argument rules, guards), every assigned name is screened as
//! `--env` screens it, builtins that agent-rsh does not run are refused,
//! and redirection and `cd` targets that are known to leave the workspace
//! are refused. Commands whose words come from expansions are checked
//! again by the interpreter, after expansion, right before exec.

use super::ast::*;
use super::{expand, feed};
use crate::check::{self, Denial, DenialKind, judge};
use crate::policy::Policy;
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::path::{Component, Path, PathBuf};

/// What the static check knows about one simple command, by id.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Resolved {
    /// The program, resolved through the policy's search path.
    pub program: PathBuf,
    /// The whole argv was known and checked: the interpreter need not
    /// check it again.
    pub checked: bool,
}

/// The verdict on one simple command, for `check --json`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StageVerdict {
    pub id: usize,
    pub offset: usize,
    /// `program`, `builtin`, `assignment`, or `dynamic` (the command name
    /// comes from an expansion).
    pub kind: &'static str,
    /// The argv when every word is known before running.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub argv: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub program: Option<PathBuf>,
    /// `allow`, `deny`, `notFound`, or `atRunTime` (checked after
    /// expansion, before exec).
    pub verdict: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub denial: Option<Denial>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// The result of the static check.
#[derive(Debug, Clone, Default)]
pub struct Verified {
    pub stages: Vec<StageVerdict>,
    /// By simple-command id.
    pub resolved: Vec<Option<Resolved>>,
    pub warnings: Vec<String>,
}

impl Verified {
    /// The refusal of the script: the stage at fault that comes first in
    /// the text.
    pub fn denial(&self) -> Option<&Denial> {
        self.stages
            .iter()
            .filter_map(|s| s.denial.as_ref())
            .min_by_key(|d| d.offset.unwrap_or(usize::MAX))
    }
}

/// What a refusal adds when a glob was judged as the directory it empties.
pub const GLOB_AS_DIR: &str = "a glob of every entry of a directory is judged as the directory";

/// Builtins agent-rsh's interpreter runs itself.
pub const BUILTINS: &[&str] = &[
    "cd",
    "pwd",
    "export",
    "unset",
    "true",
    "false",
    ":",
    "exit",
    "set",
    "break",
    "continue",
    "wait",
    "echo",
    "printf",
    "test",
    "[",
    "[[",
    "((",
    "let",
    "read",
    "command",
    "type",
    "hash",
    "jobs",
    "shift",
    "local",
    "declare",
    "typeset",
    "readonly",
    "return",
    "getopts",
    "trap",
    "mapfile",
    "readarray",
    "pushd",
    "popd",
    "dirs",
    "umask",
    "ulimit",
    "history",
    "help",
    "shopt",
    "alias",
    "unalias",
];

/// Builtins that are programs too: `exec NAME` runs the program, as in
/// bash.
pub fn program_backed(name: &str) -> bool {
    matches!(
        name,
        "pwd" | "true" | "false" | "echo" | "printf" | "test" | "["
    )
}

/// Whether a command's first word runs a script on the interpreter, or
/// may: a shell, `source`, a relative path (a file the run may write
/// before it runs it: checked when it runs), or an absolute path to a
/// shell or interpreter script. An absolute path to anything else is
/// judged now, as a program path.
pub fn runs_script(policy: &Policy, name: &str) -> bool {
    if name == "source" || name == "." || name == "eval" || policy.interprets_shell(name) {
        return true;
    }
    if !name.contains('/') {
        return false;
    }
    if !name.starts_with('/') {
        return true;
    }
    let mut head = [0u8; 512];
    let n = std::fs::File::open(name)
        .and_then(|mut f| std::io::Read::read(&mut f, &mut head))
        .unwrap_or(0);
    n > 0 && super::scripts::classify(&head[..n]) != super::scripts::Shebang::Binary
}

/// Builtins bash has and agent-rsh refuses: rule and hint.
pub fn refused_builtin(name: &str) -> Option<(&'static str, &'static str)> {
    Some(match name {
        "fg" | "bg" | "disown" | "suspend" | "coproc" => (
            "syntax.background",
            "there is no job control in a run: start the command with `&` and `wait` for it, or start a job that must outlive the run with `agent-rsh spawn` (or the MCP `spawn` tool)",
        ),
        "builtin" | "times" | "enable" | "caller" | "complete" | "compgen" | "compopt"
        | "logout" | "bind" | "fc" | "select" | "function" => (
            "syntax.unsupported",
            "this shell builtin is not supported by agent-rsh; write the commands without it",
        ),
        _ => return None,
    })
}

/// Where the check runs: the request's cwd (relative to the workspace)
/// and, when it is known before the run, the workspace's absolute path.
pub struct Context<'a> {
    pub cwd: &'a Path,
    pub workspace: Option<&'a Path>,
}

/// Screens a variable name as `--env` does. Under `commands.workspace`
/// PATH may be set (a virtualenv's `activate`, npm's `node_modules/.bin`):
/// names still resolve through the policy's search path and the PATH
/// directories inside the workspace only.
pub fn screen_name(policy: &Policy, name: &str, offset: usize) -> Result<(), Denial> {
    if name == "PATH" && policy.commands.workspace {
        return Ok(());
    }
    // Build flags and search paths: their value is checked when a program
    // would get it (`check::env::value_verdict`).
    if check::env::read_by_value(name) {
        return Ok(());
    }
    if let Some(why) = check::env::dangerous(name) {
        let mut d = Denial::new(
            "env.dangerous",
            format!("assigning {name} is refused: {why}"),
            "leave it out; if the program really needs it, an administrator can set a fixed value in the policy's env.set",
        );
        d.offset = Some(offset);
        return Err(d);
    }
    Ok(())
}

/// Screens a name assigned for the shell alone (an assignment with no
/// command, or the prefix of a builtin that does not export): `IFS` only
/// steers agent-rsh's own splitting and is never exported, so it may be
/// set; every other name is screened as `--env` screens it.
pub fn screen_shell_name(policy: &Policy, name: &str, offset: usize) -> Result<(), Denial> {
    if name == "IFS" {
        return Ok(());
    }
    screen_name(policy, name, offset)
}

/// Screens a bare assignment (`NAME=value`, no command). It sets a shell
/// variable, which no program sees unless the name is exported, so a name
/// `--env` refuses (`CC`, `PYTHONPATH`, `LD_PRELOAD`) may be set while it is
/// not exported: configure scripts do `CC=${CC:-cc}` and pass `$CC` as a
/// word, which the argument rules see. `export NAME`, `declare -x` and a
/// command's prefix are screened when they happen. PATH and the pinned
/// names stay refused: the interpreter itself reads them.
pub fn screen_bare_name(
    policy: &Policy,
    name: &str,
    offset: usize,
    exported: bool,
) -> Result<(), Denial> {
    if exported || check::env::PINNED.contains(&name) {
        return screen_shell_name(policy, name, offset);
    }
    Ok(())
}

/// Whether a run's environment may hold `name` when it starts: the
/// defaults, the offline and proxy switches, `env.pass` and `env.set`.
pub fn exported_at_start(policy: &Policy, name: &str) -> bool {
    policy.env.pass.iter().any(|p| p == name)
        || policy.env.set.contains_key(name)
        || check::env::DEFAULTS.iter().any(|(k, _)| *k == name)
        || check::env::OFFLINE.iter().any(|(k, _)| *k == name)
        || check::env::proxy_variables()
            .iter()
            .any(|(k, _)| *k == name)
}

/// Devices a redirection may always write to.
pub fn harmless_device(path: &str) -> bool {
    matches!(path, "/dev/null" | "/dev/stdout" | "/dev/stderr")
        || path
            .strip_prefix("/dev/fd/")
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// `..` and `.` removed lexically; None when it climbs above the root.
pub fn normalize(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::RootDir => out.push("/"),
            Component::CurDir => {}
            Component::ParentDir => {
                if out.as_os_str() == "/" || !out.pop() {
                    return None;
                }
            }
            Component::Normal(p) => out.push(p),
            Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

/// The hint of `redirect.outside`: where a redirection may write, and how
/// to write a file there.
pub fn outside_hint(policy: &Policy) -> String {
    let mut h = String::from("write inside the workspace (a relative path), or to /dev/null");
    if let Some(how) = check::hints::write_file(policy) {
        h.push_str("; ");
        h.push_str(how);
    }
    h
}

/// Whether an absolute, normalized path lies in `/tmp`, which a run under
/// `policy` may have as its own (`Policy::private_tmp`): the static check
/// leaves a redirection or `cd` there to the interpreter, which knows
/// whether this run's mount view made it (`script::PRIVATE_TMP`).
pub fn in_private_tmp(policy: &Policy, abs: &Path) -> bool {
    abs.starts_with("/tmp") && policy.private_tmp()
}

/// The hint of a refused write to, or `cd` into, `/tmp`: why this run
/// has no `/tmp` of its own, and where to write instead.
pub fn tmp_hint(policy: &Policy) -> String {
    if policy.confinement == crate::policy::ConfinementMode::Off {
        return "with confinement = \"off\" a run has no /tmp of its own and /tmp is the host's: write to $TMPDIR (the run's own temporary directory) or inside the workspace instead".into();
    }
    if !policy.private_tmp() {
        return format!(
            "a scope of the policy names /tmp, so the run has the host's, writable only where scopes.write says; write to $TMPDIR (the run's own temporary directory) instead, or {}",
            outside_hint(policy)
        );
    }
    "the run's private /tmp needs its mount view, and this run has none (the kernel or the container refuses a mount namespace: `agent-rsh doctor` says why), so /tmp is the host's and not writable; write to $TMPDIR (the run's own temporary directory, e.g. `mktemp`) or inside the workspace instead".into()
}

/// Whether an absolute, normalized path may be written by a redirection:
/// inside the workspace or a write scope, or a harmless device.
pub fn writable(policy: &Policy, workspace: Option<&Path>, abs: &Path) -> bool {
    harmless_device(&abs.to_string_lossy())
        || workspace.is_some_and(|w| abs.starts_with(w))
        || policy.scopes.write.iter().any(|s| abs.starts_with(s))
}

struct Verifier<'p> {
    policy: &'p Policy,
    ctx: &'p Context<'p>,
    /// The cwd relative to the workspace while it is known (no `cd` yet).
    cwd: Option<PathBuf>,
    cache: HashMap<String, Result<PathBuf, Denial>>,
    out: Verified,
    explain: bool,
    /// The names the script defines as functions: a call to one runs the
    /// body, whose commands are checked where they stand.
    functions: HashSet<String>,
    /// The script sources a file (`source`, `.`), which may define
    /// functions, or assigns PATH: a name not on the allowlist, or not
    /// installed, is judged when it runs.
    sources: bool,
    /// What the pipe into a stage of a top-level pipeline carries, by
    /// simple command id (`feed`); a pipe elsewhere is followed when the
    /// stage runs.
    piped: HashMap<usize, Vec<String>>,
}

/// The functions a script defines (in its lists, not inside command
/// substitutions) and the ids of the simple commands in their bodies.
fn functions_of(script: &Script) -> (HashSet<String>, Vec<usize>) {
    fn list(s: &Script, l: &List, out: &mut (HashSet<String>, Vec<usize>)) {
        for ao in l {
            for p in std::iter::once(&ao.first).chain(ao.rest.iter().map(|(_, p)| p)) {
                for st in &p.stages {
                    command(s, &st.command, out);
                }
            }
        }
    }
    fn command(s: &Script, c: &Command, out: &mut (HashSet<String>, Vec<usize>)) {
        match c {
            Command::Simple(_) => {}
            Command::Subshell { body, .. } | Command::Group { body, .. } => list(s, body, out),
            Command::If {
                branches,
                otherwise,
                ..
            } => {
                for (c, b) in branches {
                    list(s, c, out);
                    list(s, b, out);
                }
                if let Some(o) = otherwise {
                    list(s, o, out);
                }
            }
            Command::While {
                condition, body, ..
            } => {
                list(s, condition, out);
                list(s, body, out);
            }
            Command::For { body, .. } | Command::ArithFor { body, .. } => list(s, body, out),
            Command::Case { arms, .. } => {
                for a in arms {
                    list(s, &a.body, out);
                }
            }
            Command::Function { name, body, .. } => {
                out.0.insert(name.clone());
                each_simple_command(s, body, &mut |c| out.1.push(c.id));
                command(s, body, out);
            }
        }
    }
    let mut out = (HashSet::new(), Vec::new());
    list(script, &script.body, &mut out);
    out
}

/// Checks every simple command of the script.
pub fn verify(policy: &Policy, script: &Script, ctx: &Context, explain: bool) -> Verified {
    let mut v = Verifier {
        policy,
        ctx,
        cwd: Some(ctx.cwd.to_path_buf()),
        cache: HashMap::new(),
        out: Verified {
            resolved: vec![None; script.simple_commands],
            ..Default::default()
        },
        explain,
        functions: HashSet::new(),
        sources: false,
        piped: HashMap::new(),
    };
    for ao in &script.body {
        for p in std::iter::once(&ao.first).chain(ao.rest.iter().map(|(_, p)| p)) {
            let mut input = Vec::new();
            for st in &p.stages {
                if let Command::Simple(c) = &st.command
                    && !input.is_empty()
                {
                    v.piped.insert(c.id, input.clone());
                }
                input = feed::carried(&st.command, &input);
            }
        }
    }
    let (functions, in_bodies) = functions_of(script);
    v.functions = functions;
    let mut cmds = Vec::new();
    each_simple(script, &script.body, &mut |c| cmds.push(c));
    // A sourced file (a venv's `activate`) or an assignment to PATH may
    // put a workspace directory on the search path before a name runs.
    v.sources = cmds.iter().any(|c| {
        c.words
            .first()
            .is_some_and(|w| w.is_bare("source") || w.is_bare("."))
            || c.assignments.iter().any(|a| a.name == "PATH")
            || c.words.iter().any(|w| {
                w.parts
                    .first()
                    .is_some_and(|p| matches!(p, Part::Lit(t) if t.starts_with("PATH=")))
            })
    });
    for_each_param_assignment(script, &mut |name, offset| {
        let exported = exported_at_start(policy, name);
        if let Err(d) = screen_bare_name(policy, name, offset, exported) {
            v.out.stages.push(StageVerdict {
                id: usize::MAX,
                offset,
                kind: "assignment",
                argv: None,
                program: None,
                verdict: "deny",
                denial: Some(d),
                warnings: Vec::new(),
            });
        }
    });
    for c in cmds {
        v.command(script, c);
    }
    // A body runs where it is called, not where it is defined: its
    // commands are judged again then, from the directory of the call.
    for id in in_bodies {
        if let Some(Some(r)) = v.out.resolved.get_mut(id) {
            r.checked = false;
        }
    }
    v.out
}

/// Names assigned by `${NAME:=word}` and `for NAME`.
fn for_each_param_assignment(script: &Script, f: &mut dyn FnMut(&str, usize)) {
    fn word(w: &Word, f: &mut dyn FnMut(&str, usize)) {
        for p in &w.parts {
            match p {
                Part::Param(p) => {
                    if matches!(p.op, ParamOp::Assign { .. }) {
                        f(&p.name, p.offset);
                    }
                    if let Some(Subscript::Expr(i)) = &p.index {
                        word(i, f);
                    }
                    for a in p.arg.iter().chain(&p.rep) {
                        word(a, f);
                    }
                }
                Part::Array(a) => {
                    for e in &a.elems {
                        if let Some(i) = &e.index {
                            word(i, f);
                        }
                        word(&e.value, f);
                    }
                }
                Part::Arith(a) => word(&a.expr, f),
                Part::Lit(_) | Part::Quoted(_) | Part::Subst(_) | Part::Proc(_) => {}
            }
        }
    }
    fn list(l: &List, f: &mut dyn FnMut(&str, usize)) {
        for ao in l {
            for p in std::iter::once(&ao.first).chain(ao.rest.iter().map(|(_, p)| p)) {
                for st in &p.stages {
                    command(&st.command, f);
                }
            }
        }
    }
    fn command(c: &Command, f: &mut dyn FnMut(&str, usize)) {
        let redirects = |rs: &[Redirect], f: &mut dyn FnMut(&str, usize)| {
            for r in rs {
                if let RedirTarget::Word(w) = &r.target {
                    word(w, f);
                }
            }
        };
        match c {
            Command::Simple(s) => {
                for a in &s.assignments {
                    if let Some(i) = &a.index {
                        word(i, f);
                    }
                    word(&a.value, f);
                }
                for w in &s.words {
                    word(w, f);
                }
                redirects(&s.redirects, f);
            }
            Command::Subshell {
                body, redirects: r, ..
            }
            | Command::Group {
                body, redirects: r, ..
            } => {
                list(body, f);
                redirects(r, f);
            }
            Command::If {
                branches,
                otherwise,
                redirects: r,
                ..
            } => {
                for (c, b) in branches {
                    list(c, f);
                    list(b, f);
                }
                if let Some(o) = otherwise {
                    list(o, f);
                }
                redirects(r, f);
            }
            Command::While {
                condition,
                body,
                redirects: r,
                ..
            } => {
                list(condition, f);
                list(body, f);
                redirects(r, f);
            }
            Command::For {
                offset,
                name,
                words,
                body,
                redirects: r,
            } => {
                f(name, *offset);
                for w in words.iter().flatten() {
                    word(w, f);
                }
                list(body, f);
                redirects(r, f);
            }
            Command::Case {
                word: w,
                arms,
                redirects: r,
                ..
            } => {
                word(w, f);
                for a in arms {
                    for p in &a.patterns {
                        word(p, f);
                    }
                    list(&a.body, f);
                }
                redirects(r, f);
            }
            Command::ArithFor {
                init,
                condition,
                step,
                body,
                redirects: r,
                ..
            } => {
                for w in [init, condition, step] {
                    word(w, f);
                }
                list(body, f);
                redirects(r, f);
            }
            Command::Function { body, .. } => command(body, f),
        }
    }
    list(&script.body, f);
    // Here-document bodies hold expansions too.
    for h in &script.heredocs {
        word(&h.body, f);
    }
    let _ = list;
}

impl Verifier<'_> {
    fn resolve(&mut self, name: &str) -> Result<PathBuf, Denial> {
        if let Some(r) = self.cache.get(name) {
            return r.clone();
        }
        let r = check::resolve(self.policy, name);
        self.cache.insert(name.to_string(), r.clone());
        r
    }

    fn push(&mut self, v: StageVerdict) {
        self.out.stages.push(v);
    }

    fn command(&mut self, script: &Script, c: &SimpleCommand) {
        let mut verdict = StageVerdict {
            id: c.id,
            offset: c.offset,
            kind: "assignment",
            argv: None,
            program: None,
            verdict: "allow",
            denial: None,
            warnings: Vec::new(),
        };
        let deny = |verdict: &mut StageVerdict, d: Denial| {
            verdict.verdict = if d.kind == DenialKind::NotFound {
                "notFound"
            } else {
                "deny"
            };
            verdict.denial = Some(d);
        };
        // Assignments for the shell alone: none but a builtin's prefix
        // reaches a program's environment.
        let shell_only = match c.words.first() {
            None => true,
            Some(w) => expand::static_fields(w)
                .and_then(|f| f.into_iter().next())
                .is_some_and(|n| {
                    BUILTINS.contains(&n.as_str())
                        && !matches!(n.as_str(), "export" | "declare" | "typeset" | "local")
                }),
        };
        for a in &c.assignments {
            let screened = if c.words.is_empty() {
                let exported = exported_at_start(self.policy, &a.name);
                screen_bare_name(self.policy, &a.name, a.offset, exported)
            } else if shell_only {
                screen_shell_name(self.policy, &a.name, a.offset)
            } else {
                screen_name(self.policy, &a.name, a.offset)
            };
            if let Err(d) = screened {
                deny(&mut verdict, d);
                self.push(verdict);
                return;
            }
        }
        // Redirection targets known before running.
        for r in &c.redirects {
            if let Err(d) = self.redirect(script, r) {
                deny(&mut verdict, d);
                self.push(verdict);
                return;
            }
        }
        if c.words.is_empty() {
            self.push(verdict);
            return;
        }
        // `exec PROGRAM ARGS` is checked as PROGRAM ARGS (the script ends
        // with it); `exec` alone only redirects the shell's own fds.
        let mut words: &[Word] = &c.words;
        if words[0].is_bare("exec") {
            if words.len() == 1 {
                verdict.kind = "builtin";
                verdict.argv = Some(vec!["exec".into()]);
                self.push(verdict);
                return;
            }
            words = &words[1..];
        }
        let exec = words.len() < c.words.len();
        // The argv, with each field's word offset, while it is known.
        let mut argv: Option<Vec<String>> = Some(Vec::new());
        let mut offsets = Vec::new();
        for w in words {
            match (expand::static_fields(w), argv.as_mut()) {
                (Some(fs), Some(a)) => {
                    offsets.extend(std::iter::repeat_n(w.offset, fs.len()));
                    a.extend(fs);
                }
                _ => argv = None,
            }
        }
        let first = match &argv {
            Some(a) => a.first().cloned(),
            None => expand::static_fields(&words[0]).and_then(|f| f.into_iter().next()),
        };
        let Some(name) = first else {
            verdict.kind = "dynamic";
            verdict.verdict = "atRunTime";
            self.push(verdict);
            self.after(c, None);
            return;
        };
        let name_offset = words[0].offset;
        verdict.argv = argv.clone();
        if !exec && self.functions.contains(&name) {
            // A function of the script: its body was checked where it is
            // defined; the call may change the directory.
            verdict.kind = "function";
            self.push(verdict);
            self.after(c, None);
            return;
        }
        if exec
            && !program_backed(&name)
            && (BUILTINS.contains(&name.as_str()) || refused_builtin(&name).is_some())
        {
            let mut d = Denial::new(
                "syntax.exec",
                format!("`exec {name}`: exec runs programs, `{name}` is a shell builtin"),
                "run the builtin without exec",
            )
            .at_arg(0);
            d.offset = Some(name_offset);
            deny(&mut verdict, d);
            self.push(verdict);
            return;
        }
        if runs_script(self.policy, &name) {
            // What the script runs is read and checked when it runs.
            verdict.kind = "script";
            verdict.verdict = "atRunTime";
            self.push(verdict);
            self.after(c, None);
            return;
        }
        if name == "npx" && self.policy.commands.workspace {
            // An installed program of the workspace, found when it runs,
            // or npx judged by its rules then.
            verdict.kind = "program";
            verdict.verdict = "atRunTime";
            self.push(verdict);
            return;
        }
        if BUILTINS.contains(&name.as_str()) && !(exec && program_backed(&name)) {
            verdict.kind = "builtin";
            if let Err(d) = self.builtin(&name, c, argv.as_deref()) {
                deny(&mut verdict, d);
            }
            self.push(verdict);
            self.after(c, Some(&name));
            return;
        }
        verdict.kind = "program";
        if let Some((rule, hint)) = refused_builtin(&name) {
            let mut d = Denial::new(
                rule,
                format!("`{name}` is a shell builtin agent-rsh does not run"),
                hint,
            )
            .at_arg(0);
            d.offset = Some(name_offset);
            deny(&mut verdict, d);
            self.push(verdict);
            return;
        }
        let program = match self.resolve(&name) {
            Ok(p) => p,
            // `commands.workspace`: a name the policy does not list may be
            // the project's own program, found on PATH when it runs.
            // And a sourced file may define it as a function.
            // An allowed name not installed may be the workspace's own
            // (`.venv/bin/pytest`) once PATH has changed.
            Err(d)
                if (self.policy.commands.workspace || self.sources)
                    && (d.rule == "command.not-allowed"
                        || (d.kind == DenialKind::NotFound
                            && self.policy.commands.workspace
                            && self.sources)) =>
            {
                verdict.verdict = "atRunTime";
                self.push(verdict);
                return;
            }
            Err(mut d) => {
                d.offset = Some(name_offset);
                deny(&mut verdict, d);
                self.push(verdict);
                return;
            }
        };
        verdict.program = Some(program.clone());
        let Some(argv) = argv else {
            // The arguments depend on the run: judged after expansion, and
            // now too when only a glob that empties a directory is unknown.
            if let Some(d) = self.judge_globbed(words) {
                deny(&mut verdict, d);
                self.push(verdict);
                return;
            }
            verdict.verdict = "atRunTime";
            self.out.resolved[c.id] = Some(Resolved {
                program,
                checked: false,
            });
            self.push(verdict);
            return;
        };
        let policy = self.policy;
        let explain = self.explain;
        // An absolute path into a known workspace is judged as the relative
        // path it names, as the interpreter judges it (`check::relative_in`).
        let argv = match (self.ctx.workspace, &self.cwd) {
            (Some(ws), Some(cwd)) => check::as_seen_from(ws, &ws.join(cwd), &argv).into_owned(),
            _ => argv,
        };
        // Under commands.workspace a wrapper may start the project's own
        // program (`timeout 5 ./a.out`): a relative path, perhaps built by
        // an earlier command, found and judged when it runs.
        let stdin = feed::stdin_files(c, self.piped.get(&c.id).map_or(&[], Vec::as_slice));
        let mut own = false;
        let mut resolve = |n: &str| match self.resolve(n) {
            Err(d)
                if d.rule == "command.path" && policy.commands.workspace && !n.starts_with('/') =>
            {
                own = true;
                Ok(PathBuf::from(n))
            }
            r => r,
        };
        let j = judge::judge_fed(policy, &argv, &stdin, &mut resolve, explain);
        verdict.warnings = j.warnings().collect();
        self.out.warnings.extend(verdict.warnings.iter().cloned());
        if let Some(mut d) = j.denial {
            d.offset = d
                .arg_index
                .and_then(|i| offsets.get(i).copied())
                .or(Some(c.offset));
            deny(&mut verdict, d);
        } else {
            // A program of the project's own is judged again when it runs.
            if own {
                verdict.verdict = "atRunTime";
            }
            self.out.resolved[c.id] = Some(Resolved {
                program,
                checked: !own,
            });
        }
        self.push(verdict);
    }

    /// The refusal of an argv whose words are known but for globs that
    /// empty a directory (`rm -rf ./*`), judged as those directories.
    fn judge_globbed(&mut self, words: &[Word]) -> Option<Denial> {
        let (mut argv, mut offsets) = (Vec::new(), Vec::new());
        for w in words {
            let fs = expand::static_judged_fields(w)?;
            offsets.extend(std::iter::repeat_n(w.offset, fs.len()));
            argv.extend(fs);
        }
        let policy = self.policy;
        let mut resolve = |n: &str| self.resolve(n);
        let mut d = judge::judge(policy, &argv, &mut resolve, false).denial?;
        d.offset = d.arg_index.and_then(|i| offsets.get(i).copied());
        d.reason = format!("{} ({})", d.reason, GLOB_AS_DIR);
        Some(d)
    }

    /// What a command does to the static cwd.
    fn after(&mut self, c: &SimpleCommand, name: Option<&str>) {
        if name.is_none() || name == Some("cd") {
            let _ = c;
            self.cwd = None;
        }
    }

    fn builtin(
        &mut self,
        name: &str,
        c: &SimpleCommand,
        argv: Option<&[String]>,
    ) -> Result<(), Denial> {
        let at = |d: Denial, i: usize| {
            let mut d = d.at_arg(i);
            d.offset = c.words.get(i).map(|w| w.offset).or(Some(c.offset));
            d
        };
        match name {
            "trap" => {
                // A trap's commands known before running are checked as
                // a script of their own (and again when they run).
                let Some(argv) = argv else { return Ok(()) };
                let mut i = 1;
                while argv.get(i).is_some_and(|a| a == "--") {
                    i += 1;
                }
                let Some(action) = argv.get(i) else {
                    return Ok(());
                };
                let blank = action.lines().all(|l| {
                    let l = l.trim_start();
                    l.is_empty() || l.starts_with('#')
                });
                if blank
                    || argv.len() < i + 2
                    || action == "-"
                    || action.starts_with('-')
                    || action.parse::<u32>().is_ok()
                {
                    return Ok(());
                }
                let inner = match super::parse(action, self.policy.max_command_bytes) {
                    Ok(s) => s,
                    Err(e) => {
                        let mut d = Denial::from(e);
                        d.reason = format!("in the trap's commands: {}", d.reason);
                        return Err(at(d, i));
                    }
                };
                let cwd = self
                    .cwd
                    .clone()
                    .unwrap_or_else(|| self.ctx.cwd.to_path_buf());
                let ctx = Context {
                    cwd: &cwd,
                    workspace: self.ctx.workspace,
                };
                let checked = verify(self.policy, &inner, &ctx, false);
                match checked
                    .stages
                    .iter()
                    .filter(|s| {
                        // A call of one of the script's functions (or of
                        // one a sourced file may define) is judged when
                        // it runs.
                        let name = s.argv.as_ref().and_then(|a| a.first());
                        !name.is_some_and(|n| self.functions.contains(n) || self.sources)
                    })
                    .filter_map(|s| s.denial.as_ref())
                    .find(|d| d.kind != DenialKind::NotFound)
                {
                    Some(d) => {
                        let mut d = d.clone();
                        d.reason = format!("in the trap's commands: {}", d.reason);
                        d.arg_index = None;
                        Err(at(d, i))
                    }
                    None => Ok(()),
                }
            }
            "cd" => {
                let Some(argv) = argv else { return Ok(()) };
                let args: Vec<&String> = argv[1..].iter().filter(|a| *a != "--").collect();
                if args.len() > 1 {
                    return Err(at(
                        Denial::new(
                            "syntax.unsupported",
                            "cd takes one directory",
                            "write `cd DIR`",
                        ),
                        2,
                    ));
                }
                if let Some(target) = args.first()
                    && target.as_str() != "-"
                    && let Err(d) = self.cd_target(target)
                {
                    return Err(at(d, 1));
                }
                Ok(())
            }
            "export" | "unset" => {
                let Some(argv) = argv else { return Ok(()) };
                if argv.len() == 1 && name == "export" {
                    return Err(at(
                        Denial::new(
                            "syntax.unsupported",
                            "`export` without names",
                            "print the environment with an allowed program such as `env`",
                        ),
                        0,
                    ));
                }
                // `unset -f NAME`: functions, not variables.
                if name == "unset" && argv.get(1).is_some_and(|a| a == "-f") {
                    return Ok(());
                }
                for (i, a) in argv.iter().enumerate().skip(1) {
                    if a.starts_with('-') {
                        if name == "unset" && a == "-v" {
                            continue;
                        }
                        return Err(at(
                            Denial::new(
                                "syntax.unsupported",
                                format!("`{name} {a}`"),
                                "use the plain form: export NAME=value, unset NAME",
                            ),
                            i,
                        ));
                    }
                    let n = a.split('=').next().unwrap_or(a);
                    if !crate::lex::is_identifier(n) {
                        continue; // bash reports it and goes on
                    }
                    let off = c.words.get(i).map_or(c.offset, |w| w.offset);
                    if name == "unset" {
                        screen_shell_name(self.policy, n, off)?;
                    } else {
                        screen_name(self.policy, n, off)?;
                    }
                }
                Ok(())
            }
            "set" => {
                let Some(argv) = argv else { return Ok(()) };
                let (opts, positional) = super::options::split_set(&argv[1..]);
                if opts.is_empty() && positional.is_some() {
                    return Ok(());
                }
                super::options::parse_set(opts)
                    .map(|_| ())
                    .map_err(|(i, d)| at(d, i + 1))
            }
            _ => Ok(()),
        }
    }

    fn cd_target(&self, target: &str) -> Result<(), Denial> {
        let outside = || {
            Denial::new(
                "cd.outside",
                format!("`cd {target}` leaves the workspace"),
                "stay inside the workspace; give a directory relative to it",
            )
        };
        if target.starts_with('/') {
            let abs = normalize(Path::new(target)).ok_or_else(outside)?;
            if self.ctx.workspace.is_some_and(|w| abs.starts_with(w))
                || in_private_tmp(self.policy, &abs)
            {
                return Ok(());
            }
            return Err(outside());
        }
        if let Some(cwd) = &self.cwd
            && normalize(&Path::new("/").join(cwd).join(target)).is_none()
        {
            return Err(outside());
        }
        Ok(())
    }

    fn redirect(&self, script: &Script, r: &Redirect) -> Result<(), Denial> {
        let _ = script;
        if !r.op.writes() {
            return Ok(());
        }
        let RedirTarget::Word(w) = &r.target else {
            return Ok(());
        };
        let Some(target) = expand::static_string(w) else {
            return Ok(());
        };
        let outside = || {
            let mut d = Denial::new(
                "redirect.outside",
                format!(
                    "the redirection writes to `{target}`, outside the workspace and the policy's write scopes"
                ),
                outside_hint(self.policy),
            );
            d.offset = Some(r.offset);
            d
        };
        if target.starts_with('/') {
            let abs = normalize(Path::new(&target)).ok_or_else(outside)?;
            if writable(self.policy, self.ctx.workspace, &abs) || in_private_tmp(self.policy, &abs)
            {
                return Ok(());
            }
            return Err(outside());
        }
        if let Some(cwd) = &self.cwd
            && normalize(&Path::new("/").join(cwd).join(&target)).is_none()
        {
            return Err(outside());
        }
        Ok(())
    }
}
