//! Compound commands (`syntax = "compound"`): agent-rsh is the shell.
//!
//! The string is parsed as bash parses it (`parse`), every simple command
//! whose words are known before running is checked as a command
//! (`verify`), and the script runs in the confined process (`interp`),
//! which opens every redirection, expands every glob and re-checks every
//! command whose words come from expansions, right before it is exec'd.
//! No `/bin/sh` is involved anywhere.

pub mod ast;
pub mod parse;
pub mod render;

pub use parse::parse;

#[cfg(test)]
mod parse_tests;
