//! The door: (policy, request) → `Plan` or `Denial`.
//!
//! Every face builds a `Request` and calls `admit`. A simple command is
//! lexed and judged as one argv (`crate::check`); any other string is
//! parsed and checked as a script (`crate::script`); then the request's
//! environment, cwd and timeout, and the policy's reach (`reach`). The
//! first failure is reported.

pub mod reach;

use crate::check::{Denial, as_seen_from, confine_cwd, env, judge, resolve};
use crate::lex;
use crate::plan::{Plan, StdinMode};
use crate::policy::{Policy, Syntax};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How the command arrives.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum CommandInput {
    /// One string, lexed with bash's rules.
    Line(String),
    /// Words given as they are (`run --argv`): no lexing, same checks.
    Argv(Vec<String>),
}

/// Everything a caller asks for; every face builds one of these (and a
/// job's supervisor receives it serialized in the job's spec).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    pub command: CommandInput,
    /// Working directory relative to the workspace root.
    pub cwd: Option<String>,
    /// Requested deadline; may only shorten the policy's.
    pub timeout_ms: Option<u64>,
    /// Per-call `NAME=VALUE` assignments.
    pub env: Vec<String>,
    pub stdin: StdinMode,
}

impl Request {
    /// A request for `command` with every option at its default.
    pub fn new(command: CommandInput) -> Request {
        Request {
            command,
            cwd: None,
            timeout_ms: None,
            env: Vec::new(),
            stdin: StdinMode::Null,
        }
    }

    pub fn line(command: impl Into<String>) -> Request {
        Request::new(CommandInput::Line(command.into()))
    }

    /// The command as text, for reports.
    pub fn display(&self) -> String {
        match &self.command {
            CommandInput::Line(s) => s.clone(),
            CommandInput::Argv(words) => words.join(" "),
        }
    }
}

/// The verdict, the only one: a request either becomes a `Plan` or is
/// refused. Every face reaches it (`run`, `check`, `-c` and the shell
/// through `engine::execute`, `spawn` before it detaches, the job's
/// supervisor, MCP), so they cannot disagree. `workspace` is the persistent
/// workspace the run will use, if any (a fresh one cannot hold the policy).
///
/// The command is checked first, then the policy's reach: a command that is
/// refused anyway is reported for what is wrong with it.
pub fn admit(policy: &Policy, req: &Request, workspace: Option<&Path>) -> Result<Plan, Denial> {
    admit_into(
        policy,
        req,
        workspace,
        &mut judge::Judgement::default(),
        false,
    )
}

/// `admit`, with what the argument rules saw (for `agent-rsh check`):
/// every rule that fired and the argv as each program reads it.
pub fn admit_explained(
    policy: &Policy,
    req: &Request,
    workspace: Option<&Path>,
) -> (Result<Plan, Denial>, judge::Judgement) {
    let mut judgement = judge::Judgement::default();
    let plan = admit_into(policy, req, workspace, &mut judgement, true);
    (plan, judgement)
}

fn admit_into(
    policy: &Policy,
    req: &Request,
    workspace: Option<&Path>,
    judgement: &mut judge::Judgement,
    explain: bool,
) -> Result<Plan, Denial> {
    let plan = check_into(policy, req, judgement, explain, workspace)?;
    reach::loaded_policy_out_of_reach(policy, workspace)?;
    Ok(plan)
}

/// The command's own checks, without the policy's reach (unit tests).
#[cfg(test)]
fn check(policy: &Policy, req: &Request) -> Result<Plan, Denial> {
    check_into(policy, req, &mut judge::Judgement::default(), false, None)
}

fn check_into(
    policy: &Policy,
    req: &Request,
    judgement: &mut judge::Judgement,
    explain: bool,
    workspace: Option<&Path>,
) -> Result<Plan, Denial> {
    // Compound syntax: a string the simple lexer accepts is one simple
    // command with literal words (the fast path, as with "simple"), unless
    // it names a shell builtin; any other string is parsed and checked as
    // a script.
    let (argv, offsets) = match &req.command {
        CommandInput::Line(line) if policy.syntax == Syntax::Compound => {
            match lex::lex(line, policy.max_command_bytes) {
                Ok(words) if !crate::script::runs_as_builtin(policy, &words[0].text) => {
                    words.into_iter().map(|w| (w.text, w.offset)).unzip()
                }
                _ => return script_plan(policy, req, line, workspace, explain),
            }
        }
        _ => split_at(policy, &req.command)?,
    };
    // A refusal of one word also names where that word starts in the line.
    let locate = |mut d: Denial| {
        if d.offset.is_none() {
            d.offset = d.arg_index.and_then(|i| offsets.get(i).copied());
        }
        d
    };
    let program = resolve(policy, &argv[0]).map_err(locate)?;
    // An absolute path into a known workspace is judged as the relative
    // path it names (`rm -rf /home/me/repo` is `rm -rf .` there).
    let seen = match workspace {
        Some(ws) if argv.iter().any(|w| w.starts_with('/')) => {
            let ws = ws.canonicalize().unwrap_or_else(|_| ws.to_path_buf());
            let here = ws.join(confine_cwd(req.cwd.as_deref())?);
            as_seen_from(&ws, &here, &argv)
        }
        _ => Cow::Borrowed(&argv[..]),
    };
    *judgement = judge::judge(policy, &seen, &mut |name| resolve(policy, name), explain);
    // A wrapper that starts the project's own program (`timeout 5 ./a.out`)
    // under commands.workspace: the interpreter finds that file in the
    // workspace when it runs, and judges the rest as here.
    if let (CommandInput::Line(line), Some(d)) = (&req.command, &judgement.denial)
        && d.rule == "command.path"
        && policy.commands.workspace
        && policy.syntax == Syntax::Compound
    {
        *judgement = judge::Judgement::default();
        return script_plan(policy, req, line, workspace, explain);
    }
    if let Some(d) = judgement.denial.as_mut() {
        *d = locate(d.clone());
        return Err(d.clone());
    }
    let mut warnings: Vec<String> = judgement.warnings().collect();
    let mut env = env::build(policy, &req.env, &mut |name| std::env::var_os(name))?;
    if policy.network.level == crate::policy::Network::Domains
        && policy.network.per_command()
        && policy
            .network
            .grants_program(&policy.commands.search_path, &program)
    {
        env = crate::policy::network::granted_env(&env);
    }
    let cwd = confine_cwd(req.cwd.as_deref())?;
    let timeout_ms = timeout_of(policy, req, &mut warnings)?;
    Ok(plan(
        policy,
        req,
        (argv, program),
        env,
        cwd,
        timeout_ms,
        warnings,
    ))
}

/// The plan of an admitted request that runs `program` as `argv`.
fn plan(
    policy: &Policy,
    req: &Request,
    (argv, program): (Vec<String>, PathBuf),
    env: Vec<(String, String)>,
    cwd: PathBuf,
    timeout_ms: u64,
    warnings: Vec<String>,
) -> Plan {
    Plan {
        command: req.display(),
        argv,
        program,
        env,
        cwd,
        timeout: Duration::from_millis(timeout_ms),
        grace: Duration::from_millis(policy.limits.kill_grace_ms),
        output_cap: policy.output.cap_bytes,
        strip_ansi: policy.output.strip_ansi,
        stdin: req.stdin.clone(),
        path_var: policy
            .commands
            .search_path
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(":"),
        warnings,
        script: None,
        pass_fd: None,
    }
}

/// The timeout a request gets, and a warning when it asked for more.
fn timeout_of(policy: &Policy, req: &Request, warnings: &mut Vec<String>) -> Result<u64, Denial> {
    let max = policy.limits.timeout_ms;
    match req.timeout_ms {
        Some(0) => Err(Denial::new(
            "timeout.zero",
            "a timeout of 0 ms would kill the command before it starts",
            format!("give a timeout between 1 and {max} ms, or omit it"),
        )),
        Some(t) if t > max => {
            warnings.push(format!(
                "requested timeout {t} ms exceeds the policy maximum; using {max} ms"
            ));
            Ok(max)
        }
        Some(t) => Ok(t),
        None => Ok(max),
    }
}

/// A compound command: parsed, every stage checked, and planned as a run
/// of agent-rsh's interpreter.
fn script_plan(
    policy: &Policy,
    req: &Request,
    line: &str,
    workspace: Option<&Path>,
    explain: bool,
) -> Result<Plan, Denial> {
    let cwd = confine_cwd(req.cwd.as_deref())?;
    let known = workspace.map(|w| w.canonicalize().unwrap_or_else(|_| w.to_path_buf()));
    let sp = crate::script::plan(policy, line, &cwd, known.as_deref(), explain)?;
    if let Some(d) = sp.verified.denial() {
        return Err(d.clone());
    }
    let mut warnings = sp.verified.warnings.clone();
    let env = env::build(policy, &req.env, &mut |name| std::env::var_os(name))?;
    let timeout_ms = timeout_of(policy, req, &mut warnings)?;
    let interpreter = (
        vec!["agent-rsh".into(), crate::script::INTERPRETER_ARG.into()],
        crate::script::interpreter_program(),
    );
    Ok(Plan {
        script: Some(std::sync::Arc::new(sp)),
        ..plan(policy, req, interpreter, env, cwd, timeout_ms, warnings)
    })
}

/// The argv, from the lexer or from the caller's words.
pub fn split(policy: &Policy, input: &CommandInput) -> Result<Vec<String>, Denial> {
    split_at(policy, input).map(|(argv, _)| argv)
}

/// The argv and, for a lexed line, the byte offset where each word starts
/// (empty for `--argv` words, which have no line).
fn split_at(policy: &Policy, input: &CommandInput) -> Result<(Vec<String>, Vec<usize>), Denial> {
    match input {
        CommandInput::Line(line) => Ok(lex::lex(line, policy.max_command_bytes)?
            .into_iter()
            .map(|w| (w.text, w.offset))
            .unzip()),
        CommandInput::Argv(words) => {
            if words.is_empty() {
                return Err(Denial::new(
                    "lex.empty",
                    "the command is empty",
                    "give at least the program name after --argv --",
                ));
            }
            let total: usize = words.iter().map(|w| w.len() + 1).sum();
            if total > policy.max_command_bytes {
                return Err(Denial::new(
                    "lex.too-long",
                    format!(
                        "argv is {total} bytes, the policy allows at most {}",
                        policy.max_command_bytes
                    ),
                    "shorten the command, or pass long data in a file in the workspace",
                ));
            }
            for (i, w) in words.iter().enumerate() {
                lex::check_argv_word(w, 0).map_err(|e| Denial::from(e).at_arg(i))?;
            }
            Ok((words.clone(), Vec::new()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::DenialKind;

    fn policy(allow: &[&str]) -> Policy {
        let mut p = Policy::default();
        p.commands.allow = allow.iter().map(|s| s.to_string()).collect();
        p
    }

    /// Every pinned variable is refused from every face of the string
    /// layer that sets one, as HOME is: the rule named, the reason saying
    /// it is pinned, a hint saying what to do instead. (The MCP `env`
    /// argument becomes the request's `env`: see the `run` tool's tests.)
    #[test]
    fn pinned_variables_are_refused_from_every_face() {
        let p = policy(&["true", "env"]);
        for name in env::PINNED {
            let with_env = Request {
                env: vec![format!("{name}=c")],
                ..Request::line("true")
            };
            let faces = [
                ("--env", with_env, "env.dangerous"),
                (
                    "assignment prefix",
                    Request::line(format!("{name}=c true")),
                    "env.dangerous",
                ),
                (
                    "assignment",
                    Request::line(format!("{name}=c; true")),
                    "env.dangerous",
                ),
                (
                    "export",
                    Request::line(format!("export {name}=c; true")),
                    "env.dangerous",
                ),
                (
                    "env NAME=v",
                    Request::line(format!("env {name}=c true")),
                    "wrapper.env.dangerous-variable",
                ),
            ];
            for (face, req, rule) in faces {
                let d = admit(&p, &req, None).unwrap_err();
                assert_eq!(d.rule, rule, "{face} {name}: {d:?}");
                assert!(d.reason.contains(name), "{face} {name}: {d:?}");
                assert!(d.reason.contains("pinned"), "{face} {name}: {d:?}");
                assert!(
                    d.hint.as_deref().is_some_and(|h| h.starts_with("leave it")),
                    "{face} {name}: {d:?}"
                );
            }
        }
    }

    #[test]
    fn a_refused_word_is_located_in_the_line() {
        let p = Policy::embedded();
        let d = check(&p, &Request::line(r"find . -exec id \;")).unwrap_err();
        assert_eq!((d.arg_index, d.offset), (Some(3), Some(13)), "{d:?}");
        let d = check(&p, &Request::line("  nope x")).unwrap_err();
        assert_eq!((d.arg_index, d.offset), (Some(0), Some(2)));
    }

    #[test]
    fn empty_allowlist_denies_everything() {
        let d = check(&policy(&[]), &Request::line("ls")).unwrap_err();
        assert_eq!(d.rule, "command.not-allowed");
    }

    #[test]
    fn paths_are_refused_unless_listed_exactly() {
        let p = policy(&["ls"]);
        for cmd in ["/tmp/x/ls", "/bin/ls", "/usr/bin/ls -la"] {
            let d = check(&p, &Request::line(cmd)).unwrap_err();
            assert_eq!(d.rule, "command.path", "{cmd}");
        }
        // A relative path may be a script the run writes first: it is
        // checked when it runs (the interpreter refuses a program path).
        for cmd in ["./ls", "ls/../../bin/ls"] {
            let plan = check(&p, &Request::line(cmd)).unwrap();
            let sp = plan.script.expect("runs on the interpreter");
            assert_eq!(sp.verified.stages[0].verdict, "atRunTime", "{cmd}");
        }
        let p = policy(&["/bin/ls"]);
        assert!(check(&p, &Request::line("/bin/ls")).is_ok());
    }

    #[test]
    fn allowed_command_resolves_to_canonical_file() {
        let plan = check(&policy(&["ls"]), &Request::line("ls -la")).unwrap();
        assert!(plan.program.is_absolute());
        assert!(plan.program.ends_with("ls"));
        assert_eq!(plan.argv, vec!["ls", "-la"]);
    }

    #[test]
    fn missing_program_is_not_found() {
        let d = check(
            &policy(&["no-such-program-xyz"]),
            &Request::line("no-such-program-xyz"),
        )
        .unwrap_err();
        assert_eq!(d.kind, DenialKind::NotFound);
    }

    #[test]
    fn timeout_may_shorten_never_extend() {
        let p = policy(&["true"]);
        let mut r = Request::line("true");
        r.timeout_ms = Some(500);
        assert_eq!(check(&p, &r).unwrap().timeout, Duration::from_millis(500));
        r.timeout_ms = Some(10_000_000);
        let plan = check(&p, &r).unwrap();
        assert_eq!(plan.timeout, Duration::from_millis(60_000));
        assert_eq!(plan.warnings.len(), 1);
    }

    #[test]
    fn argv_words_obey_character_rules_but_not_quoting() {
        let p = policy(&["echo"]);
        let ok = Request {
            command: CommandInput::Argv(vec!["echo".into(), "a;b $x *".into()]),
            ..Request::line("")
        };
        assert_eq!(check(&p, &ok).unwrap().argv[1], "a;b $x *");
        let bad = Request {
            command: CommandInput::Argv(vec!["echo".into(), "a\nb".into()]),
            ..Request::line("")
        };
        let d = check(&p, &bad).unwrap_err();
        assert_eq!((d.rule.as_str(), d.arg_index), ("lex.newline", Some(1)));
    }
}
