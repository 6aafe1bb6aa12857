//! `[[rules]]` and `[packs]`: argument rules and guards as a policy (or a
//! built-in pack) writes them, checked when they are loaded. How a rule is
//! matched against a command is `check::rules`.

use regex::Regex;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::sync::OnceLock;

/// How bad it is when a rule fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Severity {
    Low,
    Medium,
    High,
    /// Runs another program or writes outside the workspace: always denied.
    #[default]
    Critical,
}

impl std::fmt::Display for Severity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Severity::Low => "low",
            Severity::Medium => "medium",
            Severity::High => "high",
            Severity::Critical => "critical",
        })
    }
}

/// A rule as written in a pack or in the policy's `[[rules]]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RuleSpec {
    /// Stable id, e.g. `args.find.exec` or `guard.git.push-force`.
    pub id: String,
    /// Programs it applies to (basenames; a trailing `*` matches a suffix).
    pub commands: Vec<String>,
    /// Only when the subcommand is one of these (`push`, `exec`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub subcommand: Vec<String>,
    /// Fires when the subcommand is not one of these (allow only listed).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub subcommand_not_in: Vec<String>,
    /// Any of these options (`-o`, `--output`), however written.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub option: Vec<String>,
    /// The option's value must match (regex).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// Another option that must also be present (any of these).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub with_option: Vec<String>,
    /// The rule does not fire when any of these options is present.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unless_option: Vec<String>,
    /// A positional (after the subcommand) matching this regex.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub positional: Option<String>,
    /// Only the positional at this place (0 = the first, -1 = the last).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub positional_index: Option<i64>,
    /// Only positionals at or after this place (`sed -i SCRIPT FILE...`:
    /// 1 skips the script).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub positional_from: Option<usize>,
    /// Only the leading positionals: those before the first option that
    /// follows one (the command path of `az group delete --name x`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub leading: bool,
    /// The positional right after the one `positional` matched must match
    /// this regex too (`find -fprint FILE`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub then: Option<String>,
    /// `option` counts only before the subcommand: the program's global
    /// options (`git --config-env`), not a subcommand's own.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub before_subcommand: bool,
    /// Only when there are at least this many positionals.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_positionals: Option<usize>,
    /// Only when there are at most this many positionals (`scancel -u
    /// alice` without a job id: 0).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_positionals: Option<usize>,
    /// Not when the program is agent-rsh's own interpreter (a shell the
    /// policy does not allow by name, under `syntax = "compound"`), which
    /// checks each command the shell reads when it runs.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub unless_interpreted: bool,
    /// Fires when a positional does not match this regex (required shape).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub positional_not: Option<String>,
    /// Positionals are paths: compare them lexically normalized (`//`,
    /// `.` and `..` resolved), so `/usr/../` is `/` and `a/../..` is `..`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub paths: bool,
    /// A raw argv word (after the program name) matching this regex, for
    /// programs whose parsers are not getopt (`zip -TT`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub word: Option<String>,
    /// A value, positional or word matching this regex does not count.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub except: Option<String>,
    /// The command's standard input reads a file whose path matches this
    /// regex: the file of a `< FILE` redirection, or one an earlier stage
    /// of the pipeline copies to its output (`cat .env | nc host 80`).
    /// Only what the words of the script say is known; a file named by
    /// an expansion in another stage is not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stdin: Option<String>,
    pub severity: Severity,
    pub reason: String,
    /// What to run instead.
    pub hint: String,
    #[serde(skip)]
    compiled: OnceLock<Result<Compiled, PatternError>>,
}

/// Why a rule, or the policy's `[packs]` switches, cannot be used. The
/// text is what `policy check` (and every command under the policy) says.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RuleError {
    #[error("rule id {0:?} must be a non-empty word")]
    Id(String),
    #[error("rule {0:?}: commands must name at least one program")]
    NoCommands(String),
    #[error("rule {0:?}: reason and hint are required (what is wrong, what to run instead)")]
    NoReasonOrHint(String),
    #[error("rule {0:?}: value needs option")]
    ValueWithoutOption(String),
    #[error("rule {0:?}: positional_index, positional_from, leading and then need positional")]
    PlaceWithoutPositional(String),
    #[error("rule {0:?}: before_subcommand needs option")]
    BeforeSubcommandWithoutOption(String),
    #[error("rule {id:?}: {error}")]
    Pattern { id: String, error: PatternError },
    #[error("packs.off: no built-in pack {name:?}; the packs are: {}", .packs.join(", "))]
    UnknownPack { name: String, packs: Vec<String> },
    #[error("packs.rules_off: no built-in rule {0:?}; `agent-rsh policy show --rules` lists them")]
    UnknownRule(String),
}

/// A pattern or option name of a rule that does not compile.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PatternError {
    #[error(
        "option {0:?} must be one short option (`-o`) or a long one (`--output`); \
         match other words with `word` or `positional`"
    )]
    OptionName(String),
    #[error("{field}: invalid regex: {error}")]
    Regex {
        field: &'static str,
        error: regex::Error,
    },
}

/// A pattern of a rule: a regex, or a reader for a language a regex
/// cannot follow, named by a whole pattern of `@SED_EXECUTES@`,
/// `@SED_WRITES_OUTSIDE@` or `@SED_UNREADABLE@` (a sed script read as sed
/// reads it: `policy::sed`).
#[derive(Debug, Clone)]
pub(crate) enum Pattern {
    Regex(Regex),
    Code(fn(&str) -> bool),
}

impl Pattern {
    pub(crate) fn is_match(&self, s: &str) -> bool {
        match self {
            Pattern::Regex(r) => r.is_match(s),
            Pattern::Code(f) => f(s),
        }
    }
}

fn sed_writes_outside(script: &str) -> bool {
    static RE: std::sync::OnceLock<Regex> = std::sync::OnceLock::new();
    let re = RE.get_or_init(|| Regex::new(OUTSIDE).expect("OUTSIDE compiles"));
    super::sed::writes(script, &|f| re.is_match(f))
}

/// Regexes of a rule, compiled once. `@OUTSIDE@` in a pattern stands for
/// paths that leave the workspace or reach its control files.
#[derive(Debug, Clone)]
pub(crate) struct Compiled {
    pub(crate) value: Option<Pattern>,
    pub(crate) positional: Option<Pattern>,
    pub(crate) positional_not: Option<Pattern>,
    pub(crate) then: Option<Pattern>,
    pub(crate) word: Option<Pattern>,
    pub(crate) except: Option<Pattern>,
    pub(crate) stdin: Option<Pattern>,
    pub(crate) option: Vec<OptName>,
    pub(crate) with_option: Vec<OptName>,
    pub(crate) unless_option: Vec<OptName>,
}

/// Absolute paths, `..` climbs, and files that configure programs or run
/// code (`.git/`, `.ssh/`, shell start-up files).
const OUTSIDE: &str = r"(^/|(^|/)\.\.(/|$)|(^|/)\.(git|ssh|gnupg|bashrc|bash_profile|bash_login|profile|zshrc|zshenv|zprofile|config|gitconfig|npmrc|pypirc|netrc|cargo)(/|$))";

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum OptName {
    Short(char),
    Long(String),
}

impl OptName {
    pub(crate) fn parse(s: &str) -> Result<OptName, PatternError> {
        if let Some(l) = s.strip_prefix("--").filter(|l| !l.is_empty()) {
            return Ok(OptName::Long(l.to_string()));
        }
        let mut chars = s.strip_prefix('-').unwrap_or("").chars();
        match (chars.next(), chars.next()) {
            (Some(c), None) if c != '-' => Ok(OptName::Short(c)),
            _ => Err(PatternError::OptionName(s.to_string())),
        }
    }
}

fn regex(field: &'static str, pattern: &Option<String>) -> Result<Option<Pattern>, PatternError> {
    pattern
        .as_deref()
        .map(|p| match p {
            "@SED_EXECUTES@" => Ok(Pattern::Code(super::sed::executes)),
            "@SED_WRITES_OUTSIDE@" => Ok(Pattern::Code(sed_writes_outside)),
            "@SED_UNREADABLE@" => Ok(Pattern::Code(super::sed::unreadable)),
            p => Regex::new(&p.replace("@OUTSIDE@", OUTSIDE))
                .map(Pattern::Regex)
                .map_err(|error| PatternError::Regex { field, error }),
        })
        .transpose()
}

fn names(list: &[String]) -> Result<Vec<OptName>, PatternError> {
    list.iter().map(|s| OptName::parse(s)).collect()
}

impl RuleSpec {
    pub(crate) fn compiled(&self) -> Result<&Compiled, RuleError> {
        self.compiled
            .get_or_init(|| {
                Ok(Compiled {
                    value: regex("value", &self.value)?,
                    positional: regex("positional", &self.positional)?,
                    positional_not: regex("positional_not", &self.positional_not)?,
                    then: regex("then", &self.then)?,
                    word: regex("word", &self.word)?,
                    except: regex("except", &self.except)?,
                    stdin: regex("stdin", &self.stdin)?,
                    option: names(&self.option)?,
                    with_option: names(&self.with_option)?,
                    unless_option: names(&self.unless_option)?,
                })
            })
            .as_ref()
            .map_err(|error| RuleError::Pattern {
                id: self.id.clone(),
                error: error.clone(),
            })
    }

    /// Checks the rule is well formed; every regex compiles.
    pub fn validate(&self) -> Result<(), RuleError> {
        self.validate_shape()?;
        self.compiled().map(|_| ())
    }

    /// Everything `validate` checks but the patterns. Compiling every
    /// built-in pattern cost about 15 ms per process, so built-in rules
    /// compile on first use (a unit test compiles them all), while a
    /// policy's own rules are compiled when the policy loads.
    pub fn validate_shape(&self) -> Result<(), RuleError> {
        let id = || self.id.clone();
        if self.id.is_empty() || self.id.chars().any(|c| c.is_whitespace()) {
            return Err(RuleError::Id(id()));
        }
        if self.commands.is_empty() {
            return Err(RuleError::NoCommands(id()));
        }
        if self.reason.trim().is_empty() || self.hint.trim().is_empty() {
            return Err(RuleError::NoReasonOrHint(id()));
        }
        if self.value.is_some() && self.option.is_empty() {
            return Err(RuleError::ValueWithoutOption(id()));
        }
        let placed = self.positional_index.is_some()
            || self.positional_from.is_some()
            || self.leading
            || self.then.is_some();
        if placed && self.positional.is_none() {
            return Err(RuleError::PlaceWithoutPositional(id()));
        }
        if self.before_subcommand && self.option.is_empty() {
            return Err(RuleError::BeforeSubcommandWithoutOption(id()));
        }
        Ok(())
    }

    /// The pack a built-in rule belongs to (see `pack_of`).
    pub fn pack(&self) -> &str {
        pack_of(&self.id)
    }
}

/// The ids of the built-in rules (`packs/*.toml`), listed by build.rs, so
/// that `[packs]` can be checked when the policy loads without the packs
/// themselves (which `check` parses on first use).
const BUILTIN_RULE_IDS: &str = include_str!(concat!(env!("OUT_DIR"), "/rule_ids.txt"));

/// The built-in rule ids, in pack order.
pub fn builtin_rule_ids() -> impl Iterator<Item = &'static str> {
    BUILTIN_RULE_IDS.lines().filter(|l| !l.is_empty())
}

/// The pack a rule id belongs to: `args.find.exec` → `find`,
/// `guard.git.push-force` → `guard.git`.
pub fn pack_of(id: &str) -> &str {
    let base = id.rsplit_once('.').map_or(id, |(p, _)| p);
    base.strip_prefix("args.").unwrap_or(base)
}

/// The policy's switches for built-in packs: `[packs]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PackSwitches {
    /// Built-in packs switched off, by name: a tool's pack is named after
    /// it (`find`, `git`, `awk`), guard packs `guard.fs`, `guard.git`, ...;
    /// `agent-rsh policy show --rules` lists them.
    pub off: Vec<String>,
    /// Single built-in rules switched off, by id (`args.git.config-option`).
    pub rules_off: Vec<String>,
}

impl PackSwitches {
    /// Is this built-in rule in force?
    pub fn enabled(&self, rule: &RuleSpec) -> bool {
        !self.off.iter().any(|p| p == rule.pack()) && !self.rules_off.contains(&rule.id)
    }

    /// Unknown names are errors: a typo must not leave a pack on (or
    /// silently do nothing).
    pub fn validate(&self) -> Result<(), RuleError> {
        for p in &self.off {
            if !builtin_rule_ids().any(|id| pack_of(id) == p) {
                let packs: BTreeSet<&str> = builtin_rule_ids().map(pack_of).collect();
                return Err(RuleError::UnknownPack {
                    name: p.clone(),
                    packs: packs.iter().map(|p| p.to_string()).collect(),
                });
            }
        }
        for r in &self.rules_off {
            if !builtin_rule_ids().any(|x| x == r) {
                return Err(RuleError::UnknownRule(r.clone()));
            }
        }
        Ok(())
    }
}

/// The policy's own rules: `[[rules]]`, checked (patterns compiled) when
/// the policy is loaded.
pub fn validate_policy_rules(rules: &[RuleSpec]) -> Result<(), RuleError> {
    rules.iter().try_for_each(RuleSpec::validate)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn switches_refuse_unknown_names() {
        let s = PackSwitches {
            off: vec!["nope".into()],
            rules_off: vec![],
        };
        assert!(s.validate().is_err());
        let s = PackSwitches {
            off: vec!["find".into()],
            rules_off: vec!["args.git.config-option".into()],
        };
        s.validate().unwrap();
    }
}
