//! Checks: (policy, request) → `Plan` or `Denial`.
//!
//! Pure apart from resolving the program through the policy's search path.
//! The order is the contract: lexing, first word, argument rules, guards
//! and wrappers (`judge`), environment, cwd, timeout; the first failure is
//! reported.

pub mod args;
pub mod env;
pub mod hints;
pub mod judge;
pub mod packs;
pub mod reach;
pub mod rules;
pub mod wrappers;

pub use crate::denial::{Denial, DenialKind};
use crate::lex;
use crate::plan::{Plan, StdinMode};
use crate::policy::{Policy, Syntax};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::path::{Component, Path, PathBuf};
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
    if let Some(d) = judgement.denial.as_mut() {
        *d = locate(d.clone());
        return Err(d.clone());
    }
    let mut warnings: Vec<String> = judgement.warnings().collect();
    let env = env::build(policy, &req.env, &mut |name| std::env::var_os(name))?;
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

/// First word: on the allowlist, then found on the policy's search path.
pub fn resolve(policy: &Policy, first: &str) -> Result<PathBuf, Denial> {
    let listed = policy.commands.allow.iter().any(|a| a == first);
    if first.contains('/') {
        if !listed {
            let base = first.rsplit('/').next().unwrap_or(first);
            let hint = if policy.commands.allow.iter().any(|a| a == base) {
                format!("use the bare name `{base}`; it is looked up on the policy's search path")
            } else {
                format!(
                    "use the bare name of an allowed program; {}",
                    hints::allowed_programs(policy, base)
                )
            };
            return Err(Denial::new(
                "command.path",
                format!("`{first}` is a path, and the policy does not list that exact path"),
                hint,
            )
            .at_arg(0));
        }
        return canonical_program(policy, Path::new(first)).ok_or_else(|| not_found(first));
    }
    if !listed {
        return Err(Denial::new(
            "command.not-allowed",
            format!("`{first}` is not on the policy's allowlist"),
            hints::not_allowed(policy, first),
        )
        .at_arg(0));
    }
    policy
        .commands
        .search_path
        .iter()
        .find_map(|dir| canonical_program(policy, &dir.join(first)))
        .ok_or_else(|| not_found(first))
}

fn not_found(name: &str) -> Denial {
    Denial::not_found(
        format!("`{name}` is allowed but not installed on the policy's search path"),
        "install it, or add its directory to commands.search_path in the policy",
    )
    .at_arg(0)
}

/// The canonical path of an executable regular file that lies outside every
/// writable place, so the program cannot be swapped by a confined child.
fn canonical_program(policy: &Policy, candidate: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    // One lstat first: most candidates on the search path do not exist,
    // and most programs are plain files in a directory whose canonical
    // path is known; only a symlink needs the full walk.
    let meta = std::fs::symlink_metadata(candidate).ok()?;
    let (real, meta) = if meta.file_type().is_symlink() {
        let real = std::fs::canonicalize(candidate).ok()?;
        let meta = std::fs::metadata(&real).ok()?;
        (real, meta)
    } else {
        (
            canonical_dir(candidate.parent()?)?.join(candidate.file_name()?),
            meta,
        )
    };
    if !meta.is_file() || meta.permissions().mode() & 0o111 == 0 {
        return None;
    }
    let writable = policy
        .scopes
        .write
        .iter()
        .chain(policy.workspace.parent.iter());
    for w in writable {
        if real.starts_with(w) {
            return None;
        }
    }
    Some(real)
}

/// A directory's canonical path, remembered per process: the search path's
/// few directories are resolved once instead of on every check.
fn canonical_dir(dir: &Path) -> Option<PathBuf> {
    use std::sync::Mutex;
    static KNOWN: Mutex<Vec<(PathBuf, PathBuf)>> = Mutex::new(Vec::new());
    if let Ok(known) = KNOWN.lock()
        && let Some((_, real)) = known.iter().find(|(d, _)| d == dir)
    {
        return Some(real.clone());
    }
    let real = std::fs::canonicalize(dir).ok()?;
    if let Ok(mut known) = KNOWN.lock()
        && known.len() < 64
    {
        known.push((dir.to_path_buf(), real.clone()));
    }
    Some(real)
}

/// `argv` with every absolute path into `workspace` replaced by the path
/// relative to `cwd` it names (`relative_in`), as the rules judge it;
/// borrowed when no word changes (the usual case costs no allocation).
///
/// Inside the workspace's `.git` (`cd .git && rm -rf *`) the relative words
/// are given from the workspace root instead (`.git/HEAD`, `.git/objects`),
/// so the guards see that they name the repository: spelled from there,
/// nothing in them says so.
pub fn as_seen_from<'a>(workspace: &Path, cwd: &Path, argv: &'a [String]) -> Cow<'a, [String]> {
    let in_git = cwd
        .strip_prefix(workspace)
        .ok()
        .filter(|here| here.components().any(|c| c.as_os_str() == ".git"));
    if let Some(here) = in_git {
        let here = here.to_string_lossy();
        return Cow::Owned(
            argv.iter()
                .enumerate()
                .map(|(i, w)| {
                    if i == 0 || w.starts_with('-') || w.is_empty() {
                        w.clone()
                    } else if w.starts_with('/') {
                        relative_in(workspace, workspace, w).unwrap_or_else(|| w.clone())
                    } else {
                        rules::lexical_path(&format!("{here}/{w}"))
                    }
                })
                .collect(),
        );
    }
    let changed = |w: &String| relative_in(workspace, cwd, w);
    match argv.iter().position(|w| changed(w).is_some()) {
        None => Cow::Borrowed(argv),
        Some(_) => Cow::Owned(
            argv.iter()
                .map(|w| changed(w).unwrap_or_else(|| w.clone()))
                .collect(),
        ),
    }
}

/// `word`, an absolute path to the workspace or inside it, as a path
/// relative to `cwd` (a directory in the workspace): `.` for `cwd`
/// itself, `..` for its parent, `../.git` for a sibling. None for
/// anything else (a relative word, a path outside the workspace).
pub fn relative_in(workspace: &Path, cwd: &Path, word: &str) -> Option<String> {
    if !word.starts_with('/') {
        return None;
    }
    let target = Path::new(&rules::lexical_path(word)).to_path_buf();
    let target = target.strip_prefix(workspace).ok()?;
    let here = cwd.strip_prefix(workspace).ok()?;
    let (t, h): (Vec<_>, Vec<_>) = (target.components().collect(), here.components().collect());
    let common = t.iter().zip(&h).take_while(|(a, b)| a == b).count();
    let mut parts: Vec<String> = vec!["..".to_string(); h.len() - common];
    parts.extend(
        t[common..]
            .iter()
            .map(|c| c.as_os_str().to_string_lossy().into_owned()),
    );
    Some(if parts.is_empty() {
        ".".to_string()
    } else {
        parts.join("/")
    })
}

/// The cwd, relative to the workspace, with `..` never climbing out of it.
/// Symlinks are checked against the real workspace when it exists (in exec).
pub fn confine_cwd(cwd: Option<&str>) -> Result<PathBuf, Denial> {
    let Some(cwd) = cwd else {
        return Ok(PathBuf::new());
    };
    let path = Path::new(cwd);
    if path.is_absolute() {
        return Err(Denial::new(
            "cwd.absolute",
            format!("cwd `{cwd}` is absolute"),
            "give the directory relative to the workspace root, e.g. --cwd src",
        ));
    }
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::Normal(p) => out.push(p),
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return Err(Denial::new(
                        "cwd.escape",
                        format!("cwd `{cwd}` leaves the workspace"),
                        "stay inside the workspace; give a directory relative to its root",
                    ));
                }
            }
            Component::RootDir | Component::Prefix(_) => unreachable!("relative path"),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

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
        for cmd in ["./ls", "/tmp/x/ls", "ls/../../bin/sh", "/bin/ls"] {
            let d = check(&p, &Request::line(cmd)).unwrap_err();
            assert_eq!(d.rule, "command.path", "{cmd}");
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
    fn cwd_never_leaves_the_workspace() {
        assert_eq!(confine_cwd(Some("a/./b/..")).unwrap(), PathBuf::from("a"));
        for bad in ["..", "../..", "a/../../b", "/etc"] {
            assert!(confine_cwd(Some(bad)).is_err(), "{bad}");
        }
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
