//! agent-rsh: a restricted shell in one binary.
//!
//! The floor plan, bottom up (no arrow runs back up, no two rooms import
//! each other):
//! - ground floor, standing on nothing above it: `lex`, `denial`, `policy`, `result` (RunResult,
//!   events, exit codes), `exit` (how a subcommand ends), `workspace`,
//!   `sys`, `audit`, `proxy` (the filtering egress proxy of a run whose
//!   network is an allow list; std and serde only);
//! - the judge of one argv, `check` (allowlist, argument rules, guards,
//!   wrappers, env, cwd; which shells are the interpreter is the policy's
//!   answer, `Policy::interprets_shell`); the interpreter, `script`, on
//!   it; `plan` on the interpreter (a plan may carry a checked script);
//!   and the door, `admit`, on them all: (policy, request) → `Plan` or
//!   `Denial`;
//! - the engine: `confine` (which makes agent-rsh the shells of a run's
//!   mount view, `script::interpreter_program` and `script::ShellJob`)
//!   and `exec` run a plan, `engine::execute` is the check-then-execute
//!   call every face makes;
//! - the faces on top: `cli` (with `flags`, the request's flags it shares
//!   with `jobs`), `shell`, `jobs`, `mcp`, `doctor`.

pub mod admit;
pub mod audit;
pub mod check;
pub mod cli;
pub mod confine;
pub mod denial;
pub mod doctor;
pub mod engine;
pub mod exec;
pub mod exit;
pub mod flags;
pub mod jobs;
pub mod lex;
pub mod mcp;
pub mod plan;
pub mod policy;
pub mod proxy;
pub mod result;
pub mod script;
pub mod shell;
pub mod sys;
pub mod workspace;
