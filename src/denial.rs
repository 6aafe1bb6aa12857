//! `Denial`: why a command may not run, with everything a caller needs to
//! correct it. Made by `check` (and the workspace, for a cwd that is not
//! there), carried by `result::RunResult`, rendered by every face.

use crate::lex::LexError;
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum DenialKind {
    /// Refused by the policy: exit 126.
    Denied,
    /// Allowed, but no such program on the policy's search path: exit 127.
    NotFound,
}

/// A refusal with everything a caller needs to correct the command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
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
