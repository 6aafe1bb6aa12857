//! The one door: check, then execute, for every face.
//!
//! `run`, the login shell, jobs and the MCP server all build a `Request`
//! and call `execute` with their own `Sink`; they differ only in how they
//! take input and render output.

use crate::admit::{self, Request};
use crate::check::Denial;
use crate::confine::{ConfineError, Confinement, Stage};
use crate::exec::{self, Sink};
use crate::policy::Policy;
use crate::result::Stream;
use crate::result::{Encoding, RunResult, Status};
use crate::script::job::ScriptJob;
use crate::workspace::Workspace;
use std::path::PathBuf;

/// Live text: the command's bytes to our stdout and stderr as they arrive
/// (`run` in text mode, `-c` and the interactive shell).
pub struct TextSink;

impl Sink for TextSink {
    fn output(&mut self, stream: Stream, data: &[u8]) {
        // A closed stdout (e.g. `| head`) must not stop the pump: the run
        // goes on and its output is dropped.
        let _ = match stream {
            Stream::Stdout => crate::sys::write_all(std::io::stdout(), data),
            Stream::Stderr => crate::sys::write_all(std::io::stderr(), data),
        };
    }
}

/// How a face wants the run carried out, beyond the request itself.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Keep the bounded head and tail of the output for the RunResult.
    pub capture: bool,
    pub encoding: Encoding,
    /// Keep ANSI escapes in captured output (`--color`).
    pub color: bool,
    /// A persistent workspace instead of a fresh one.
    pub workspace: Option<PathBuf>,
    /// Keep a fresh workspace after the run.
    pub keep: bool,
    /// An fd the caller owns; readable means "stop this run" (MCP
    /// cancellation, job kill). The run ends as `interrupted` by SIGTERM.
    pub cancel: Option<std::os::fd::RawFd>,
    /// Output shown in the RunResult, both streams together (head and
    /// tail at line boundaries); None: all that was captured.
    pub max_output: Option<usize>,
    /// The whole confinement report (paths, rules) instead of its summary.
    pub verbose: bool,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            capture: true,
            encoding: Encoding::Text,
            color: false,
            workspace: None,
            keep: false,
            cancel: None,
            max_output: Some(crate::result::DEFAULT_MAX_OUTPUT),
            verbose: false,
        }
    }
}

/// Checks `req` against `policy` and, if allowed, runs it; always returns a
/// RunResult (denials and failures included), never panics on bad input.
pub fn execute(
    policy: &Policy,
    req: &Request,
    opts: &RunOptions,
    sink: &mut dyn Sink,
) -> RunResult {
    execute_noting_setup(policy, req, opts, sink, &mut Vec::new())
}

/// `execute`, also handing back (in `setup`) the run's warnings that came
/// from setting up its confinement: what this machine and account cannot
/// enforce for the policy (a memory bound without a cgroup, a layer
/// missing under best-effort). They are the same for every run of one
/// policy, so a face that runs many commands (the login shell) can say
/// each once; the RunResult keeps them all.
pub fn execute_noting_setup(
    policy: &Policy,
    req: &Request,
    opts: &RunOptions,
    sink: &mut dyn Sink,
    setup: &mut Vec<String>,
) -> RunResult {
    let command = req.display();
    let mut plan = match admit::admit(policy, req, opts.workspace.as_deref()) {
        Ok(p) => p,
        Err(d) => return RunResult::denied(command, d),
    };
    // A persistent workspace is refused again, on the directory actually
    // opened (the check above resolved the path once already; a symlink
    // swapped since then must not make it a system directory).
    let ws = match &opts.workspace {
        Some(dir) => Workspace::persistent(dir, policy.origin.as_deref()),
        None => Workspace::fresh(policy.workspace.parent.as_deref())
            .map_err(crate::workspace::OpenError::Io),
    };
    let mut ws = match ws {
        Ok(ws) => ws,
        Err(crate::workspace::OpenError::Refused(d)) => return RunResult::denied(command, d),
        Err(e) => return RunResult::failed(command, format!("cannot create the workspace: {e}")),
    };
    let cwd = match ws.resolve_cwd(&plan.cwd) {
        Ok(c) => c,
        Err(d) => return RunResult::denied(command, d),
    };
    // A persistent workspace (often a repository) keeps HOME, TMPDIR and
    // the caches out of it: they live in its state directory, which the
    // run may write as it writes a scopes.write path.
    let state = if ws.is_fresh() {
        None
    } else {
        match crate::workspace::state_dir(ws.root()) {
            Ok(dir) => Some(dir),
            Err(e) => {
                return RunResult::failed(
                    command,
                    format!("cannot create the workspace's state directory: {e}"),
                );
            }
        }
    };
    // Its private /tmp (`tmp` there), bound at /tmp in the mount view.
    let private_tmp = match &state {
        Some(dir) if policy.private_tmp() => match crate::workspace::private_tmp(dir) {
            Ok(t) => Some(t),
            Err(e) => {
                return RunResult::failed(
                    command,
                    format!("cannot make the workspace's private /tmp: {e}"),
                );
            }
        },
        _ => None,
    };
    let with_state;
    let confine_policy = match &state {
        Some(dir) => {
            let mut p = policy.clone();
            p.scopes.write.push(dir.clone());
            with_state = p;
            &with_state
        }
        None => policy,
    };
    // A compound command: the job for agent-rsh's interpreter, with the
    // policy the kernel enforces: a redirection may write where the run
    // may (HOME and TMPDIR in the state directory).
    let job = match &plan.script {
        Some(sp) => {
            if let Err(e) = interpreter_out_of_reach(policy, &plan.program, ws.root()) {
                return RunResult::failed(command, e.to_string());
            }
            match ScriptJob::create(confine_policy, sp, ws.root()) {
                Ok(j) => {
                    plan.pass_fd = Some(j.raw_fd());
                    plan.argv.push(j.raw_fd().to_string());
                    Some(j)
                }
                Err(e) => {
                    return RunResult::failed(
                        command,
                        format!("cannot hand the script to the interpreter: {e}"),
                    );
                }
            }
        }
        None => None,
    };
    let mut confinement = match Confinement::prepare(
        confine_policy,
        &plan,
        ws.root(),
        ws.identity(),
        ws.is_fresh() && !opts.keep,
        private_tmp.as_ref(),
    ) {
        Ok(c) => c,
        Err(e) => return RunResult::failed(command, e.to_string()),
    };
    // network = "loopback": the runs and jobs of a persistent workspace
    // share one loopback (a server a job started answers the next run).
    if let Some(dir) = &state {
        confinement.share_loopback(dir);
    }
    let mut envp = plan.envp(state.as_deref().unwrap_or(ws.root()));
    if let Some(dir) = &state {
        // What Python would otherwise write into the tree. Only where a
        // tool writes: PYTEST_ADDOPTS is not set, since options added there
        // change what pytest runs (`-p no:cacheprovider` with
        // `--strict-config` ends in "no tests ran").
        let d = dir.display();
        for (k, v) in [("PYTHONPYCACHEPREFIX", format!("{d}/.cache/pycache"))] {
            if !envp.iter().any(|(name, _)| name == k) {
                envp.push((k.to_string(), v));
            }
        }
    }
    let mut run_sink = RunSink {
        inner: sink,
        script: job.is_some(),
        stderr_tail: (!opts.capture).then(Vec::new),
    };
    let outcome = exec::run(
        &plan,
        &cwd,
        &envp,
        &mut confinement,
        &mut run_sink,
        opts.capture,
        opts.cancel,
    );
    let stderr_tail = run_sink.stderr_tail.take();

    let argv = if job.is_some() {
        Vec::new()
    } else {
        plan.argv.clone()
    };
    let mut r = RunResult::new(command, argv, Status::Failed);
    r.cwd = Some(cwd.display().to_string());
    r.warnings = plan.warnings.clone();
    let from_setup: Vec<String> = confinement
        .warnings()
        .iter()
        .map(|w| with_silencing_hint(w))
        .collect();
    r.warnings.extend_from_slice(&from_setup);
    setup.extend(from_setup);
    r.confinement = serde_json::to_value(confinement.report()).ok().map(|v| {
        if opts.verbose {
            v
        } else {
            crate::result::confinement_summary(v)
        }
    });
    if opts.keep || opts.workspace.is_some() {
        r.workspace = Some(ws.keep().display().to_string());
    }
    let o = match outcome {
        Ok(o) => o,
        Err(e) => {
            r.error = Some(format!("cannot run the command: {e}"));
            return r;
        }
    };
    r.status = o.status;
    r.exit_code = o.exit_code;
    r.signal = o.signal;
    r.timed_out = o.timed_out;
    r.duration_ms = o.duration.as_millis() as u64;
    let strip = plan.strip_ansi && !opts.color;
    let limit = opts.max_output.unwrap_or(usize::MAX);
    let (out_share, err_share) = crate::result::shares(limit, o.stdout.held(), o.stderr.held());
    (r.stdout, r.stdout_encoding) = o.stdout.render_limited(opts.encoding, strip, out_share);
    (r.stderr, r.stderr_encoding) = o.stderr.render_limited(opts.encoding, strip, err_share);
    r.stdout_bytes = o.stdout.total();
    r.stderr_bytes = o.stderr.total();
    r.truncated = opts.capture
        && (o.stdout.truncated()
            || o.stderr.truncated()
            || o.stdout.held() > out_share
            || o.stderr.held() > err_share);
    r.warnings.extend(o.warnings);
    if let Some(log) = o.network {
        let report = network_report(log);
        r.warnings.extend(report.refused.iter().map(|c| {
            format!(
                "network: {}:{} refused by agent-rsh's proxy: {}; {}",
                c.host, c.port, c.reason, c.hint
            )
        }));
        r.network = Some(report);
    }
    if let Some(job) = &job {
        let reported = job.collect();
        r.commands = Some(reported.commands);
        r.refusals = reported.refusals;
        r.warnings.extend(reported.warnings);
        if let Some(d) = reported.denial {
            // A command whose words came from expansions was refused:
            // the script stopped there with 126.
            r.status = Status::Denied;
            r.exit_code = Some(crate::result::code::DENIED);
            r.denial = Some(d);
            return r;
        }
    }
    if let Some((stage, errno)) = o.exec_error {
        explain_exec_error(&mut r, stage, errno);
    } else if let Some(hint) = crate::confine::refusal_hint(
        confinement.report(),
        r.exit_code,
        &stderr_tail.map_or_else(
            || r.stderr.clone(),
            |t| String::from_utf8_lossy(&t).into_owned(),
        ),
    ) {
        r.warnings.push(hint);
    }
    if let Some(w) = network_off_warning(policy, &r, confinement.report()) {
        r.warnings.push(w);
    }
    r
}

/// How the confinement's warning that `limits.memory_bytes` is not
/// enforced (no cgroup of the run's own) starts.
const MEMORY_NOT_ENFORCED: &str = "limits.memory_bytes (";

/// A setup warning, with how to silence it where it is one the policy
/// itself can silence: a memory bound that nothing enforces on this
/// account is said on every run otherwise.
fn with_silencing_hint(w: &str) -> String {
    if w.starts_with(MEMORY_NOT_ENFORCED) && w.contains(" is not enforced") {
        format!(
            "{w}; `limits.memory_bytes = 0` in the policy silences this (a delegated cgroup enforces it)"
        )
    } else {
        w.to_string()
    }
}

/// Bytes of stderr kept for diagnosis when the output is not captured.
const DIAGNOSIS_TAIL: usize = 16 << 10;

/// The face's sink, as the run sees it. A compound command's `start`
/// event has an empty argv (its commands are listed in the RunResult,
/// not the interpreter's own argv). Output that is not captured (text
/// mode streams it) still leaves the last 16 KiB of stderr, so the
/// warnings that explain a kernel refusal are given in text mode too.
struct RunSink<'a> {
    inner: &'a mut dyn Sink,
    script: bool,
    stderr_tail: Option<Vec<u8>>,
}

impl Sink for RunSink<'_> {
    fn started(&mut self, pid: i32, argv: &[String], cwd: &std::path::Path) {
        let argv = if self.script { &[] } else { argv };
        self.inner.started(pid, argv, cwd);
    }

    fn output(&mut self, stream: crate::result::Stream, data: &[u8]) {
        if let (Stream::Stderr, Some(t)) = (stream, self.stderr_tail.as_mut()) {
            t.extend_from_slice(data);
            if t.len() > 2 * DIAGNOSIS_TAIL {
                t.drain(..t.len() - DIAGNOSIS_TAIL);
            }
        }
        self.inner.output(stream, data);
    }
}

/// The interpreter is executed by the run: it must not lie where the run
/// (or anyone confined like it) can write, or a command could replace it.
fn interpreter_out_of_reach(
    policy: &Policy,
    program: &std::path::Path,
    workspace: &std::path::Path,
) -> Result<(), ConfineError> {
    let writable = std::iter::once(workspace)
        .chain(policy.scopes.write.iter().map(|p| p.as_path()))
        .chain(policy.workspace.parent.iter().map(|p| p.as_path()));
    for w in writable {
        if program.starts_with(w) {
            return Err(ConfineError::InterpreterWritable {
                program: program.to_path_buf(),
                writable: w.to_path_buf(),
            });
        }
    }
    Ok(())
}

/// Turns a failure between fork and exec into a status and a clear reason.
fn explain_exec_error(r: &mut RunResult, stage: Stage, errno: i32) {
    let err = std::io::Error::from_raw_os_error(errno);
    r.exit_code = None;
    r.signal = None;
    if stage == Stage::Exec && errno == libc::ENOENT {
        r.status = Status::NotFound;
        r.denial = Some(Denial::not_found(
            format!("cannot execute {}: {err}", r.argv.first().map_or("", |s| s)),
            "check that the program and its interpreter are installed",
        ));
        return;
    }
    r.status = Status::Failed;
    r.exit_code = Some(if stage == Stage::Exec { 126 } else { 125 });
    r.error = Some(format!("{} failed: {err}", stage.describe()));
}

/// The proxy's log by host and port: admitted ones with their connections
/// and bytes, refused ones with the reason and the policy key that would
/// admit them.
fn network_report(log: crate::proxy::Log) -> crate::result::NetworkReport {
    use crate::result::{HostRefusal, HostUse, MAX_NETWORK_ENTRIES, NetworkReport};
    let mut r = NetworkReport {
        unlisted: log.dropped,
        ..NetworkReport::default()
    };
    for c in log.connections {
        if c.allowed {
            if let Some(u) = r
                .allowed
                .iter_mut()
                .find(|u| u.host == c.host && u.port == c.port)
            {
                u.connections += 1;
                u.bytes += c.bytes;
            } else if r.allowed.len() < MAX_NETWORK_ENTRIES {
                r.allowed.push(HostUse {
                    host: c.host,
                    port: c.port,
                    connections: 1,
                    bytes: c.bytes,
                });
            } else {
                r.unlisted += 1;
            }
            continue;
        }
        let reason = c
            .reason
            .unwrap_or_else(|| "not on the policy's network.allow list".into());
        if let Some(u) = r
            .refused
            .iter_mut()
            .find(|u| u.host == c.host && u.port == c.port && u.reason == reason)
        {
            u.connections += 1;
        } else if r.refused.len() < MAX_NETWORK_ENTRIES {
            let hint = refusal_hint(&c.host, c.port, &reason);
            r.refused.push(HostRefusal {
                host: c.host,
                port: c.port,
                reason,
                hint,
                connections: 1,
            });
        } else {
            r.unlisted += 1;
        }
    }
    r
}

/// The policy key that would admit a refused connection.
fn refusal_hint(host: &str, port: u16, reason: &str) -> String {
    let entry = if port == 80 || port == 443 {
        host.to_string()
    } else {
        format!("{host}:{port}")
    };
    if reason.contains("allow list") || reason.contains("server name") {
        format!("add {entry:?} to network.allow in the policy if the run needs it")
    } else if reason.contains("address") {
        format!(
            "a private or loopback address is reached only through a pin: network.resolve = {{ {host:?} = \"ADDRESS:PORT\" }}"
        )
    } else {
        "see network in the policy".into()
    }
}

/// What tools print when they cannot reach the network: DNS lookups
/// (glibc, curl, git, Node, Python), refused or unreachable connections,
/// and the offline switches `check::env::OFFLINE` sets.
const NETWORK_FAILURES: &[&str] = &[
    "Could not resolve host",
    "Temporary failure in name resolution",
    "Name or service not known",
    "EAI_AGAIN",
    "ENOTFOUND",
    "getaddrinfo",
    "Network is unreachable",
    "ENETUNREACH",
    "Failed to establish a new connection",
    "Connection refused",
    "ECONNREFUSED",
    "ENOTCACHED",
    "transport 'http' not allowed",
    "transport 'https' not allowed",
    "transport 'ssh' not allowed",
    "--offline was specified",
    "net.offline",
    "No matching distribution found",
];

/// With the network off by the policy, a command that failed and says it
/// could not reach the network gets a warning saying why, so the caller
/// does not retry or blame the host.
fn network_off_warning(
    policy: &Policy,
    r: &RunResult,
    report: &crate::confine::Report,
) -> Option<String> {
    if matches!(policy.network.level, crate::policy::Network::Allow)
        || r.status == Status::Exited && r.exit_code == Some(0)
    {
        return None;
    }
    // An inet socket the seccomp filter refused: EPERM, which says
    // nothing of the network by itself.
    let seen = if crate::confine::inet_socket_refused(report, &r.stderr) {
        "socket: Operation not permitted"
    } else {
        NETWORK_FAILURES
            .iter()
            .find(|p| r.stderr.contains(**p) || r.stdout.contains(**p))?
    };
    let level = match policy.network.level {
        crate::policy::Network::Loopback => "network = \"loopback\": 127.0.0.1 and ::1 only",
        crate::policy::Network::Domains => {
            return Some(format!(
                "the run reaches the network only through agent-rsh's proxy (network = {{ allow = [...] }} in the policy), and the command could not reach the network ({seen:?}): a host not on the list is refused (the RunResult's network list shows what was asked for), and a program that ignores HTTPS_PROXY/HTTP_PROXY reaches nothing{}",
                if policy.network.per_command() {
                    "; with network.commands, only the listed programs may reach the proxy"
                } else {
                    ""
                }
            ));
        }
        _ => "network = \"none\"",
    };
    Some(format!(
        "network is off by the policy ({level}): the command could not reach the network \
         ({seen:?}); retrying will not help. Work offline (npm_config_offline, PIP_NO_INDEX, \
         CARGO_NET_OFFLINE and GIT_ALLOW_PROTOCOL=file are set for that), or ask for a policy \
         that allows the network"
    ))
}
