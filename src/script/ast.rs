//! The parsed script: lists, pipelines, commands, words.
//!
//! Every node keeps the byte offset where it starts in the command string,
//! so a refusal can point at the stage at fault. Words keep their quoting
//! as parts: what was quoted is never split, globbed or brace-expanded.

use serde::Serialize;

/// A whole command string.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Script {
    pub body: List,
    /// Here-document bodies, referenced by index from redirections.
    pub heredocs: Vec<Heredoc>,
    /// How many simple commands the script holds (ids run 0..n).
    pub simple_commands: usize,
}

/// Commands separated by `;` or newlines.
pub type List = Vec<AndOr>;

/// `a && b || c`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AndOr {
    pub first: Pipeline,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rest: Vec<(Connector, Pipeline)>,
    /// Ended by `&`: runs asynchronously, in a forked copy of the shell.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub background: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Connector {
    And,
    Or,
}

/// `[!] a | b |& c`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Pipeline {
    pub offset: usize,
    /// `!`: the status is inverted.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub negated: bool,
    /// `time` (`time -p` when `Some(true)`): the pipeline's real, user
    /// and system time are printed on standard error when it ends.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub timed: Option<bool>,
    pub stages: Vec<Stage>,
}

/// One stage of a pipeline; `stderr_too` is `|&` after it.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Stage {
    pub command: Command,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub stderr_too: bool,
}

#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum Command {
    Simple(SimpleCommand),
    /// `( list )`: runs in a copy of the shell.
    Subshell {
        offset: usize,
        body: List,
        redirects: Vec<Redirect>,
    },
    /// `{ list; }`.
    Group {
        offset: usize,
        body: List,
        redirects: Vec<Redirect>,
    },
    If {
        offset: usize,
        /// `if`/`elif` conditions with their bodies.
        branches: Vec<(List, List)>,
        #[serde(skip_serializing_if = "Option::is_none")]
        otherwise: Option<List>,
        redirects: Vec<Redirect>,
    },
    /// `while` (or `until` when `until` is set).
    While {
        offset: usize,
        until: bool,
        condition: List,
        body: List,
        redirects: Vec<Redirect>,
    },
    For {
        offset: usize,
        name: String,
        /// None: `for NAME; do` (the positional parameters: none here).
        words: Option<Vec<Word>>,
        body: List,
        redirects: Vec<Redirect>,
    },
    Case {
        offset: usize,
        word: Word,
        arms: Vec<CaseArm>,
        redirects: Vec<Redirect>,
    },
    /// `for (( init; condition; step )); do ...; done`: the three
    /// expressions are arithmetic (an empty condition is true).
    ArithFor {
        offset: usize,
        init: Word,
        condition: Word,
        step: Word,
        body: List,
        redirects: Vec<Redirect>,
    },
    /// `NAME() BODY` or `function NAME BODY`: defines NAME when it runs.
    /// The body's redirections are its own, applied at each call.
    Function {
        offset: usize,
        name: String,
        body: Box<Command>,
    },
}

impl Command {
    pub fn offset(&self) -> usize {
        match self {
            Command::Simple(s) => s.offset,
            Command::Subshell { offset, .. }
            | Command::Group { offset, .. }
            | Command::If { offset, .. }
            | Command::While { offset, .. }
            | Command::For { offset, .. }
            | Command::Case { offset, .. }
            | Command::ArithFor { offset, .. }
            | Command::Function { offset, .. } => *offset,
        }
    }

    pub fn redirects(&self) -> &[Redirect] {
        match self {
            Command::Simple(s) => &s.redirects,
            Command::Subshell { redirects, .. }
            | Command::Group { redirects, .. }
            | Command::If { redirects, .. }
            | Command::While { redirects, .. }
            | Command::For { redirects, .. }
            | Command::Case { redirects, .. }
            | Command::ArithFor { redirects, .. } => redirects,
            Command::Function { .. } => &[],
        }
    }
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CaseArm {
    pub patterns: Vec<Word>,
    pub body: List,
    /// `;;` (false) or `;&` (true: fall through into the next arm's body).
    /// `;;&` is refused.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub fall_through: bool,
}

/// `NAME=value ... word... redirections`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SimpleCommand {
    /// Index among the script's simple commands, in source order.
    pub id: usize,
    pub offset: usize,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub assignments: Vec<Assignment>,
    pub words: Vec<Word>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub redirects: Vec<Redirect>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Assignment {
    pub offset: usize,
    pub name: String,
    /// `NAME+=value`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub append: bool,
    /// `NAME[SUBSCRIPT]=value`: an element of an array.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub index: Option<Word>,
    /// The value; `NAME=(...)` is one `Part::Array`.
    pub value: Word,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Redirect {
    pub offset: usize,
    /// The explicit fd number (`2>`), if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fd: Option<u32>,
    pub op: RedirOp,
    pub target: RedirTarget,
}

impl Redirect {
    /// The fd the redirection changes.
    pub fn fd(&self) -> u32 {
        self.fd.unwrap_or(match self.op {
            RedirOp::In | RedirOp::ReadWrite | RedirOp::DupIn | RedirOp::HereString => 0,
            RedirOp::Heredoc => 0,
            _ => 1,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum RedirOp {
    /// `<`
    In,
    /// `>`
    Out,
    /// `>>`
    Append,
    /// `>|`
    Clobber,
    /// `<>`
    ReadWrite,
    /// `>&N`, `>&-`
    DupOut,
    /// `<&N`, `<&-`
    DupIn,
    /// `&>` (and `>&FILE`)
    OutErr,
    /// `&>>`
    AppendErr,
    /// `<<` and `<<-`
    Heredoc,
    /// `<<<`
    HereString,
}

impl RedirOp {
    /// Whether the target is opened for writing.
    pub fn writes(self) -> bool {
        matches!(
            self,
            RedirOp::Out
                | RedirOp::Append
                | RedirOp::Clobber
                | RedirOp::ReadWrite
                | RedirOp::OutErr
                | RedirOp::AppendErr
        )
    }
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum RedirTarget {
    /// A file name (or, for `>&`/`<&`, an fd number or `-`).
    Word(Word),
    /// Index into `Script::heredocs`.
    Heredoc(usize),
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Heredoc {
    pub offset: usize,
    pub delimiter: String,
    /// A quoted delimiter keeps the body literal.
    pub quoted: bool,
    /// The body: one word whose parts are all quoted (no splitting, no
    /// globbing); expansions only when the delimiter was unquoted.
    pub body: Word,
}

/// A word as written: its parts keep their quoting.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Word {
    pub offset: usize,
    /// Byte offset just past the word's text (approximate inside
    /// backquotes and here-document bodies, which are unescaped first).
    pub end: usize,
    pub parts: Vec<Part>,
}

#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", content = "value", rename_all = "camelCase")]
pub enum Part {
    /// Unquoted text: subject to brace, tilde and pathname expansion.
    Lit(String),
    /// Quoted or escaped text: taken as it is.
    Quoted(String),
    Param(Box<Param>),
    /// `$(...)` or backquotes.
    Subst(Box<Subst>),
    /// `<(...)` or `>(...)`: a path naming a pipe to or from the list.
    Proc(Box<ProcSubst>),
    /// `$(( expression ))`.
    Arith(Box<Arith>),
    /// `(a b [3]=c)` right after `NAME=` or `NAME+=`: an array's elements
    /// (in an assignment, or an argument of `declare`/`local`).
    Array(Box<ArrayLit>),
}

/// The elements of `NAME=(...)`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ArrayLit {
    pub offset: usize,
    pub elems: Vec<ArrayElem>,
}

/// One element of an array literal: a word (split and globbed as a
/// command's argument is), or `[SUBSCRIPT]=value` (one string).
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ArrayElem {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub index: Option<Word>,
    pub value: Word,
}

/// `$(( expression ))`: the expression's text, after parameter
/// expansion, command substitution and quote removal, evaluated as bash
/// arithmetic.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Arith {
    pub offset: usize,
    /// Every part quoted: the text is never split or globbed.
    pub expr: Word,
    pub quoted: bool,
}

/// `$NAME`, `${NAME}`, `${NAME:-word}`, `$?`, ...
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Param {
    pub offset: usize,
    pub name: String,
    pub op: ParamOp,
    /// `NAME[...]`: an element, or all of them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub index: Option<Subscript>,
    /// The operand of `:-` and friends (the pattern of `/`, the offset of
    /// `:`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub arg: Option<Word>,
    /// The second operand: the replacement of `/`, the length of `:`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rep: Option<Word>,
    /// Inside double quotes (or a here-document): no splitting, no globbing.
    pub quoted: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum ParamOp {
    /// `$x`, `${x}`
    Plain,
    /// `${#x}`
    Length,
    /// `${x-w}` / `${x:-w}` (colon: also when set but empty)
    Default { colon: bool },
    /// `${x=w}` / `${x:=w}`
    Assign { colon: bool },
    /// `${x+w}` / `${x:+w}`
    Alternative { colon: bool },
    /// `${x?w}` / `${x:?w}`
    Error { colon: bool },
    /// `${x#p}`, `${x##p}` (longest when `longest`)
    TrimPrefix { longest: bool },
    /// `${x%p}`, `${x%%p}`
    TrimSuffix { longest: bool },
    /// `${x:offset}`, `${x:offset:length}` (arithmetic operands).
    Substring,
    /// `${x/p/r}` (first), `${x//p/r}` (all), `${x/#p/r}` (at the
    /// start), `${x/%p/r}` (at the end).
    Replace { mode: ReplaceMode },
    /// `${x^}`, `${x^^}`, `${x,}`, `${x,,}` (an optional pattern selects
    /// the characters).
    Case { upper: bool, all: bool },
    /// `${!a[@]}`, `${!a[*]}`: the indices of an array.
    Keys,
    /// `${!NAME}`: the variable NAME names.
    Indirect,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum ReplaceMode {
    First,
    All,
    Prefix,
    Suffix,
}

/// The subscript of `NAME[...]`.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Subscript {
    /// `[@]`: every element, a field each when quoted.
    All,
    /// `[*]`: every element, joined by IFS's first character when quoted.
    Star,
    /// An index (arithmetic) or a key (an associative array's).
    Expr(Word),
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Subst {
    pub offset: usize,
    pub body: List,
    pub quoted: bool,
}

/// `<(list)` (`output` false: the list writes, the command reads the
/// path) or `>(list)` (`output` true: the command writes, the list reads).
/// The list runs concurrently, in a copy of the shell, while the command
/// that gets the word runs; never inside double quotes.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProcSubst {
    pub offset: usize,
    pub body: List,
    pub output: bool,
}

impl Word {
    /// The word's text when it has no expansions at all: quote removal
    /// only. Unquoted glob, brace and tilde characters make it dynamic
    /// (None) unless `allow_active` is set.
    pub fn literal(&self) -> Option<String> {
        let mut s = String::new();
        for p in &self.parts {
            match p {
                Part::Lit(t) | Part::Quoted(t) => s.push_str(t),
                _ => return None,
            }
        }
        Some(s)
    }

    /// Whether the word is exactly this unquoted text (reserved words).
    pub fn is_bare(&self, text: &str) -> bool {
        matches!(self.parts.as_slice(), [Part::Lit(t)] if t == text)
    }

    /// Whether any part is quoted or escaped.
    pub fn has_quotes(&self) -> bool {
        self.parts.iter().any(|p| match p {
            Part::Quoted(_) => true,
            Part::Param(p) => p.quoted,
            Part::Subst(s) => s.quoted,
            Part::Arith(a) => a.quoted,
            // Its path is taken as it is (no splitting, no globbing), but
            // the word is not written with quotes.
            Part::Proc(_) => false,
            Part::Array(_) => false,
            Part::Lit(_) => false,
        })
    }
}

/// Visits every simple command of a list, depth first in source order,
/// including those inside command and process substitutions and
/// here-documents.
pub fn each_simple<'a>(script: &'a Script, list: &'a List, f: &mut dyn FnMut(&'a SimpleCommand)) {
    for ao in list {
        for p in std::iter::once(&ao.first).chain(ao.rest.iter().map(|(_, p)| p)) {
            for st in &p.stages {
                each_simple_command(script, &st.command, f);
            }
        }
    }
}

pub fn each_simple_command<'a>(
    script: &'a Script,
    c: &'a Command,
    f: &mut dyn FnMut(&'a SimpleCommand),
) {
    let words_of_redirects = |rs: &'a [Redirect], f: &mut dyn FnMut(&'a SimpleCommand)| {
        for r in rs {
            match &r.target {
                RedirTarget::Word(w) => each_in_word(script, w, f),
                RedirTarget::Heredoc(i) => {
                    if let Some(h) = script.heredocs.get(*i) {
                        each_in_word(script, &h.body, f)
                    }
                }
            }
        }
    };
    match c {
        Command::Simple(s) => {
            for a in &s.assignments {
                if let Some(i) = &a.index {
                    each_in_word(script, i, f);
                }
                each_in_word(script, &a.value, f);
            }
            for w in &s.words {
                each_in_word(script, w, f);
            }
            words_of_redirects(&s.redirects, f);
            f(s);
        }
        Command::Subshell {
            body, redirects, ..
        }
        | Command::Group {
            body, redirects, ..
        } => {
            each_simple(script, body, f);
            words_of_redirects(redirects, f);
        }
        Command::If {
            branches,
            otherwise,
            redirects,
            ..
        } => {
            for (c, b) in branches {
                each_simple(script, c, f);
                each_simple(script, b, f);
            }
            if let Some(o) = otherwise {
                each_simple(script, o, f);
            }
            words_of_redirects(redirects, f);
        }
        Command::While {
            condition,
            body,
            redirects,
            ..
        } => {
            each_simple(script, condition, f);
            each_simple(script, body, f);
            words_of_redirects(redirects, f);
        }
        Command::For {
            words,
            body,
            redirects,
            ..
        } => {
            for w in words.iter().flatten() {
                each_in_word(script, w, f);
            }
            each_simple(script, body, f);
            words_of_redirects(redirects, f);
        }
        Command::Case {
            word,
            arms,
            redirects,
            ..
        } => {
            each_in_word(script, word, f);
            for a in arms {
                for p in &a.patterns {
                    each_in_word(script, p, f);
                }
                each_simple(script, &a.body, f);
            }
            words_of_redirects(redirects, f);
        }
        Command::ArithFor {
            init,
            condition,
            step,
            body,
            redirects,
            ..
        } => {
            for w in [init, condition, step] {
                each_in_word(script, w, f);
            }
            each_simple(script, body, f);
            words_of_redirects(redirects, f);
        }
        Command::Function { body, .. } => {
            each_simple_command(script, body, f);
        }
    }
}

fn each_in_word<'a>(script: &'a Script, w: &'a Word, f: &mut dyn FnMut(&'a SimpleCommand)) {
    for p in &w.parts {
        match p {
            Part::Param(p) => {
                if let Some(Subscript::Expr(w)) = &p.index {
                    each_in_word(script, w, f);
                }
                for a in p.arg.iter().chain(&p.rep) {
                    each_in_word(script, a, f);
                }
            }
            Part::Subst(s) => each_simple(script, &s.body, f),
            Part::Proc(p) => each_simple(script, &p.body, f),
            Part::Arith(a) => each_in_word(script, &a.expr, f),
            Part::Array(a) => {
                for e in &a.elems {
                    if let Some(i) = &e.index {
                        each_in_word(script, i, f);
                    }
                    each_in_word(script, &e.value, f);
                }
            }
            Part::Lit(_) | Part::Quoted(_) => {}
        }
    }
}
