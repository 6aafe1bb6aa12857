//! The judge of one argv: (policy, argv) → verdict.
//!
//! Pure apart from resolving the program through the policy's search path.
//! The order is the contract: first word (`resolve`), argument rules,
//! guards and wrappers (`judge`), environment (`env`), cwd; the first
//! failure is reported. The door that turns a whole request into a `Plan`
//! (`admit`) and the interpreter (`script`) stand on it.

pub mod args;
pub mod env;
pub mod hints;
pub mod judge;
pub mod packs;
pub mod rules;
pub mod wrappers;

pub use crate::denial::{Denial, DenialKind};
use crate::policy::Policy;
use std::borrow::Cow;
use std::path::{Component, Path, PathBuf};

/// First word: on the allowlist, then found on the policy's search path.
pub fn resolve(policy: &Policy, first: &str) -> Result<PathBuf, Denial> {
    let listed = policy.commands.allow.iter().any(|a| a == first);
    if first.contains('/') {
        if !listed {
            let base = first.rsplit('/').next().unwrap_or(first);
            let hint = if policy.commands.allow.iter().any(|a| a == base) {
                format!("use the bare name `{base}`; it is looked up on the policy's search path")
            } else {
                format!(
                    "use the bare name of an allowed program; {}",
                    hints::allowed_programs(policy, base)
                )
            };
            return Err(Denial::new(
                "command.path",
                format!("`{first}` is a path, and the policy does not list that exact path"),
                hint,
            )
            .at_arg(0));
        }
        return canonical_program(policy, Path::new(first)).ok_or_else(|| not_found(first));
    }
    if !listed {
        return Err(Denial::new(
            "command.not-allowed",
            format!("`{first}` is not on the policy's allowlist"),
            hints::not_allowed(policy, first),
        )
        .at_arg(0));
    }
    policy
        .commands
        .search_path
        .iter()
        .find_map(|dir| canonical_program(policy, &dir.join(first)))
        .ok_or_else(|| not_found(first))
}

fn not_found(name: &str) -> Denial {
    Denial::not_found(
        format!("`{name}` is allowed but not installed on the policy's search path"),
        "install it, or add its directory to commands.search_path in the policy",
    )
    .at_arg(0)
}

/// The canonical path of an executable regular file that lies outside every
/// writable place, so the program cannot be swapped by a confined child.
fn canonical_program(policy: &Policy, candidate: &Path) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    // One lstat first: most candidates on the search path do not exist,
    // and most programs are plain files in a directory whose canonical
    // path is known; only a symlink needs the full walk.
    let meta = std::fs::symlink_metadata(candidate).ok()?;
    let (real, meta) = if meta.file_type().is_symlink() {
        let real = std::fs::canonicalize(candidate).ok()?;
        let meta = std::fs::metadata(&real).ok()?;
        (real, meta)
    } else {
        (
            canonical_dir(candidate.parent()?)?.join(candidate.file_name()?),
            meta,
        )
    };
    if !meta.is_file() || meta.permissions().mode() & 0o111 == 0 {
        return None;
    }
    let writable = policy
        .scopes
        .write
        .iter()
        .chain(policy.workspace.parent.iter());
    for w in writable {
        if real.starts_with(w) {
            return None;
        }
    }
    Some(real)
}

/// A directory's canonical path, remembered per process: the search path's
/// few directories are resolved once instead of on every check.
fn canonical_dir(dir: &Path) -> Option<PathBuf> {
    use std::sync::Mutex;
    static KNOWN: Mutex<Vec<(PathBuf, PathBuf)>> = Mutex::new(Vec::new());
    if let Ok(known) = KNOWN.lock()
        && let Some((_, real)) = known.iter().find(|(d, _)| d == dir)
    {
        return Some(real.clone());
    }
    let real = std::fs::canonicalize(dir).ok()?;
    if let Ok(mut known) = KNOWN.lock()
        && known.len() < 64
    {
        known.push((dir.to_path_buf(), real.clone()));
    }
    Some(real)
}

/// `argv` with every absolute path into `workspace` replaced by the path
/// relative to `cwd` it names (`relative_in`), as the rules judge it;
/// borrowed when no word changes (the usual case costs no allocation).
///
/// Inside the workspace's `.git` (`cd .git && rm -rf *`) the relative words
/// are given from the workspace root instead (`.git/HEAD`, `.git/objects`),
/// so the guards see that they name the repository: spelled from there,
/// nothing in them says so.
pub fn as_seen_from<'a>(workspace: &Path, cwd: &Path, argv: &'a [String]) -> Cow<'a, [String]> {
    let in_git = cwd
        .strip_prefix(workspace)
        .ok()
        .filter(|here| here.components().any(|c| c.as_os_str() == ".git"));
    if let Some(here) = in_git {
        let here = here.to_string_lossy();
        return Cow::Owned(
            argv.iter()
                .enumerate()
                .map(|(i, w)| {
                    if i == 0 || w.starts_with('-') || w.is_empty() {
                        w.clone()
                    } else if w.starts_with('/') {
                        relative_in(workspace, workspace, w).unwrap_or_else(|| w.clone())
                    } else {
                        rules::lexical_path(&format!("{here}/{w}"))
                    }
                })
                .collect(),
        );
    }
    let changed = |w: &String| relative_in(workspace, cwd, w);
    match argv.iter().position(|w| changed(w).is_some()) {
        None => Cow::Borrowed(argv),
        Some(_) => Cow::Owned(
            argv.iter()
                .map(|w| changed(w).unwrap_or_else(|| w.clone()))
                .collect(),
        ),
    }
}

/// `word`, an absolute path to the workspace or inside it, as a path
/// relative to `cwd` (a directory in the workspace): `.` for `cwd`
/// itself, `..` for its parent, `../.git` for a sibling. None for
/// anything else (a relative word, a path outside the workspace).
pub fn relative_in(workspace: &Path, cwd: &Path, word: &str) -> Option<String> {
    if !word.starts_with('/') {
        return None;
    }
    let target = Path::new(&rules::lexical_path(word)).to_path_buf();
    let target = target.strip_prefix(workspace).ok()?;
    let here = cwd.strip_prefix(workspace).ok()?;
    let (t, h): (Vec<_>, Vec<_>) = (target.components().collect(), here.components().collect());
    let common = t.iter().zip(&h).take_while(|(a, b)| a == b).count();
    let mut parts: Vec<String> = vec!["..".to_string(); h.len() - common];
    parts.extend(
        t[common..]
            .iter()
            .map(|c| c.as_os_str().to_string_lossy().into_owned()),
    );
    Some(if parts.is_empty() {
        ".".to_string()
    } else {
        parts.join("/")
    })
}

/// The cwd, relative to the workspace, with `..` never climbing out of it.
/// Symlinks are checked against the real workspace when it exists (in exec).
pub fn confine_cwd(cwd: Option<&str>) -> Result<PathBuf, Denial> {
    let Some(cwd) = cwd else {
        return Ok(PathBuf::new());
    };
    let path = Path::new(cwd);
    if path.is_absolute() {
        return Err(Denial::new(
            "cwd.absolute",
            format!("cwd `{cwd}` is absolute"),
            "give the directory relative to the workspace root, e.g. --cwd src",
        ));
    }
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::Normal(p) => out.push(p),
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return Err(Denial::new(
                        "cwd.escape",
                        format!("cwd `{cwd}` leaves the workspace"),
                        "stay inside the workspace; give a directory relative to its root",
                    ));
                }
            }
            Component::RootDir | Component::Prefix(_) => unreachable!("relative path"),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cwd_never_leaves_the_workspace() {
        assert_eq!(confine_cwd(Some("a/./b/..")).unwrap(), PathBuf::from("a"));
        for bad in ["..", "../..", "a/../../b", "/etc"] {
            assert!(confine_cwd(Some(bad)).is_err(), "{bad}");
        }
    }
}
