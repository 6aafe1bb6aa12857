//! Per-user and per-group policy sections, merged over the base policy.
//!
//! `[users.NAME]` and `[groups.NAME]` hold policy fragments: any keys of the
//! policy itself (except `users` and `groups`), with the same names and types.
//! The effective policy for a user is built in this order, each step merged
//! over the result of the one before, so the most specific wins:
//!
//! 1. the base policy (the file's top-level keys, defaults filled in);
//! 2. each `[groups.NAME]` the user belongs to (primary or supplementary
//!    group), in the order the sections appear in the file;
//! 3. `[users.NAME]` for the user's login name.
//!
//! Merging a fragment over a policy:
//! - a table merges key by key (`[users.a.limits] timeout_ms = 5000` changes
//!   only the timeout; `env.set` entries are added or replaced one by one);
//! - a scalar or an array replaces the inherited value
//!   (`commands.allow = ["ls"]` is the whole allowlist);
//! - an array may instead be written `{ add = [...], remove = [...] }` to
//!   extend or prune the inherited list (`commands.allow = { add = ["git"] }`);
//!   `remove` applies first, `add` skips values already present.
//!
//! The merge works on the TOML form of the whole policy, so it covers every
//! key, including ones added later, without a list to keep in sync. Each
//! fragment is checked when the policy is loaded (merged alone over the
//! base and validated), so a typo in a section is an error for everyone,
//! not a surprise at one user's login.

use crate::policy::{Policy, Problem, Source};
use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// Named policy fragments, in file order.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sections(pub Vec<(String, toml::Table)>);

impl Sections {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn get(&self, name: &str) -> Option<&toml::Table> {
        self.0.iter().find(|(n, _)| n == name).map(|(_, t)| t)
    }
}

impl Serialize for Sections {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

impl<'de> Deserialize<'de> for Sections {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Sections, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Sections;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("tables of policy keys, one per name")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Sections, A::Error> {
                let mut out = Vec::new();
                while let Some((k, v)) = map.next_entry::<String, toml::Table>()? {
                    out.push((k, v));
                }
                Ok(Sections(out))
            }
        }
        d.deserialize_map(V)
    }
}

/// Who the policy is for: a login name and the names of its groups.
#[derive(Debug, Clone)]
pub struct Identity {
    pub user: String,
    pub groups: Vec<String>,
}

/// Why a section cannot be applied.
#[derive(Debug, thiserror::Error)]
pub enum SectionError {
    #[error("cannot render the policy for merging: {0}")]
    Render(toml::ser::Error),
    /// In the sections named (merged in this order).
    #[error("[{}]: {problem}", .sections.join("] + ["))]
    In {
        sections: Vec<String>,
        problem: SectionProblem,
    },
}

/// What is wrong with a section (or the policy it makes).
#[derive(Debug, thiserror::Error)]
pub enum SectionProblem {
    #[error("not a valid {0} name")]
    Name(&'static str),
    #[error(transparent)]
    Merge(#[from] MergeError),
    #[error("cannot render merged policy: {0}")]
    Render(toml::ser::Error),
    /// The merged policy is refused as a policy file would be.
    #[error(transparent)]
    Policy(Box<Problem>),
}

impl SectionError {
    fn new(section: String, problem: impl Into<SectionProblem>) -> SectionError {
        SectionError::In {
            sections: vec![section],
            problem: problem.into(),
        }
    }
}

/// Why a fragment cannot be merged; the text names the key path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MergeError {
    #[error("`{0}` cannot appear inside a section; sections do not nest")]
    Nested(String),
    #[error("`{0}` must be an array")]
    NotAnArray(&'static str),
    #[error(
        "a list is replaced by an array or edited with {{ add = [...], remove = [...] }}; `{0}` is neither"
    )]
    ListEdit(String),
    /// In the table `key`.
    #[error("{key}.{error}")]
    InTable { key: String, error: Box<MergeError> },
    /// In the edit of the list `key`.
    #[error("{key}: {error}")]
    InList { key: String, error: Box<MergeError> },
}

/// The effective policy for `who`: base, then matching groups in file
/// order, then the user's section. The result has no sections left; the
/// names of the sections applied come with it.
pub fn effective(
    base: &Policy,
    who: &Identity,
    source: &Source,
) -> Result<(Policy, Vec<String>), SectionError> {
    let mut steps: Vec<(String, &toml::Table)> = Vec::new();
    for (name, frag) in &base.groups.0 {
        if who.groups.iter().any(|g| g == name) {
            steps.push((format!("groups.{name}"), frag));
        }
    }
    if let Some(frag) = base.users.get(&who.user) {
        steps.push((format!("users.{}", who.user), frag));
    }
    let mut stripped = base.clone();
    stripped.users = Sections::default();
    stripped.groups = Sections::default();
    if steps.is_empty() {
        return Ok((stripped, Vec::new()));
    }
    let mut table = to_table(&stripped)?;
    let mut names = Vec::new();
    for (name, frag) in steps {
        merge(&mut table, frag).map_err(|e| SectionError::new(name.clone(), e))?;
        names.push(name);
    }
    let p = from_table(table, source).map_err(|problem| SectionError::In {
        sections: names.clone(),
        problem,
    })?;
    Ok((p, names))
}

/// Checks every section by merging it alone over the base.
pub fn validate(base: &Policy) -> Result<(), SectionError> {
    if base.users.is_empty() && base.groups.is_empty() {
        return Ok(());
    }
    let mut stripped = base.clone();
    stripped.users = Sections::default();
    stripped.groups = Sections::default();
    let table = to_table(&stripped)?;
    for (kind, sections) in [("users", &base.users), ("groups", &base.groups)] {
        for (name, frag) in &sections.0 {
            if name.is_empty() || name.chars().any(|c| c.is_control() || c == ':') {
                return Err(SectionError::new(
                    format!("{kind}.{name:?}"),
                    SectionProblem::Name(kind),
                ));
            }
            let here = || format!("{kind}.{name}");
            let mut t = table.clone();
            merge(&mut t, frag).map_err(|e| SectionError::new(here(), e))?;
            from_table(t, &Source::Embedded).map_err(|e| SectionError::new(here(), e))?;
        }
    }
    Ok(())
}

fn to_table(p: &Policy) -> Result<toml::Table, SectionError> {
    toml::Table::try_from(p).map_err(SectionError::Render)
}

/// Parses the merged table with the same checks as a policy file.
fn from_table(t: toml::Table, source: &Source) -> Result<Policy, SectionProblem> {
    let text = toml::to_string(&t).map_err(SectionProblem::Render)?;
    Policy::parse(&text, source.clone()).map_err(|e| SectionProblem::Policy(Box::new(e.problem)))
}

/// Merges `frag` over `base` (see the module documentation).
pub fn merge(base: &mut toml::Table, frag: &toml::Table) -> Result<(), MergeError> {
    for (key, value) in frag {
        if key == "users" || key == "groups" {
            return Err(MergeError::Nested(key.clone()));
        }
        match (base.get_mut(key), value) {
            (Some(toml::Value::Table(b)), toml::Value::Table(f)) => {
                merge(b, f).map_err(|e| MergeError::InTable {
                    key: key.clone(),
                    error: Box::new(e),
                })?;
            }
            (Some(toml::Value::Array(b)), toml::Value::Table(f)) => {
                edit_list(b, f).map_err(|e| MergeError::InList {
                    key: key.clone(),
                    error: Box::new(e),
                })?;
            }
            (_, v) => {
                base.insert(key.clone(), v.clone());
            }
        }
    }
    Ok(())
}

fn edit_list(list: &mut Vec<toml::Value>, edit: &toml::Table) -> Result<(), MergeError> {
    let items = |k: &'static str| -> Result<Vec<toml::Value>, MergeError> {
        match edit.get(k) {
            None => Ok(Vec::new()),
            Some(toml::Value::Array(a)) => Ok(a.clone()),
            Some(_) => Err(MergeError::NotAnArray(k)),
        }
    };
    if let Some(k) = edit.keys().find(|k| *k != "add" && *k != "remove") {
        return Err(MergeError::ListEdit(k.clone()));
    }
    let remove = items("remove")?;
    list.retain(|v| !remove.contains(v));
    for v in items("add")? {
        if !list.contains(&v) {
            list.push(v);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = r#"
[commands]
allow = ["ls", "cat", "echo"]
[limits]
timeout_ms = 1000
[env.set]
A = "1"

[groups.zeta]
limits.timeout_ms = 2000
commands.allow = { add = ["git"] }

[groups.alpha]
limits.timeout_ms = 3000

[users.alice]
commands.allow = { add = ["make"], remove = ["cat"] }
env.set.B = "2"

[users.bob]
commands.allow = ["echo"]
"#;

    fn who(user: &str, groups: &[&str]) -> Identity {
        Identity {
            user: user.into(),
            groups: groups.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn eff(user: &str, groups: &[&str]) -> Policy {
        let base = Policy::parse(BASE, Source::Embedded).unwrap();
        effective(&base, &who(user, groups), &Source::Embedded)
            .unwrap()
            .0
    }

    #[test]
    fn no_section_is_the_base() {
        let p = eff("carol", &["other"]);
        assert_eq!(p.commands.allow, ["ls", "cat", "echo"]);
        assert_eq!(p.limits.timeout_ms, 1000);
        assert!(p.users.is_empty() && p.groups.is_empty());
    }

    #[test]
    fn user_section_replaces_or_edits_lists() {
        assert_eq!(eff("bob", &[]).commands.allow, ["echo"]);
        let a = eff("alice", &[]);
        assert_eq!(a.commands.allow, ["ls", "echo", "make"]);
        assert_eq!(a.env.set.get("A").map(String::as_str), Some("1"));
        assert_eq!(a.env.set.get("B").map(String::as_str), Some("2"));
    }

    #[test]
    fn groups_apply_in_file_order_then_user() {
        // zeta comes first in the file, alpha later: alpha's timeout wins.
        let p = eff("carol", &["alpha", "zeta"]);
        assert_eq!(p.limits.timeout_ms, 3000);
        assert_eq!(p.commands.allow, ["ls", "cat", "echo", "git"]);
        // The user's section is applied last.
        let a = eff("alice", &["zeta"]);
        assert_eq!(a.commands.allow, ["ls", "echo", "git", "make"]);
        assert_eq!(a.limits.timeout_ms, 2000);
    }

    #[test]
    fn bad_sections_are_refused_at_load() {
        for (text, want) in [
            ("[users.a]\ncommands.alow = []\n", "users.a"),
            ("[users.a]\nlimits.timeout_ms = \"x\"\n", "users.a"),
            ("[groups.g]\nusers.b.trust = \"low\"\n", "do not nest"),
            (
                "[users.a]\ncommands.allow = { append = [\"x\"] }\n",
                "append",
            ),
            ("[users.a]\ncommands.allow = [\"./x\"]\n", "users.a"),
        ] {
            let e = Policy::parse(text, Source::Embedded).unwrap_err();
            assert!(
                e.problem.to_string().contains(want),
                "{text}: {}",
                e.problem
            );
        }
    }

    #[test]
    fn a_section_error_names_the_section_and_the_key_path() {
        let e = Policy::parse(
            "[users.a]\ncommands.allow = { append = [\"x\"] }\n",
            Source::Embedded,
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "policy <embedded default policy>: [users.a]: commands.allow: a list is replaced \
             by an array or edited with { add = [...], remove = [...] }; `append` is neither"
        );
        let e = Policy::parse("[groups.g]\nlimits.users = 1\n", Source::Embedded).unwrap_err();
        assert_eq!(
            e.problem.to_string(),
            "[groups.g]: limits.`users` cannot appear inside a section; sections do not nest"
        );
    }
}
