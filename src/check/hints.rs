//! Hints a caller can act on without reading the policy: the allowed
//! programs themselves (or the nearest names), the flag that replaces a
//! shell builtin, how to write a file. A model cannot run `agent-rsh
//! policy show`; it can pick a name from the hint.

use crate::policy::Policy;

/// Up to this many allowed programs are listed in full; beyond, the
/// nearest names are.
const LIST_ALL: usize = 40;
const NEAREST: usize = 6;

/// The hint of `command.not-allowed` for `name`.
pub fn not_allowed(policy: &Policy, name: &str) -> String {
    let programs = allowed_programs(policy, name);
    match name {
        "cd" | "pushd" | "popd" => format!(
            "there is no `cd` here: give the directory as the working directory \
             (`agent-rsh run --cwd DIR`, the MCP `cwd` argument), relative to the workspace; {programs}"
        ),
        "sh" | "bash" | "dash" | "zsh" | "ksh" | "fish" => format!(
            "no shell is started: give the command itself, one program with its arguments; {programs}"
        ),
        "export" | "set" | "source" | "." | "alias" | "unset" => format!(
            "`{name}` is a shell builtin and no shell runs here: pass variables with \
             `--env NAME=VALUE` (the MCP `env` argument); {programs}"
        ),
        _ => format!("run one of the allowed programs; {programs}"),
    }
}

/// "allowed: cat, grep, ls" or, for a long allowlist, "nearest allowed:
/// ... (N in all; `agent-rsh policy show` lists them)".
pub fn allowed_programs(policy: &Policy, name: &str) -> String {
    let allow = &policy.commands.allow;
    if allow.is_empty() {
        return "the policy allows no programs".into();
    }
    let mut names: Vec<&str> = allow.iter().map(String::as_str).collect();
    if names.len() <= LIST_ALL {
        names.sort_unstable();
        return format!("allowed: {}", names.join(", "));
    }
    names.sort_by_key(|n| (distance(name, n), *n));
    names.truncate(NEAREST);
    format!(
        "nearest allowed: {} ({} in all; `agent-rsh policy show` lists them)",
        names.join(", "),
        allow.len()
    )
}

/// Edit distance (insertions, deletions, substitutions) between two short
/// names.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(allow: &[&str]) -> Policy {
        let mut p = Policy::default();
        p.commands.allow = allow.iter().map(|s| s.to_string()).collect();
        p
    }

    #[test]
    fn a_short_allowlist_is_listed_whole() {
        let p = policy(&["ls", "cat", "grep"]);
        assert_eq!(
            not_allowed(&p, "rm"),
            "run one of the allowed programs; allowed: cat, grep, ls"
        );
        assert!(not_allowed(&p, "cd").contains("--cwd DIR"));
        assert!(not_allowed(&p, "cd").contains("MCP `cwd`"));
        assert!(not_allowed(&p, "bash").starts_with("no shell is started"));
        assert!(not_allowed(&p, "export").contains("--env NAME=VALUE"));
        assert_eq!(
            allowed_programs(&policy(&[]), "x"),
            "the policy allows no programs"
        );
    }

    #[test]
    fn a_long_allowlist_gives_the_nearest_names() {
        let mut names: Vec<String> = (0..60).map(|i| format!("tool{i:02}")).collect();
        names.extend(["python3", "pytest", "git", "grep"].map(String::from));
        let mut p = Policy::default();
        p.commands.allow = names;
        let h = allowed_programs(&p, "python");
        assert!(h.starts_with("nearest allowed: python3, pytest"), "{h}");
        assert!(
            h.ends_with("(64 in all; `agent-rsh policy show` lists them)"),
            "{h}"
        );
        assert_eq!(distance("gti", "git"), 2);
        assert_eq!(distance("", "ab"), 2);
        assert_eq!(distance("kitten", "sitting"), 3);
    }
}
