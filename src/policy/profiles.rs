//! Ready policies for `agent-rsh policy init --profile NAME`: `inspect`,
//! `coding`, `ci` (policy/profiles/*.toml). A profile that needs to know
//! this machine (git's exec path, the compilers it has: toolchains.rs) is
//! completed when it is written.

use std::process::Command;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Profile {
    /// Read and search files (the embedded default).
    Inspect,
    /// Edit, build and test a project: files, git, Python, Node, make, and
    /// the C, Rust and Java toolchains found on this machine.
    Coding,
    /// A CI script: the coding set, network allowed, warn findings refused.
    Ci,
}

const INSPECT: &str = include_str!("../../policy/profiles/inspect.toml");
const CODING: &str = include_str!("../../policy/profiles/coding.toml");
const CI: &str = include_str!("../../policy/profiles/ci.toml");

/// The policy text `policy init` writes: the commented example without a
/// profile.
pub fn text(profile: Option<Profile>) -> String {
    let t = match profile {
        None => return super::EXAMPLE_POLICY.to_string(),
        Some(Profile::Inspect) => INSPECT,
        Some(Profile::Coding) => CODING,
        Some(Profile::Ci) => CI,
    };
    let t = t.replace("@GIT_EXEC_PATH@", &git_exec_path());
    if t.contains("@TOOLCHAIN_ALLOW@") {
        let found = super::toolchains::detect();
        super::toolchains::fill(&t, &found, &super::Scopes::default().read)
    } else {
        t
    }
}

/// `"DIR", ` for git's exec path on this machine, or nothing when git is
/// not installed.
fn git_exec_path() -> String {
    let out = Command::new("git").arg("--exec-path").output();
    match out {
        Ok(o) if o.status.success() => {
            let dir = String::from_utf8_lossy(&o.stdout).trim().to_string();
            if dir.is_empty() || dir.contains('"') || dir.contains('\\') {
                String::new()
            } else {
                format!("\"{dir}\", ")
            }
        }
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{Policy, Source};

    #[test]
    fn every_profile_is_a_valid_policy() {
        for p in [Profile::Inspect, Profile::Coding, Profile::Ci] {
            let t = text(Some(p));
            // No placeholder is left (an email address may hold `@`).
            for ph in [
                "@GIT_EXEC_PATH@",
                "@TOOLCHAIN_",
                "@SEARCH_PATH@",
                "@SCOPES_READ@",
            ] {
                assert!(!t.contains(ph), "{p:?}: {t}");
            }
            Policy::parse(&t, Source::Embedded).unwrap_or_else(|e| panic!("{p:?}: {e}"));
        }
        let inspect = Policy::parse(&text(Some(Profile::Inspect)), Source::Embedded).unwrap();
        assert_eq!(inspect.commands.allow, Policy::embedded().commands.allow);
    }
}
