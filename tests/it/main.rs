//! Every end-to-end test, one binary: a module per face, over the helpers
//! in `tests/common` (the binary, policy files, process scans and waits,
//! the MCP client, throwaway accounts). One binary links once and runs all
//! tests on one pool of threads.

#[path = "../common/mod.rs"]
mod common;

mod agent_corpus;
mod agree;
mod args;
mod args_corpus;
mod args_precision;
mod cgroup;
mod confine;
mod confine_tmp;
mod container;
mod docs;
mod floor_plan;
mod guard_domains;
mod jobs;
mod kernel_escapes;
mod kernel_isolation;
mod lex_bash;
mod limits;
mod man;
mod mcp;
mod mcp_burst;
mod mcp_jobs;
mod mcp_python;
mod mcp_typescript;
mod network;
mod profiles;
mod resources;
mod run;
mod script;
mod script_bash;
mod scripts;
mod shell;
mod stdin_relay;
mod userns;
