//! The built-in packs: grammars, wrappers and rules embedded as data
//! (`packs/*.toml`), parsed once per process; and the policy's switches.

use super::args::{Grammar, Grammars};
use super::rules::RuleSpec;
use super::wrappers::{WrapperError, WrapperSpec};
pub use crate::policy::rules::PackSwitches;
use crate::policy::rules::RuleError;
use serde::Deserialize;
use std::collections::{BTreeSet, HashMap};
use std::sync::OnceLock;

/// The embedded pack files, in load order: `packs/*.toml` as written,
/// converted to JSON by build.rs (it parses several times faster, and every
/// process parses the packs once).
pub const FILES: &[(&str, &str)] = &[
    (
        "packs/grammars.toml",
        include_str!(concat!(env!("OUT_DIR"), "/grammars.json")),
    ),
    (
        "packs/wrappers.toml",
        include_str!(concat!(env!("OUT_DIR"), "/wrappers.json")),
    ),
    (
        "packs/tools.toml",
        include_str!(concat!(env!("OUT_DIR"), "/tools.json")),
    ),
    (
        "packs/guards.toml",
        include_str!(concat!(env!("OUT_DIR"), "/guards.json")),
    ),
];

/// An embedded pack that does not load (a build that ships one fails its
/// unit test).
#[derive(Debug, thiserror::Error)]
enum PackError {
    #[error("{file}: {error}")]
    Json {
        file: &'static str,
        error: serde_json::Error,
    },
    #[error(transparent)]
    Rule(#[from] RuleError),
    #[error(transparent)]
    Wrapper(#[from] WrapperError),
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct PackFile {
    grammar: Vec<Grammar>,
    wrapper: Vec<WrapperSpec>,
    rule: Vec<RuleSpec>,
}

/// Everything built in, indexed by program name.
#[derive(Debug, Default)]
pub struct Builtin {
    pub grammars: Vec<Grammar>,
    pub wrappers: Vec<WrapperSpec>,
    pub rules: Vec<RuleSpec>,
    grammar_by_name: HashMap<String, Vec<usize>>,
    grammar_globs: Vec<usize>,
    rules_by_name: HashMap<String, Vec<usize>>,
    rule_globs: Vec<usize>,
}

/// The built-in packs, parsed and checked on first use.
pub fn builtin() -> &'static Builtin {
    static B: OnceLock<Builtin> = OnceLock::new();
    B.get_or_init(|| Builtin::parse(FILES).unwrap_or_else(|e| panic!("embedded packs: {e}")))
}

impl Builtin {
    fn parse(files: &[(&'static str, &str)]) -> Result<Builtin, PackError> {
        let mut b = Builtin::default();
        for &(file, text) in files {
            let f: PackFile =
                serde_json::from_str(text).map_err(|error| PackError::Json { file, error })?;
            b.grammars.extend(f.grammar);
            b.wrappers.extend(f.wrapper);
            b.rules.extend(f.rule);
        }
        for r in &b.rules {
            r.validate_shape()?;
        }
        for w in &b.wrappers {
            w.validate()?;
        }
        for (i, g) in b.grammars.iter().enumerate() {
            index(&g.commands, i, &mut b.grammar_by_name, &mut b.grammar_globs);
        }
        for (i, r) in b.rules.iter().enumerate() {
            index(&r.commands, i, &mut b.rules_by_name, &mut b.rule_globs);
        }
        Ok(b)
    }

    /// Built-in rules for `program`: exact names first, then patterns.
    /// No allocation: this runs for every command.
    pub fn rules_for<'a>(&'a self, program: &'a str) -> impl Iterator<Item = &'a RuleSpec> + 'a {
        let exact = self
            .rules_by_name
            .get(program)
            .map_or(&[][..], Vec::as_slice);
        let globs = self
            .rule_globs
            .iter()
            .filter(move |i| !exact.contains(i) && self.rules[**i].applies_to(program));
        exact.iter().chain(globs).map(move |&i| &self.rules[i])
    }

    pub fn wrapper(&self, program: &str) -> Option<&WrapperSpec> {
        self.wrappers.iter().find(|w| w.applies_to(program))
    }

    /// The names of all built-in packs (of rules, and of wrappers that
    /// belong to one: find's actions are in pack `find`).
    pub fn packs(&self) -> BTreeSet<&str> {
        self.rules
            .iter()
            .map(RuleSpec::pack)
            .chain(self.wrappers.iter().filter_map(|w| w.pack.as_deref()))
            .collect()
    }
}

fn index(names: &[String], i: usize, by: &mut HashMap<String, Vec<usize>>, globs: &mut Vec<usize>) {
    for n in names {
        if n.ends_with('*') {
            if !globs.contains(&i) {
                globs.push(i);
            }
        } else {
            by.entry(n.clone()).or_default().push(i);
        }
    }
}

impl Grammars for Builtin {
    fn grammar(&self, program: &str, subcommand: Option<&str>) -> Option<&Grammar> {
        let wanted = |&&i: &&usize| {
            let g = &self.grammars[i];
            g.subcommand.as_deref() == subcommand && g.applies_to(program)
        };
        let exact = self
            .grammar_by_name
            .get(program)
            .map_or(&[][..], Vec::as_slice);
        exact
            .iter()
            .find(wanted)
            .or_else(|| self.grammar_globs.iter().find(wanted))
            .map(|&i| &self.grammars[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_packs_parse_and_every_rule_is_valid() {
        let b = builtin();
        assert!(b.rules.len() > 50, "{}", b.rules.len());
        let mut ids = BTreeSet::new();
        for r in &b.rules {
            r.validate().unwrap_or_else(|e| panic!("{e}"));
            assert!(
                r.id.starts_with("args.")
                    || r.id.starts_with("guard.")
                    || r.id.starts_with("wrapper."),
                "{}",
                r.id
            );
            ids.insert(r.id.as_str());
        }
        for p in [
            "find",
            "git",
            "tar",
            "sort",
            "guard.fs",
            "guard.git",
            "guard.sys",
        ] {
            assert!(b.packs().contains(p), "{p}");
        }
        for w in &b.wrappers {
            w.validate().unwrap_or_else(|e| panic!("{e}"));
            // `[packs] off` knows the packs by their rules' ids.
            if let Some(p) = &w.pack {
                assert!(
                    crate::policy::rules::builtin_rule_ids()
                        .any(|id| crate::policy::rules::pack_of(id) == p),
                    "wrapper pack {p} has no rule, so it cannot be switched off"
                );
            }
            if let Some(re) = &w.no_command_word {
                assert!(
                    w.no_command_re().is_some(),
                    "{:?}: bad regex {re}",
                    w.commands
                );
            }
        }
    }

    #[test]
    fn every_rule_option_is_known_to_a_grammar() {
        // A long option named by a rule must be in its program's grammar, or
        // abbreviations and `--opt value` would not be read as the program
        // reads them.
        let b = builtin();
        for r in &b.rules {
            for c in &r.commands {
                let mut gs: Vec<&Grammar> = r
                    .subcommand
                    .iter()
                    .filter_map(|s| b.grammar(c, Some(s)))
                    .collect();
                gs.extend(b.grammar(c, None));
                for o in r
                    .option
                    .iter()
                    .chain(&r.with_option)
                    .chain(&r.unless_option)
                {
                    let Some(long) = o.strip_prefix("--") else {
                        continue;
                    };
                    let known = gs.iter().any(|g| {
                        g.long_arg
                            .iter()
                            .chain(&g.long_opt)
                            .chain(&g.long_flag)
                            .any(|l| l == long)
                    });
                    assert!(known, "{}: no grammar of {c} knows --{long}", r.id);
                }
            }
        }
    }

    #[test]
    fn the_rule_ids_listed_at_build_time_are_the_builtin_rules() {
        let listed: Vec<&str> = crate::policy::rules::builtin_rule_ids().collect();
        let parsed: Vec<&str> = builtin().rules.iter().map(|r| r.id.as_str()).collect();
        assert_eq!(listed, parsed);
    }
}
