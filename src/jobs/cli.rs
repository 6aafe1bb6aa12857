//! The job commands' command-line face: flags in, one JSON object out.

use super::{GrepQuery, JobError, OutputQuery, SpawnRequest, StreamSel};
use crate::exit::{CliError, CliResult, exit_code};
use crate::flags::RequestArgs;
use crate::plan::StdinMode;
use crate::policy::Policy;
use crate::result::code;
use clap::{Args, Subcommand, ValueEnum};
use serde::Serialize;
use std::io::Write;
use std::path::Path;
use std::time::Duration;

#[derive(Subcommand)]
#[command(defer = true)]
pub enum JobCmd {
    /// Check a command as `run` does and start it in the background;
    /// prints {id, pid, workspace} once it runs.
    Spawn(SpawnArgs),
    /// A job's status: running, exited, signaled, timedOut, killed or lost.
    Status(IdArgs),
    /// A page of a job's output, or all of it as it comes (--follow).
    Output(OutputArgs),
    /// Search a job's output with a regex (linear time).
    Grep(GrepArgs),
    /// Write TEXT and a newline to a job's stdin; --eof closes it.
    Send(SendArgs),
    /// Signal a job's whole process tree and wait for it to end.
    Kill(KillArgs),
    /// Wait for a job to end and print its status.
    Wait(WaitArgs),
    /// List jobs; --gc removes finished ones and stale workspaces.
    Jobs(JobsArgs),
}

#[derive(Args)]
pub struct SpawnArgs {
    /// Keep the fresh workspace after the job ends.
    #[arg(long)]
    keep: bool,
    /// Bytes kept on disk per stream; may shorten jobs.max_output_bytes.
    #[arg(long, value_name = "BYTES")]
    max_output: Option<u64>,
    #[command(flatten)]
    request: RequestArgs,
}

impl SpawnArgs {
    pub fn request(&self) -> &RequestArgs {
        &self.request
    }
}

#[derive(Args)]
pub struct IdArgs {
    /// The job id (from spawn or `agent-rsh jobs`).
    id: String,
}

#[derive(Clone, Copy, ValueEnum)]
enum StreamArg {
    Stdout,
    Stderr,
    Both,
}

impl From<StreamArg> for StreamSel {
    fn from(s: StreamArg) -> StreamSel {
        match s {
            StreamArg::Stdout => StreamSel::Stdout,
            StreamArg::Stderr => StreamSel::Stderr,
            StreamArg::Both => StreamSel::Both,
        }
    }
}

#[derive(Args)]
pub struct OutputArgs {
    id: String,
    /// Which output: stdout, stderr, or both interleaved in arrival order.
    #[arg(long, value_enum, default_value = "both")]
    stream: StreamArg,
    /// Stream offset to start at (a previous call's nextOffset).
    #[arg(long, default_value_t = 0)]
    offset: u64,
    /// Most bytes to return.
    #[arg(long, default_value_t = super::DEFAULT_OUTPUT_LIMIT)]
    limit: usize,
    /// Print output as it arrives until the job ends (raw text, or JSON
    /// lines with --events), then its status on stderr.
    #[arg(long)]
    follow: bool,
    /// With --follow: JSON lines `output` ... `exit`.
    #[arg(long, requires = "follow")]
    events: bool,
    /// Encode content as base64.
    #[arg(long)]
    base64: bool,
    /// Keep ANSI escape sequences.
    #[arg(long)]
    color: bool,
}

#[derive(Args)]
pub struct GrepArgs {
    id: String,
    /// A regular expression (Rust `regex` syntax; linear time).
    pattern: String,
    #[arg(long, value_enum, default_value = "both")]
    stream: StreamArg,
    /// Lines of context before and after each match (at most 50).
    #[arg(short = 'C', long, default_value_t = 0)]
    context: usize,
    /// Most matches returned (all are counted in `total`).
    #[arg(long, default_value_t = 100)]
    max_matches: usize,
    /// Search from this stream offset on (a previous call's nextOffset).
    #[arg(long, default_value_t = 0)]
    offset: u64,
    /// Case-insensitive.
    #[arg(short = 'i', long)]
    ignore_case: bool,
    /// PATTERN is a plain string.
    #[arg(short = 'F', long)]
    fixed_strings: bool,
    /// Match and show ANSI escapes as they are.
    #[arg(long)]
    color: bool,
}

#[derive(Args)]
pub struct SendArgs {
    id: String,
    /// Text to write (followed by a newline unless -n).
    text: Option<String>,
    /// Do not add a newline.
    #[arg(short = 'n', long)]
    no_newline: bool,
    /// Close the job's stdin afterwards (it then sees end of file).
    #[arg(long)]
    eof: bool,
    /// How long to wait for the job to read, in milliseconds.
    #[arg(long, value_name = "MS", default_value_t = 10_000)]
    timeout: u64,
}

#[derive(Args)]
pub struct KillArgs {
    id: String,
    /// TERM (then KILL after the grace period), INT (then TERM, KILL), or KILL.
    #[arg(long, default_value = "TERM")]
    signal: String,
}

#[derive(Args)]
pub struct WaitArgs {
    id: String,
    /// Give up after this many milliseconds (status still `running`, exit 124).
    #[arg(long, value_name = "MS")]
    timeout: Option<u64>,
}

#[derive(Args)]
pub struct JobsArgs {
    /// Remove finished jobs older than jobs.retain_ms, workspaces of lost
    /// jobs, and workspaces crashed runs left behind.
    #[arg(long)]
    gc: bool,
}

/// Runs a job command; returns the exit code.
pub fn main(policy: Option<&Path>, cmd: JobCmd) -> CliResult {
    let policy = match Policy::locate(policy) {
        Ok((p, _)) => p,
        Err(e) => {
            let json = serde_json::json!({ "error": e.to_string() }).to_string();
            return Err(CliError::policy(&e, "nothing was done").with_stdout(json));
        }
    };
    let r = match cmd {
        JobCmd::Spawn(a) => spawn(&policy, a),
        JobCmd::Status(a) => print(super::status(&policy, &a.id)),
        JobCmd::Output(a) => output(&policy, a),
        JobCmd::Grep(a) => {
            let q = GrepQuery {
                pattern: a.pattern,
                ignore_case: a.ignore_case,
                fixed: a.fixed_strings,
                stream: a.stream.into(),
                context: a.context,
                max_matches: a.max_matches,
                offset: a.offset,
                color: a.color,
            };
            print(super::grep(&policy, &a.id, &q))
        }
        JobCmd::Send(a) => {
            let given = a.text_given();
            let mut data = a.text.clone().unwrap_or_default().into_bytes();
            if given && !a.no_newline {
                data.push(b'\n');
            }
            if data.is_empty() && !a.eof {
                Err(JobError::new(
                    code::USAGE,
                    "nothing to send: give TEXT, --eof, or both",
                ))
            } else {
                print(super::send(
                    &policy,
                    &a.id,
                    &data,
                    a.eof,
                    Duration::from_millis(a.timeout),
                ))
            }
        }
        JobCmd::Kill(a) => match super::parse_signal(&a.signal) {
            Some(sig) => super::kill(&policy, &a.id, sig).map(|st| {
                emit(&st);
                if st.status == super::State::Running {
                    eprintln!("agent-rsh: job {} is still running after kill", st.id);
                    code::FAILED
                } else {
                    0
                }
            }),
            None => Err(JobError::new(
                code::USAGE,
                format!("--signal {}: use TERM, INT or KILL", a.signal),
            )),
        },
        JobCmd::Wait(a) => {
            super::wait(&policy, &a.id, a.timeout.map(Duration::from_millis)).map(|st| {
                emit(&st);
                st.exit_code()
            })
        }
        JobCmd::Jobs(a) if a.gc => print(super::gc(&policy)),
        JobCmd::Jobs(_) => print(super::list(&policy)),
    };
    r.map(exit_code).map_err(CliError::from)
}

impl From<JobError> for CliError {
    /// The error on stderr, and on stdout the refused command's RunResult
    /// or the error as JSON.
    fn from(e: JobError) -> CliError {
        let json = match &e.result {
            Some(r) => serde_json::to_string(r),
            None => serde_json::to_string(&e),
        };
        let err = CliError::new(e.code, &e.error);
        match json {
            Ok(line) => err.with_stdout(line),
            Err(_) => err,
        }
    }
}

impl SendArgs {
    fn text_given(&self) -> bool {
        self.text.is_some()
    }
}

fn emit<T: Serialize>(v: &T) {
    let mut out = std::io::stdout().lock();
    let _ = serde_json::to_writer(&mut out, v);
    let _ = out.write_all(b"\n");
    let _ = out.flush();
}

fn print<T: Serialize>(r: Result<T, JobError>) -> Result<i32, JobError> {
    r.map(|v| {
        emit(&v);
        0
    })
}

fn spawn(policy: &Policy, a: SpawnArgs) -> Result<i32, JobError> {
    let req = SpawnRequest {
        request: a.request.request(StdinMode::Null),
        workspace: a.request.workspace.clone(),
        keep: a.keep,
        max_output_bytes: a.max_output,
    };
    let s = super::spawn(policy, &req)?;
    for w in &s.warnings {
        eprintln!("agent-rsh: warning: {w}");
    }
    emit(&s);
    Ok(0)
}

fn output(policy: &Policy, a: OutputArgs) -> Result<i32, JobError> {
    let q = OutputQuery {
        stream: a.stream.into(),
        offset: a.offset,
        limit: a.limit,
        base64: a.base64,
        color: a.color,
    };
    if !a.follow {
        return print(super::output(policy, &a.id, &q));
    }
    let events = a.events;
    let st = super::follow(policy, &a.id, &q, |chunk| {
        if events {
            let mut v = serde_json::json!({
                "type": "output",
                "stream": chunk.stream,
                "offset": chunk.offset,
            });
            v[if chunk.encoding == Some("base64") {
                "data_b64"
            } else {
                "data"
            }] = chunk.content.clone().into();
            emit(&v);
            Ok(())
        } else {
            let mut out = std::io::stdout().lock();
            if a.base64 {
                out.write_all(chunk.content.as_bytes())?;
            } else {
                let shown = if a.color {
                    chunk.raw.clone()
                } else {
                    chunk.content.clone().into_bytes()
                };
                out.write_all(&shown)?;
            }
            out.flush()
        }
    })?;
    if events {
        let mut v = serde_json::to_value(&st).unwrap_or_default();
        v["type"] = "exit".into();
        emit(&v);
    } else {
        eprintln!(
            "agent-rsh: job {} {}",
            st.id,
            serde_json::to_string(&st.status).unwrap_or_default()
        );
    }
    Ok(st.exit_code())
}

/// `__supervise`: only meaningful with the fds `launch` hands over.
pub fn supervise() -> i32 {
    // SAFETY: fcntl probes; no memory effects.
    let handed_over =
        unsafe { libc::fcntl(3, libc::F_GETFD) >= 0 && libc::fcntl(4, libc::F_GETFD) >= 0 };
    if !handed_over {
        eprintln!("agent-rsh: __supervise is internal to `agent-rsh spawn`; use spawn");
        return code::USAGE;
    }
    super::supervise_main()
}
