//! Compound commands (`syntax = "compound"`): agent-rsh is the shell.
//!
//! The string is parsed as bash parses it (`parse`), every simple command
//! whose words are known before running is checked as a command
//! (`verify`), and the script runs in the confined process (`interp`),
//! which opens every redirection, expands every glob and re-checks every
//! command whose words come from expansions, right before it is exec'd.
//! No `/bin/sh` is involved anywhere.

pub mod arith;
pub mod ast;
pub mod expand;
pub mod feed;
pub mod glob;
pub mod interp;
pub mod job;
pub mod options;
pub mod parse;
pub mod render;
pub mod scripts;
pub mod verify;

pub use parse::parse;

#[cfg(test)]
mod parse_tests;

use crate::check::Denial;
use crate::policy::Policy;
use std::path::{Path, PathBuf};

/// What bash prints on standard error (after its `name: ` prefix) when a
/// builtin, an expansion or an arithmetic expression fails: the command
/// fails with it and the script goes on, as in bash.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ShellError(pub String);

impl From<String> for ShellError {
    fn from(message: String) -> Self {
        ShellError(message)
    }
}

impl From<&str> for ShellError {
    fn from(message: &str) -> Self {
        ShellError(message.to_string())
    }
}

/// The hidden first argument that makes agent-rsh the interpreter.
pub const INTERPRETER_ARG: &str = "__script";

/// A checked compound command, ready for the interpreter.
#[derive(Debug, Clone)]
pub struct ScriptPlan {
    pub source: String,
    pub script: ast::Script,
    pub verified: verify::Verified,
}

/// Parses and checks a compound command. A parse error is the refusal;
/// stage refusals are in `verified` (see `Verified::denial`).
pub fn plan(
    policy: &Policy,
    line: &str,
    cwd: &Path,
    workspace: Option<&Path>,
    explain: bool,
) -> Result<ScriptPlan, Denial> {
    let script = parse(line, policy.max_command_bytes)?;
    let ctx = verify::Context { cwd, workspace };
    let verified = verify::verify(policy, &script, &ctx, explain);
    Ok(ScriptPlan {
        source: line.to_string(),
        script,
        verified,
    })
}

/// The program a compound command's run executes (`agent-rsh __script
/// FD`), and the shells of a run's mount view: agent-rsh's own binary,
/// canonical. This is the one place that adds agent-rsh to what a run may
/// execute: the plan names it as its program, so the Landlock rule set
/// grants it EXECUTE as it does any plan's program. The engine refuses to
/// run it from a place the run could write.
pub fn interpreter_program() -> PathBuf {
    std::env::current_exe()
        .and_then(std::fs::canonicalize)
        .unwrap_or_else(|_| PathBuf::from("/proc/self/exe"))
}

/// Where a run's mount view holds the job of its nested shells, on the
/// view's read-only root: nothing the run does to its environment or
/// descriptors changes what a nested shell checks.
pub const SHELL_JOB: &str = "/.agent-rsh/job.json";

/// A file on a run's read-only view root that exists when `/tmp` in the
/// view is the run's private one (the workspace's, kept in its state
/// directory, or a tmpfs of a fresh workspace's run): the interpreter lets
/// a redirection or `cd` reach `/tmp` only then.
pub const PRIVATE_TMP: &str = "/.agent-rsh/private-tmp";

/// What a nested shell in a run's mount view reads from `SHELL_JOB`: the
/// run's policy and workspace.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
pub struct ShellJob {
    pub policy: Policy,
    pub workspace: PathBuf,
}

/// Whether a simple command named `name` is the shell's business rather
/// than a program's: builtins that change the shell's state (`cd`,
/// `export`, `exit`, ...) and those agent-rsh refuses (`eval`, ...) go
/// through the script path even when the string is one simple command;
/// `pwd`, `true`, `false`, `echo`, `printf`, `test` and `[` run as the
/// programs when the policy allows them (so a command alone is judged and
/// reported as that program, argument rules included), else as builtins.
/// The programs and the builtins print the same, except where coreutils'
/// `echo -e` and `printf` read escapes bash's do not (`echo -e '\101'`).
pub fn runs_as_builtin(policy: &Policy, name: &str) -> bool {
    let own_program = policy.commands.workspace && !policy.commands.allow.iter().any(|a| a == name);
    // `npx NAME` of an installed program is that program (interp.rs).
    let npx = policy.commands.workspace && name == "npx";
    if verify::refused_builtin(name).is_some()
        || name == "exec"
        || verify::runs_script(policy, name)
        || own_program
        || npx
    {
        return true;
    }
    if !verify::BUILTINS.contains(&name) {
        return false;
    }
    !matches!(
        name,
        "pwd" | "true" | "false" | "echo" | "printf" | "test" | "["
    ) || !policy.commands.allow.iter().any(|a| a == name)
}
