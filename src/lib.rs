//! agent-rsh: a restricted shell in one binary.
//!
//! Pure core (`policy`, `lex`, `check`, `plan`, `result`) → `Plan` or
//! `Denial`; effectful edge (`workspace`, `confine`, `exec`) runs the plan;
//! `engine` is the one door every face (`cli`) goes through; `doctor`, a
//! face too, reports what `confine` would enforce here.

pub mod audit;
pub mod check;
pub mod cli;
pub mod confine;
pub mod denial;
pub mod doctor;
pub mod engine;
pub mod exec;
pub mod jobs;
pub mod lex;
pub mod mcp;
pub mod plan;
pub mod policy;
pub mod result;
pub mod script;
pub mod shell;
pub mod sys;
pub mod workspace;
