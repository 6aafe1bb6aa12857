//! The built-in packs: grammars, wrappers and rules embedded as data
//! (`packs/*.toml`); and the policy's switches.
//!
//! build.rs writes each entry as its own JSON text and indexes the entries
//! by the programs they name, so a check parses only the entries of the
//! programs it meets, each once per process ([`lazy`]); the whole set
//! ([`builtin`]) is parsed only for listings (`policy show`) and tests.

use super::args::{Grammar, Grammars, name_matches};
use super::rules::RuleSpec;
use super::wrappers::WrapperSpec;
pub use crate::policy::rules::PackSwitches;
use serde::de::DeserializeOwned;
use std::collections::BTreeSet;
use std::sync::OnceLock;

/// Where one entry's JSON lies in `packs_entries.json`, and its pack file.
struct Entry {
    file: usize,
    start: usize,
    end: usize,
}

include!(concat!(env!("OUT_DIR"), "/packs_index.rs"));

const ENTRIES: &str = include_str!(concat!(env!("OUT_DIR"), "/packs_entries.json"));

static GRAMMAR_CELLS: [OnceLock<Grammar>; GRAMMARS.len()] =
    [const { OnceLock::new() }; GRAMMARS.len()];
static WRAPPER_CELLS: [OnceLock<WrapperSpec>; WRAPPERS.len()] =
    [const { OnceLock::new() }; WRAPPERS.len()];
static RULE_CELLS: [OnceLock<RuleSpec>; RULES.len()] = [const { OnceLock::new() }; RULES.len()];

/// Entry `i` of a kind, parsed and checked on first use. The packs are
/// part of the binary: one that does not parse is a build defect, caught
/// by the unit tests, which parse them all.
fn entry<T: DeserializeOwned, E: std::fmt::Display>(
    cells: &'static [OnceLock<T>],
    entries: &[Entry],
    i: usize,
    check: fn(&T) -> Result<(), E>,
) -> &'static T {
    cells[i].get_or_init(|| {
        let e = &entries[i];
        let parsed = serde_json::from_str(&ENTRIES[e.start..e.end])
            .map_err(|err| err.to_string())
            .and_then(|v| check(&v).map(|()| v).map_err(|err| err.to_string()));
        parsed.unwrap_or_else(|err| panic!("embedded packs: {}: {err}", PACK_FILES[e.file]))
    })
}

fn grammar_at(i: usize) -> &'static Grammar {
    entry(&GRAMMAR_CELLS, GRAMMARS, i, |_| Ok::<(), String>(()))
}

fn wrapper_at(i: usize) -> &'static WrapperSpec {
    entry(&WRAPPER_CELLS, WRAPPERS, i, WrapperSpec::validate)
}

fn rule_at(i: usize) -> &'static RuleSpec {
    entry(&RULE_CELLS, RULES, i, RuleSpec::validate_shape)
}

/// The entries naming `program` exactly, in load order.
fn named(by_name: &'static [(&'static str, &'static [u16])], program: &str) -> &'static [u16] {
    by_name
        .binary_search_by(|(name, _)| (*name).cmp(program))
        .map_or(&[][..], |k| by_name[k].1)
}

/// The pattern entries (`prefix*` among their names) that apply to
/// `program`, in load order, matched without parsing them.
fn globs<'a>(
    list: &'static [(u16, &'static [&'static str])],
    program: &'a str,
) -> impl Iterator<Item = u16> + 'a {
    list.iter()
        .filter(move |(_, names)| names.iter().any(|n| name_matches(n, program)))
        .map(|(i, _)| *i)
}

/// The packs as a check reads them: by program, parsing on first use.
#[derive(Debug, Clone, Copy)]
pub struct Lazy;

/// The built-in packs for checking commands.
pub fn lazy() -> &'static Lazy {
    &Lazy
}

impl Lazy {
    /// Built-in rules for `program`: exact names first, then patterns.
    /// No allocation: this runs for every command.
    pub fn rules_for<'a>(
        &self,
        program: &'a str,
    ) -> impl Iterator<Item = &'static RuleSpec> + use<'a> {
        let exact = named(RULE_BY_NAME, program);
        let globs = globs(RULE_GLOBS, program).filter(move |i| !exact.contains(i));
        exact
            .iter()
            .copied()
            .chain(globs)
            .map(|i| rule_at(usize::from(i)))
    }

    /// The first wrapper (in load order) that applies to `program` and
    /// its `subcommand` (`git for-each-repo`).
    pub fn wrapper(&self, program: &str, subcommand: Option<&str>) -> Option<&'static WrapperSpec> {
        let exact = named(WRAPPER_BY_NAME, program).iter().copied();
        exact
            .chain(globs(WRAPPER_GLOBS, program))
            .filter(|i| wrapper_at(usize::from(*i)).applies_to_subcommand(subcommand))
            .min()
            .map(|i| wrapper_at(usize::from(i)))
    }
}

impl Grammars for Lazy {
    fn grammar(&self, program: &str, subcommand: Option<&str>) -> Option<&Grammar> {
        let wanted = |i: &u16| grammar_at(usize::from(*i)).subcommand.as_deref() == subcommand;
        named(GRAMMAR_BY_NAME, program)
            .iter()
            .copied()
            .find(wanted)
            .or_else(|| globs(GRAMMAR_GLOBS, program).find(wanted))
            .map(|i| grammar_at(usize::from(i)))
    }
}

/// Everything built in, in load order.
#[derive(Debug, Default)]
pub struct Builtin {
    pub grammars: Vec<&'static Grammar>,
    pub wrappers: Vec<&'static WrapperSpec>,
    pub rules: Vec<&'static RuleSpec>,
}

/// The built-in packs, all parsed and checked (listings and tests; a check
/// uses [`lazy`]).
pub fn builtin() -> &'static Builtin {
    static B: OnceLock<Builtin> = OnceLock::new();
    B.get_or_init(|| Builtin {
        grammars: (0..GRAMMARS.len()).map(grammar_at).collect(),
        wrappers: (0..WRAPPERS.len()).map(wrapper_at).collect(),
        rules: (0..RULES.len()).map(rule_at).collect(),
    })
}

impl Builtin {
    /// Built-in rules for `program`: exact names first, then patterns.
    pub fn rules_for<'a>(
        &self,
        program: &'a str,
    ) -> impl Iterator<Item = &'static RuleSpec> + use<'a> {
        Lazy.rules_for(program)
    }

    pub fn wrapper(&self, program: &str, subcommand: Option<&str>) -> Option<&WrapperSpec> {
        Lazy.wrapper(program, subcommand)
    }

    /// The names of all built-in packs (of rules, and of wrappers that
    /// belong to one: find's actions are in pack `find`).
    pub fn packs(&self) -> BTreeSet<&str> {
        self.rules
            .iter()
            .map(|r| r.pack())
            .chain(self.wrappers.iter().filter_map(|w| w.pack.as_deref()))
            .collect()
    }
}

impl Grammars for Builtin {
    fn grammar(&self, program: &str, subcommand: Option<&str>) -> Option<&Grammar> {
        Lazy.grammar(program, subcommand)
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
            "guard.iac",
            "guard.data",
            "guard.transfer",
            "guard.env",
            "guard.hpc",
            "guard.registry",
            "guard.service",
            "guard.net",
            "guard.disk",
            "guard.workflow",
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
            for (c, re) in w.calls.iter().zip(w.calls_re()) {
                let re = re
                    .as_ref()
                    .unwrap_or_else(|| panic!("{:?}: bad regex {}", w.commands, c.pattern));
                assert!(
                    re.capture_names().any(|n| n == Some("arg")) && !c.command.is_empty(),
                    "{:?}: a call needs an `arg` group and a command: {}",
                    w.commands,
                    c.pattern
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
    fn the_index_by_program_finds_what_a_scan_of_every_entry_finds() {
        let b = builtin();
        let mut programs: BTreeSet<String> = ["python3.12", "mkfs.ext4", "pypy3", "nosuch", ""]
            .into_iter()
            .map(String::from)
            .collect();
        let named = b
            .rules
            .iter()
            .flat_map(|r| &r.commands)
            .chain(b.wrappers.iter().flat_map(|w| &w.commands))
            .chain(b.grammars.iter().flat_map(|g| &g.commands));
        programs.extend(named.map(|c| c.trim_end_matches('*').to_string()));
        let subcommands: BTreeSet<Option<&str>> = b
            .grammars
            .iter()
            .map(|g| g.subcommand.as_deref())
            .chain([None, Some("nosuch")])
            .collect();
        for p in &programs {
            // Rules: exact names first, then patterns, each once.
            let mut scan: Vec<*const RuleSpec> = b
                .rules
                .iter()
                .filter(|r| r.commands.iter().any(|c| c == p))
                .map(|r| *r as *const RuleSpec)
                .collect();
            for r in &b.rules {
                let ptr = *r as *const RuleSpec;
                if r.applies_to(p) && !scan.contains(&ptr) {
                    scan.push(ptr);
                }
            }
            let lazy_rules: Vec<*const RuleSpec> =
                lazy().rules_for(p).map(|r| r as *const RuleSpec).collect();
            assert_eq!(lazy_rules, scan, "rules for {p:?}");
            for sub in &subcommands {
                let first = b
                    .wrappers
                    .iter()
                    .find(|w| w.applies_to(p) && w.applies_to_subcommand(*sub))
                    .copied();
                assert_eq!(
                    lazy().wrapper(p, *sub).map(|w| w as *const WrapperSpec),
                    first.map(|w| w as *const WrapperSpec),
                    "wrapper of {p:?} {sub:?}"
                );
                let wanted = |g: &&&Grammar| g.subcommand.as_deref() == *sub && g.applies_to(p);
                let exact = b
                    .grammars
                    .iter()
                    .find(|g| wanted(g) && g.commands.iter().any(|c| c == p));
                let scan = exact.or_else(|| b.grammars.iter().find(wanted)).copied();
                assert_eq!(
                    lazy().grammar(p, *sub).map(|g| g as *const Grammar),
                    scan.map(|g| g as *const Grammar),
                    "grammar of {p:?} {sub:?}"
                );
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
