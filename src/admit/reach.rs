//! The policy file must stay out of the agent's reach: a command that can
//! rewrite the policy could allow itself anything on the next call.

use crate::check::Denial;
use crate::policy::{Policy, Source};
use std::path::{Path, PathBuf};

/// Refuses when the policy file lies where the confined command may write:
/// inside the persistent workspace (`--workspace`) or a `scopes.write`
/// path. A fresh workspace is new and cannot hold an existing file.
pub fn policy_out_of_reach(
    source: &Source,
    workspace: Option<&Path>,
    policy: &Policy,
) -> Result<(), Denial> {
    let Source::File(path) = source else {
        return Ok(());
    };
    let file = canonical(path);
    let writable = workspace
        .map(|w| (canonical(w), "the workspace"))
        .into_iter()
        .chain(
            policy
                .scopes
                .write
                .iter()
                .map(|w| (canonical(w), "scopes.write")),
        );
    for (root, what) in writable {
        if file.starts_with(&root) {
            return Err(Denial::new(
                "policy.reachable",
                format!(
                    "the policy file {} lies inside {} ({}), which the command may change",
                    file.display(),
                    root.display(),
                    what
                ),
                "keep the policy outside the workspace and every scopes.write path, e.g. /etc/agent-rsh/policy.toml",
            ));
        }
    }
    Ok(())
}

/// The same refusal for a loaded policy, wherever it came from: part of
/// `admit::admit`, so no face can run a command that could rewrite its own
/// policy, and `agent-rsh check` says so too.
/// A persistent workspace that is a system directory or contains the policy
/// file is refused first (`workspace.system`, see `workspace::refuse_system`).
pub fn loaded_policy_out_of_reach(policy: &Policy, workspace: Option<&Path>) -> Result<(), Denial> {
    if let Some(ws) = workspace {
        crate::workspace::refuse_system(ws, policy.origin.as_deref())?;
    }
    match &policy.origin {
        Some(path) => policy_out_of_reach(&Source::File(path.clone()), workspace, policy),
        None => Ok(()),
    }
}

/// The real path where it exists; otherwise the path made absolute, so a
/// not-yet-created workspace still compares.
fn canonical(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| std::path::absolute(p).unwrap_or(p.to_path_buf()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn policy_inside_the_workspace_or_a_write_scope_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("policy.toml");
        std::fs::write(&file, "").unwrap();
        let src = Source::File(file.clone());
        let mut p = Policy::default();
        let d = policy_out_of_reach(&src, Some(dir.path()), &p).unwrap_err();
        assert_eq!(d.rule, "policy.reachable");
        // Through a relative or dotted path it is the same file.
        let dotted = dir.path().join(".").join("policy.toml");
        assert!(policy_out_of_reach(&Source::File(dotted), Some(dir.path()), &p).is_err());
        p.scopes.write = vec![dir.path().to_path_buf()];
        assert!(policy_out_of_reach(&src, None, &p).is_err());
        let elsewhere = tempfile::tempdir().unwrap();
        p.scopes.write = vec![elsewhere.path().to_path_buf()];
        policy_out_of_reach(&src, Some(elsewhere.path()), &p).unwrap();
        policy_out_of_reach(&Source::Embedded, Some(dir.path()), &p).unwrap();
    }
}
