//! `Denial`: why a command may not run, with everything a caller needs to
//! correct it. Made by `check` (and the workspace, for a cwd that is not
//! there), carried by `result::RunResult`, rendered by every face.

use crate::lex::LexError;
use serde::{Deserialize, Serialize};

/// The rule of every `NotFound` denial (and of no other).
pub const NOT_FOUND_RULE: &str = "command.not-found";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum DenialKind {
    /// Refused by the policy: exit 126.
    Denied,
    /// Allowed, but no such program on the policy's search path: exit 127.
    NotFound,
}

/// A refusal with everything a caller needs to correct the command.
///
/// `kind` is not in the JSON (the RunResult's status says it); read back,
/// it follows from the rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", from = "DenialFields")]
pub struct Denial {
    #[serde(skip)]
    pub kind: DenialKind,
    pub rule: String,
    pub reason: String,
    /// Byte offset in the command string, when it was lexed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offset: Option<usize>,
    /// Index in argv of the word at fault.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arg_index: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

impl Denial {
    pub fn new(rule: &str, reason: impl Into<String>, hint: impl Into<String>) -> Denial {
        Denial {
            kind: DenialKind::Denied,
            rule: rule.to_string(),
            reason: reason.into(),
            offset: None,
            arg_index: None,
            hint: Some(hint.into()),
        }
    }

    /// Allowed, but there is no such program to run: exit 127.
    pub fn not_found(reason: impl Into<String>, hint: impl Into<String>) -> Denial {
        Denial {
            kind: DenialKind::NotFound,
            ..Denial::new(NOT_FOUND_RULE, reason, hint)
        }
    }

    pub fn at_arg(mut self, index: usize) -> Denial {
        self.arg_index = Some(index);
        self
    }
}

impl From<LexError> for Denial {
    fn from(e: LexError) -> Denial {
        Denial {
            kind: DenialKind::Denied,
            rule: e.rule.to_string(),
            reason: e.reason,
            offset: Some(e.offset),
            arg_index: None,
            hint: Some(e.hint.to_string()),
        }
    }
}

impl Denial {
    /// Where the fault is, for people: "argument 2, at byte 7", or either
    /// half alone (lexer refusals have no argument, `--argv` words no byte).
    pub fn location(&self) -> Option<String> {
        match (self.arg_index, self.offset) {
            (Some(i), Some(o)) => Some(format!("argument {i}, at byte {o}")),
            (Some(i), None) => Some(format!("argument {i}")),
            (None, Some(o)) => Some(format!("at byte {o}")),
            (None, None) => None,
        }
    }
}

impl std::fmt::Display for Denial {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.rule, self.reason)?;
        if let Some(at) = self.location() {
            write!(f, " ({at})")?;
        }
        if let Some(h) = &self.hint {
            write!(f, "; {h}")?;
        }
        Ok(())
    }
}

/// A denial as JSON has it.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
struct DenialFields {
    rule: String,
    reason: String,
    #[serde(default)]
    offset: Option<usize>,
    #[serde(default)]
    arg_index: Option<usize>,
    #[serde(default)]
    hint: Option<String>,
}

impl From<DenialFields> for Denial {
    fn from(f: DenialFields) -> Denial {
        Denial {
            kind: if f.rule == NOT_FOUND_RULE {
                DenialKind::NotFound
            } else {
                DenialKind::Denied
            },
            rule: f.rule,
            reason: f.reason,
            offset: f.offset,
            arg_index: f.arg_index,
            hint: f.hint,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_denial_reads_back_as_it_was_written() {
        for d in [
            Denial::new("lex.list", "unquoted `;`", "one command per call").at_arg(2),
            Denial::not_found("`x` is not installed", "install it"),
        ] {
            let back: Denial = serde_json::from_str(&serde_json::to_string(&d).unwrap()).unwrap();
            assert_eq!(back, d);
        }
    }
}
