//! Hints a caller can act on without reading the policy: the allowed
//! programs themselves (or the nearest names), the flag that replaces a
//! shell builtin, how to write a file. A model cannot run `agent-rsh
//! policy show`; it can pick a name from the hint.

use crate::policy::{Policy, Syntax};

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
        "sh" | "bash" | "dash" => format!(
            "a shell script runs on agent-rsh's own interpreter with `syntax = \"compound\"` \
             (`sh FILE`, `bash -c '...'`, `./x.sh`); with `syntax = \"simple\"` give the command \
             itself, one program with its arguments; {programs}"
        ),
        "zsh" | "ksh" | "fish" => format!(
            "only sh, bash and dash scripts run (on agent-rsh's own interpreter): write the \
             commands themselves; {programs}"
        ),
        "export" | "set" | "alias" | "unset" => format!(
            "`{name}` is a shell builtin and no shell runs here: pass variables with \
             `--env NAME=VALUE` (the MCP `env` argument); {programs}"
        ),
        _ => format!("run one of the allowed programs; {programs}"),
    }
}

/// "allowed: cat, grep, ls" or, for a long allowlist, "nearest allowed:
/// ... (N in all)".
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
    // Only names an agent may have meant: a typo's worth of edits, or the
    // same first three letters (`python` -> python3, pytest).
    let edits = (name.chars().count() / 3).max(1);
    names.retain(|n| distance(name, n) <= edits || common_prefix(name, n) >= 3);
    if names.is_empty() {
        return format!(
            "no allowed program has a name close to `{name}` (`agent-rsh policy show` lists the {})",
            allow.len()
        );
    }
    names.sort_by_key(|n| (distance(name, n), *n));
    names.truncate(NEAREST);
    format!(
        "nearest allowed: {} ({} in all)",
        names.join(", "),
        allow.len()
    )
}

/// How to write a file, as a sentence: with the compound syntax a
/// here-document with a quoted delimiter (its text kept as written) into
/// `cat` or, failing that, `tee`; with the simple syntax the content as
/// standard input of `tee`. None when the policy allows no such program.
pub fn write_file(policy: &Policy) -> Option<&'static str> {
    let allowed = |name: &str| policy.commands.allow.iter().any(|a| a == name);
    let (cat, tee) = (allowed("cat"), allowed("tee"));
    Some(match policy.syntax {
        Syntax::Compound if cat => {
            "to write a file, use a here-document with a quoted delimiter: \
             `cat <<'EOF' > FILE`, then the file's lines, then a line `EOF` \
             (the quotes keep `$` and backquotes as written)"
        }
        Syntax::Compound if tee => {
            "to write a file, use a here-document with a quoted delimiter: \
             `tee FILE <<'EOF' > /dev/null`, then the file's lines, then a line `EOF` \
             (the quotes keep `$` and backquotes as written)"
        }
        Syntax::Simple if tee => {
            "to write a file, run `tee FILE` with the content as its standard input \
             (`--stdin`, the MCP `stdin` argument)"
        }
        _ => return None,
    })
}

fn common_prefix(a: &str, b: &str) -> usize {
    a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count()
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
        assert!(not_allowed(&p, "bash").starts_with("a shell script runs on"));
        assert!(not_allowed(&p, "export").contains("--env NAME=VALUE"));
        assert_eq!(
            allowed_programs(&policy(&[]), "x"),
            "the policy allows no programs"
        );
    }

    #[test]
    fn writing_a_file_follows_the_syntax_and_the_allowlist() {
        let mut p = policy(&["cat", "tee"]);
        assert!(write_file(&p).unwrap().contains("`cat <<'EOF' > FILE`"));
        p.commands.allow = vec!["tee".into()];
        assert!(
            write_file(&p)
                .unwrap()
                .contains("`tee FILE <<'EOF' > /dev/null`")
        );
        p.syntax = Syntax::Simple;
        assert!(write_file(&p).unwrap().contains("MCP `stdin` argument"));
        p.commands.allow = vec!["cat".into()];
        assert_eq!(write_file(&p), None);
        p.commands.allow = vec!["ls".into()];
        p.syntax = Syntax::Compound;
        assert_eq!(write_file(&p), None);
    }

    #[test]
    fn a_long_allowlist_gives_the_nearest_names() {
        let mut names: Vec<String> = (0..60).map(|i| format!("tool{i:02}")).collect();
        names.extend(["python3", "pytest", "git", "grep"].map(String::from));
        let mut p = Policy::default();
        p.commands.allow = names;
        let h = allowed_programs(&p, "python");
        assert!(h.starts_with("nearest allowed: python3, pytest"), "{h}");
        assert!(h.ends_with("(64 in all)"), "{h}");
        assert_eq!(distance("gti", "git"), 2);
        // Nothing close: no list of unrelated names.
        let h = allowed_programs(&p, "-o");
        assert!(
            h.starts_with("no allowed program has a name close to `-o`"),
            "{h}"
        );
        let h = allowed_programs(&p, "tool7");
        assert!(h.starts_with("nearest allowed: tool07, tool17"), "{h}");
        assert!(!h.contains("policy show"), "{h}");
        assert_eq!(distance("", "ab"), 2);
        assert_eq!(distance("kitten", "sitting"), 3);
    }
}
