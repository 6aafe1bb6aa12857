//! The `run` tool: one checked, confined command through `engine::execute`.

use super::{Annotations, ArgError, CallEnv, Context, Tool, ToolResult, Work};
use crate::admit::Request;
use crate::check::hints;
use crate::engine::{self, RunOptions};
use crate::mcp::progress::ProgressSink;
use crate::mcp::render::{nonce, render_text};
use crate::plan::StdinMode;
use crate::policy::mcp::MIN_TEXT_BYTES;
use crate::policy::{Policy, Syntax};
use crate::result::{Encoding, RunResult, Status};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::fmt::Write as _;

pub const TOOL: Tool = Tool {
    name: "run",
    title: "Run a command (restricted shell)",
    description,
    input_schema: super::input_schema::<RunArgs>,
    output_schema: super::output_schema::<RunResult>,
    annotations: Annotations {
        read_only: false,
        destructive: true,
        idempotent: false,
        open_world: true,
    },
    long_running: true,
    available: |_| true,
    prepare,
    refused,
};

/// The arguments of `run`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct RunArgs {
    /// The command line, e.g. "grep -rn 'a|b' src".
    command: String,
    /// Working directory, relative to the workspace root: where the
    /// command line starts (with the simple syntax, where there is no
    /// `cd`, the only way to choose it).
    cwd: Option<String>,
    /// Variables to set for the command (NAME: value); the policy refuses
    /// dangerous names.
    #[serde(default)]
    env: BTreeMap<String, String>,
    /// Deadline in milliseconds (default: the server's mcp.timeout_ms);
    /// never beyond the policy's limits.timeout_ms.
    #[schemars(range(min = 1))]
    timeout_ms: Option<u64>,
    /// Text given to the command on standard input, then end of file
    /// (default: none).
    stdin: Option<String>,
    /// Output returned, stdout and stderr together (default: the policy's
    /// mcp.text_bytes): the head and the tail at line boundaries, the
    /// elided middle stated. More needs a larger value (output beyond
    /// output.cap_bytes per stream is never kept).
    #[schemars(range(min = MIN_TEXT_BYTES))]
    max_output_bytes: Option<usize>,
}

fn description(ctx: &Context) -> String {
    let policy = &ctx.policy;
    let mut d = String::from(match policy.syntax {
        Syntax::Compound => COMPOUND,
        Syntax::Simple => SIMPLE,
    });
    if policy.syntax == Syntax::Compound
        && let Some(how) = hints::write_file(policy)
    {
        // "to write a file, ..." as a sentence.
        let _ = write!(d, " T{}.", &how[1..]);
    }
    d.push_str(&allowed_programs(policy));
    let _ = write!(
        d,
        " Deadline: {} ms unless timeoutMs says otherwise (at most {} ms).",
        default_timeout(policy),
        policy.limits.timeout_ms
    );
    if super::jobs::enabled(policy) {
        let _ = write!(
            d,
            " For anything that may take longer (a server, a watcher, a long build or test \
             suite) use {} instead: it answers at once with a job id.",
            ctx.name("spawn")
        );
    }
    d
}

/// What `run` takes with `syntax = "compound"`: a script, read as bash
/// reads it.
const COMPOUND: &str = "Run a command line, checked against the policy and confined by the kernel. \
     It is read as `bash -c` reads it and run by agent-rsh's own interpreter, which also runs \
     the scripts it starts (`./x.sh`, `sh -c`, `source`) and the `/bin/sh` of make, npm and git, \
     checking every command as it runs (a refused command inside a script fails with 126, named \
     by file and line): \
     pipes, `;`, `&&`, `||`, `( )`, `{ }`, if/for/while/case, functions, variables, globs, \
     `$(...)` and here-documents work; `cd` works inside the workspace; redirections may write \
     inside the workspace (relative paths) and to /dev/null. Every command is checked: a refusal \
     found before running refuses the whole line, and nothing runs. Background `&` runs \
     inside the call and ends with it (use spawn for a job that must outlive it); `eval` is \
     refused. `cwd` is the directory the line starts in. Output, \
     exit code and duration come back (`commands` lists every command run, with its exit \
     code); a refusal names the rule and says what to do instead.";

/// What `run` takes with `syntax = "simple"`: one literal command.
const SIMPLE: &str = "Run one command line, checked against the policy and confined by the kernel. \
     The line is split into words with bash's quoting rules, but no shell runs it: \
     pipes, redirection, globs, variables, `;`, `&&` and command substitution are refused \
     (quote such characters to pass them as text). There is no `cd`: give the directory \
     as `cwd`. To write a file, give its content as `stdin` to a program that writes it \
     (e.g. `tee FILE`, when allowed). Output, exit code and duration come back; \
     a refusal names the rule and says what to do instead.";

/// The deadline of a call that names none: short enough that the answer
/// (a timeout says so) reaches a client before its own request timeout
/// (60 s in the TypeScript SDK).
pub fn default_timeout(policy: &Policy) -> u64 {
    policy.mcp.timeout_ms.min(policy.limits.timeout_ms)
}

/// The programs the policy allows, as a sentence for a tool description.
pub fn allowed_programs(policy: &Policy) -> String {
    let mut d = String::new();
    let allow = &policy.commands.allow;
    if allow.is_empty() {
        d.push_str(" The policy allows no programs.");
    } else {
        const SHOWN: usize = 200;
        let mut names: Vec<&str> = allow.iter().take(SHOWN).map(String::as_str).collect();
        names.sort_unstable();
        let _ = write!(d, " Allowed programs: {}", names.join(", "));
        if allow.len() > SHOWN {
            let _ = write!(d, " and {} more", allow.len() - SHOWN);
        }
        d.push('.');
    }
    d
}

fn refused(text: &str) -> Value {
    let r = RunResult::failed(String::new(), text.to_string());
    serde_json::to_value(&r).unwrap_or(Value::Null)
}

fn prepare(ctx: &Context, args: &Map<String, Value>) -> Result<Work, ArgError> {
    let a: RunArgs = super::parse_args(args)?;
    let mut req = request(a.command, a.cwd, &a.env, a.timeout_ms)?;
    if a.max_output_bytes.is_some_and(|n| n < MIN_TEXT_BYTES) {
        return Err(ArgError::TooSmall {
            name: "maxOutputBytes",
            min: MIN_TEXT_BYTES as u64,
        });
    }
    let max_output = a.max_output_bytes.unwrap_or(ctx.policy.mcp.text_bytes);
    req.timeout_ms.get_or_insert(default_timeout(&ctx.policy));
    if let Some(s) = a.stdin {
        req.stdin = StdinMode::Data(s.into_bytes());
    }
    let policy = ctx.policy.clone();
    let workspace = ctx.workspace.clone();
    let spawn = super::jobs::enabled(&policy).then(|| ctx.name("spawn"));
    Ok(Box::new(move |call: &CallEnv| {
        if call.cancelled.load(std::sync::atomic::Ordering::SeqCst) {
            // Cancelled before it started: run nothing (the answer is not sent).
            let r = RunResult::failed(req.display(), "cancelled before it started".into());
            return ToolResult {
                structured: serde_json::to_value(&r).unwrap_or(Value::Null),
                text: render_text(&r, &policy.mcp, ""),
                is_error: true,
            };
        }
        let opts = RunOptions {
            capture: true,
            encoding: Encoding::Text,
            color: false,
            workspace,
            keep: false,
            cancel: Some(call.cancel),
            max_output: Some(max_output),
            verbose: false,
        };
        let mut sink = ProgressSink::start(call.progress.clone(), policy.output.strip_ansi);
        let r = engine::execute(&policy, &req, &opts, &mut sink);
        sink.finish();
        // The boundary's tag is random per call; drawn only when it is shown.
        let tag = if policy.mcp.wrap_output {
            nonce()
        } else {
            String::new()
        };
        let mut text = render_text(&r, &policy.mcp, &tag);
        if r.status == Status::TimedOut
            && let Some(spawn) = &spawn
        {
            let _ = write!(
                text,
                "\nhint: for work that outlasts one call, use {spawn}: it answers with a job id at once"
            );
        }
        ToolResult {
            structured: serde_json::to_value(&r).unwrap_or(Value::Null),
            text,
            is_error: !(r.status == Status::Exited && r.exit_code == Some(0)),
        }
    }))
}

/// The request `run` and `spawn` make of the arguments they share, as the
/// CLI's request flags do for `run`, `check` and `spawn`.
pub fn request(
    command: String,
    cwd: Option<String>,
    env: &BTreeMap<String, String>,
    timeout_ms: Option<u64>,
) -> Result<Request, ArgError> {
    if timeout_ms == Some(0) {
        return Err(ArgError::TooSmall {
            name: "timeoutMs",
            min: 1,
        });
    }
    Ok(Request {
        cwd,
        timeout_ms,
        env: env_pairs(env)?,
        ..Request::line(command)
    })
}

/// The `env` argument as `NAME=value` strings (screened later by the
/// policy, as `--env` is).
fn env_pairs(env: &BTreeMap<String, String>) -> Result<Vec<String>, ArgError> {
    let mut pairs = Vec::with_capacity(env.len());
    for (k, v) in env {
        if k.is_empty() || k.contains('=') {
            return Err(ArgError::EnvName(k.clone()));
        }
        pairs.push(format!("{k}={v}"));
    }
    Ok(pairs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// The `env` argument of `run` and `spawn` (both build their request
    /// here) is screened as `--env` is: no pinned variable gets through.
    #[test]
    fn pinned_variables_in_the_env_argument_are_refused() {
        let mut policy = Policy::default();
        policy.commands.allow = vec!["true".into()];
        for name in crate::policy::env::PINNED {
            let env = BTreeMap::from([(name.to_string(), "c".to_string())]);
            let req = request("true".into(), None, &env, None).unwrap();
            let d = crate::admit::admit(&policy, &req, None).unwrap_err();
            assert_eq!(d.rule, "env.dangerous", "{name}: {d:?}");
            assert!(d.reason.contains(name), "{name}: {d:?}");
            assert!(d.reason.contains("pinned"), "{name}: {d:?}");
        }
    }

    #[test]
    fn run_arguments_are_checked() {
        let ctx = Context {
            policy: Arc::new(Policy::default()),
            workspace: None,
            prefix: String::new(),
        };
        let args = |v: Value| v.as_object().unwrap().clone();
        let err = |v: Value| prepare(&ctx, &args(v)).err().unwrap().to_string();
        let e = err(serde_json::json!({}));
        assert!(e.contains("missing field `command`"), "{e}");
        assert!(err(serde_json::json!({"command": 5})).contains("invalid type"));
        assert!(
            err(serde_json::json!({"command": "ls", "colour": true})).contains("unknown field")
        );
        assert!(err(serde_json::json!({"command": "ls", "timeoutMs": 0})).contains("at least 1"));
        assert!(
            err(serde_json::json!({"command": "ls", "env": {"A=B": "c"}})).contains("without '='")
        );
        assert!(
            prepare(
                &ctx,
                &args(serde_json::json!({"command": "ls", "env": {"A": "b"}}))
            )
            .is_ok()
        );
    }

    #[test]
    fn the_run_schema_follows_the_argument_struct() {
        let s = super::super::input_schema::<RunArgs>();
        assert_eq!(s["required"], serde_json::json!(["command"]));
        assert_eq!(s["properties"]["timeoutMs"]["minimum"], 1);
        assert!(
            s["properties"]["cwd"]["description"]
                .as_str()
                .unwrap()
                .contains("the simple syntax")
        );
        let o = super::super::output_schema::<RunResult>();
        assert_eq!(o["properties"]["schema"]["const"], crate::result::SCHEMA);
        let required = o["required"].as_array().unwrap();
        assert!(required.contains(&"exitCode".into()));
        assert!(!required.contains(&"denial".into()));
    }
}
