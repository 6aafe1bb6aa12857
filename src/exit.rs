//! How a subcommand ends: the exit status the process reports, or the
//! failure that stopped it (`CliError`), printed once by `cli::main`.
//! Every face (the CLI, jobs, MCP) returns a `CliResult`; the codes
//! themselves are `result::code`.

use crate::policy::PolicyError;
use crate::result::code;
use std::io::Write;
use std::process::ExitCode;

/// Why a subcommand ended without doing its work (or with a refusal that
/// has its own exit code). Printed in one place, `main`.
#[derive(Debug)]
pub struct CliError {
    pub code: i32,
    /// Lines for stderr, each a whole line ("agent-rsh: ...").
    pub lines: Vec<String>,
    /// A line for stdout: the machine-readable faces answer in JSON even
    /// when they fail.
    pub stdout: Option<String>,
}

impl CliError {
    /// One line on stderr, prefixed "agent-rsh: ".
    pub fn new(code: i32, message: impl std::fmt::Display) -> CliError {
        CliError {
            code,
            lines: vec![format!("agent-rsh: {message}")],
            stdout: None,
        }
    }

    /// A policy that cannot be used: what is wrong with it, what did not
    /// happen because of it (`consequence`), and how to check a fix.
    pub fn policy(e: &PolicyError, consequence: &str) -> CliError {
        CliError {
            code: code::FAILED,
            lines: vec![
                format!("agent-rsh: {e}"),
                format!(
                    "agent-rsh: {consequence}; fix the policy (`agent-rsh policy check FILE` validates it)"
                ),
            ],
            stdout: None,
        }
    }

    /// The same failure, also as one JSON line on stdout.
    pub fn with_stdout(mut self, line: String) -> CliError {
        self.stdout = Some(line);
        self
    }

    /// Prints the lines (stderr) and the JSON line (stdout); the exit
    /// status to end with.
    pub fn print(&self) -> ExitCode {
        {
            let mut err = std::io::stderr().lock();
            for l in &self.lines {
                let _ = writeln!(err, "{l}");
            }
        }
        if let Some(line) = &self.stdout {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{line}");
            let _ = out.flush();
        }
        exit_code(self.code)
    }
}

/// What a subcommand returns: its exit code, or why it could not do its work.
pub type CliResult = Result<ExitCode, CliError>;

/// An exit status as the process reports it (0-255).
pub fn exit_code(code: i32) -> ExitCode {
    ExitCode::from(u8::try_from(code).unwrap_or(code::FAILED as u8))
}
