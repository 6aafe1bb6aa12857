//! The script parser: a command string to a `Script`, as bash reads it, or
//! a refusal with a rule, a byte offset and a hint.
//!
//! Quoting follows the simple lexer's rules (`crate::lex`), widened to the
//! places bash allows them: `'...'` literal, `"..."` literal except `\"`,
//! `\\`, `` \` ``, `\$`, backslash-newline and the expansions `$`/`` ` ``;
//! `\x` outside quotes is `x`. The characters refused everywhere are the
//! lexer's (`lex::forbidden_char`), except that a line break separates
//! commands here. Anything bash would read and agent-rsh does not
//! implement is refused, never guessed.

use super::ast::*;
use crate::lex::{self, LexError};

/// Nesting deeper than this (subshells, substitutions, compound commands)
/// is refused: no agent writes it, and it bounds the parser's stack.
const MAX_DEPTH: usize = 48;

pub const SYNTAX: &str = "syntax.error";
pub const UNSUPPORTED: &str = "syntax.unsupported";

/// Words that end a list when they stand in command position.
const TERMINATORS: &[&str] = &["then", "elif", "else", "fi", "do", "done", "esac", "}"];

/// Parses `src` as bash would parse `bash -c SRC`.
pub fn parse(src: &str, max_bytes: usize) -> Result<Script, LexError> {
    if src.len() > max_bytes {
        return Err(LexError {
            rule: "lex.too-long",
            offset: max_bytes,
            reason: format!(
                "command is {} bytes, the policy allows at most {max_bytes}",
                src.len()
            ),
            hint: "shorten the command, or pass long data in a file in the workspace",
        });
    }
    for (i, c) in src.char_indices() {
        if c == '\n' {
            continue;
        }
        if let Some((rule, what)) = lex::forbidden_char(c) {
            return Err(LexError {
                rule,
                offset: i,
                reason: format!("{what} U+{:04X} is not allowed", c as u32),
                hint: if c == '\r' {
                    "end lines with \\n alone (no carriage return)"
                } else {
                    "remove the invisible or control character; it can make the command read differently from what runs"
                },
            });
        }
    }
    let mut p = Parser::new(src, src, 0, 0);
    let body = p.parse_list()?;
    match p.peek()?.kind {
        TokKind::Eof => {}
        _ => return Err(p.unexpected()),
    }
    p.finish_heredocs_at_eof()?;
    if body.is_empty() {
        return Err(LexError {
            rule: "lex.empty",
            offset: 0,
            reason: "the command is empty".into(),
            hint: "give a command, e.g. `ls -la`",
        });
    }
    Ok(Script {
        body,
        heredocs: p.heredocs,
        simple_commands: p.next_id,
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    AndIf,
    OrIf,
    Amp,
    Pipe,
    PipeAmp,
    Semi,
    DSemi,
    SemiAmp,
    DSemiAmp,
    LParen,
    RParen,
    Less,
    Great,
    DGreat,
    Clobber,
    LessGreat,
    LessAnd,
    GreatAnd,
    AndGreat,
    AndDGreat,
    DLess,
    DLessDash,
    TLess,
}

impl Op {
    fn text(self) -> &'static str {
        match self {
            Op::AndIf => "&&",
            Op::OrIf => "||",
            Op::Amp => "&",
            Op::Pipe => "|",
            Op::PipeAmp => "|&",
            Op::Semi => ";",
            Op::DSemi => ";;",
            Op::SemiAmp => ";&",
            Op::DSemiAmp => ";;&",
            Op::LParen => "(",
            Op::RParen => ")",
            Op::Less => "<",
            Op::Great => ">",
            Op::DGreat => ">>",
            Op::Clobber => ">|",
            Op::LessGreat => "<>",
            Op::LessAnd => "<&",
            Op::GreatAnd => ">&",
            Op::AndGreat => "&>",
            Op::AndDGreat => "&>>",
            Op::DLess => "<<",
            Op::DLessDash => "<<-",
            Op::TLess => "<<<",
        }
    }

    fn is_redirect(self) -> bool {
        matches!(
            self,
            Op::Less
                | Op::Great
                | Op::DGreat
                | Op::Clobber
                | Op::LessGreat
                | Op::LessAnd
                | Op::GreatAnd
                | Op::AndGreat
                | Op::AndDGreat
                | Op::DLess
                | Op::DLessDash
                | Op::TLess
        )
    }
}

/// Longest match first.
const OPS: &[(&str, Op)] = &[
    (";;&", Op::DSemiAmp),
    ("&>>", Op::AndDGreat),
    ("<<<", Op::TLess),
    ("<<-", Op::DLessDash),
    ("&&", Op::AndIf),
    ("||", Op::OrIf),
    ("|&", Op::PipeAmp),
    (";;", Op::DSemi),
    (";&", Op::SemiAmp),
    (">>", Op::DGreat),
    (">|", Op::Clobber),
    ("<>", Op::LessGreat),
    ("<&", Op::LessAnd),
    (">&", Op::GreatAnd),
    ("&>", Op::AndGreat),
    ("<<", Op::DLess),
    ("&", Op::Amp),
    ("|", Op::Pipe),
    (";", Op::Semi),
    ("(", Op::LParen),
    (")", Op::RParen),
    ("<", Op::Less),
    (">", Op::Great),
];

#[derive(Debug, Clone)]
enum TokKind {
    Word(Word),
    IoNumber(u32),
    Op(Op),
    Newline,
    Eof,
}

#[derive(Debug, Clone)]
struct Tok {
    kind: TokKind,
    /// Offset in the whole command string.
    at: usize,
}

struct Pending {
    index: usize,
    delimiter: String,
    quoted: bool,
    strip_tabs: bool,
}

/// How a run of quoted text is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Quoting {
    /// Inside `"..."`.
    Double,
    /// An unquoted here-document body: like double quotes, but `"` is
    /// plain text and `\"` keeps its backslash.
    Heredoc,
}

struct Parser<'a, 'r> {
    src: &'a str,
    b: &'a [u8],
    /// The whole command string (a sub-parser reads an unescaped copy of
    /// part of it): offsets are kept inside it, on character boundaries.
    root: &'r str,
    pos: usize,
    /// Added to local positions: the offset of `src` in the command string.
    base: usize,
    heredocs: Vec<Heredoc>,
    pending: Vec<Pending>,
    next_id: usize,
    depth: usize,
    peeked: Option<Tok>,
    /// `NAME (` `)` just read by parse_simple: the function's name and
    /// offset; its body comes next.
    function: Option<(String, usize)>,
}

/// bash's grammar of the words between `[[` and `]]` (parse.y's
/// cond_expr), checked when the script is read so that a conditional bash
/// would refuse to parse is refused too. An `Err` is the offset of the
/// word bash stops at (`usize::MAX`: the closing `]]`). Operators are the
/// unquoted words; `&&`, `||`, `(`, `)`, `<`, `>` can only be unquoted
/// here, since the lexer makes them operators.
struct CondGrammar<'w> {
    words: &'w [Word],
    pos: usize,
}

impl CondGrammar<'_> {
    fn is(&self, op: &str) -> bool {
        self.words.get(self.pos).is_some_and(|w| w.is_bare(op))
    }

    fn here(&self) -> usize {
        self.words.get(self.pos).map_or(usize::MAX, |w| w.offset)
    }

    fn or(&mut self) -> Result<(), usize> {
        self.and()?;
        if self.is("||") {
            self.pos += 1;
            self.or()?;
        }
        Ok(())
    }

    fn and(&mut self) -> Result<(), usize> {
        self.term()?;
        if self.is("&&") {
            self.pos += 1;
            self.and()?;
        }
        Ok(())
    }

    /// An operand: not the end and not an operator token.
    fn operand(&mut self) -> Result<(), usize> {
        if self.pos >= self.words.len()
            || ["&&", "||", "(", ")", "<", ">"].iter().any(|o| self.is(o))
        {
            return Err(self.here());
        }
        self.pos += 1;
        Ok(())
    }

    fn term(&mut self) -> Result<(), usize> {
        let Some(w) = self.words.get(self.pos) else {
            return Err(usize::MAX);
        };
        if w.is_bare("(") {
            self.pos += 1;
            self.or()?;
            if !self.is(")") {
                return Err(self.here());
            }
            self.pos += 1;
            return Ok(());
        }
        if w.is_bare("!") {
            self.pos += 1;
            return self.term();
        }
        if let [Part::Lit(t)] = w.parts.as_slice()
            && is_unary(t)
        {
            self.pos += 1;
            return self.operand();
        }
        self.operand()?;
        match self.words.get(self.pos) {
            None => Ok(()),
            Some(w) if ["&&", "||", ")"].iter().any(|o| w.is_bare(o)) => Ok(()),
            Some(w) if matches!(w.parts.as_slice(), [Part::Lit(t)] if is_binary(t) || t == "=~") => {
                self.pos += 1;
                self.operand()
            }
            Some(w) => Err(w.offset),
        }
    }
}

/// A unary operator of `test` and `[[ ]]` (`-f`, `-z`, ...).
pub(super) fn is_unary(op: &str) -> bool {
    op.len() == 2 && op.starts_with('-') && "abcdefghknoprstuvwxzGLNOSR".contains(&op[1..])
}

/// A binary operator of `test` and `[[ ]]`, `=~` aside.
pub(super) fn is_binary(op: &str) -> bool {
    matches!(
        op,
        "=" | "=="
            | "!="
            | "<"
            | ">"
            | "-eq"
            | "-ne"
            | "-lt"
            | "-le"
            | "-gt"
            | "-ge"
            | "-nt"
            | "-ot"
            | "-ef"
    )
}

fn err(rule: &'static str, offset: usize, reason: String, hint: &'static str) -> LexError {
    LexError {
        rule,
        offset,
        reason,
        hint,
    }
}

fn unsupported(offset: usize, what: &str, hint: &'static str) -> LexError {
    err(
        UNSUPPORTED,
        offset,
        format!("{what} is not supported"),
        hint,
    )
}

fn is_meta(c: u8) -> bool {
    matches!(
        c,
        b' ' | b'\t' | b'\n' | b';' | b'&' | b'|' | b'(' | b')' | b'<' | b'>'
    )
}

fn is_name_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_'
}

fn is_name_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

fn push_lit(parts: &mut Vec<Part>, s: &str) {
    if let Some(Part::Lit(t)) = parts.last_mut() {
        t.push_str(s);
    } else {
        parts.push(Part::Lit(s.to_string()));
    }
}

fn push_quoted(parts: &mut Vec<Part>, s: &str) {
    if let Some(Part::Quoted(t)) = parts.last_mut() {
        t.push_str(s);
    } else {
        parts.push(Part::Quoted(s.to_string()));
    }
}

impl<'a, 'r> Parser<'a, 'r> {
    fn new(src: &'a str, root: &'r str, base: usize, next_id: usize) -> Parser<'a, 'r> {
        Parser {
            src,
            b: src.as_bytes(),
            root,
            pos: 0,
            base,
            heredocs: Vec::new(),
            pending: Vec::new(),
            next_id,
            depth: 0,
            peeked: None,
            function: None,
        }
    }

    fn at(&self, local: usize) -> usize {
        let mut at = (self.base + local).min(self.root.len());
        while !self.root.is_char_boundary(at) {
            at -= 1;
        }
        at
    }

    fn byte(&self, i: usize) -> Option<u8> {
        self.b.get(i).copied()
    }

    /// The character at `pos` as text (whole UTF-8 sequence).
    fn char_str(&self, i: usize) -> &'a str {
        let len = self.src[i..].chars().next().map_or(1, char::len_utf8);
        &self.src[i..i + len]
    }

    fn enter(&mut self, at: usize) -> Result<(), LexError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(err(
                UNSUPPORTED,
                at,
                format!("nesting deeper than {MAX_DEPTH} levels"),
                "split the command into simpler steps",
            ));
        }
        Ok(())
    }

    fn leave(&mut self) {
        self.depth -= 1;
    }

    // ---- tokens ----

    fn peek(&mut self) -> Result<&Tok, LexError> {
        if self.peeked.is_none() {
            let t = self.lex_token()?;
            self.peeked = Some(t);
        }
        Ok(self.peeked.as_ref().expect("just set"))
    }

    fn next(&mut self) -> Result<Tok, LexError> {
        self.peek()?;
        Ok(self.peeked.take().expect("peeked"))
    }

    fn peek_op(&mut self) -> Result<Option<Op>, LexError> {
        Ok(match self.peek()?.kind {
            TokKind::Op(op) => Some(op),
            _ => None,
        })
    }

    /// Whether the next token is this unquoted word.
    fn peek_bare(&mut self, text: &str) -> Result<bool, LexError> {
        Ok(matches!(&self.peek()?.kind, TokKind::Word(w) if w.is_bare(text)))
    }

    fn unexpected(&mut self) -> LexError {
        let (at, what) = match self.peek() {
            Ok(t) => (
                t.at,
                match &t.kind {
                    TokKind::Word(w) => describe_word(w),
                    TokKind::IoNumber(n) => n.to_string(),
                    TokKind::Op(op) => op.text().to_string(),
                    TokKind::Newline => "newline".into(),
                    TokKind::Eof => {
                        return err(
                            SYNTAX,
                            t.at,
                            "syntax error: unexpected end of the command".into(),
                            "close every construct that is opened (`fi`, `done`, `esac`, `}`, `)`)",
                        );
                    }
                },
            ),
            Err(e) => return e,
        };
        err(
            SYNTAX,
            at,
            format!("syntax error near unexpected token `{what}`"),
            "fix the shell syntax; bash refuses this command too",
        )
    }

    fn skip_blanks(&mut self) {
        loop {
            match self.byte(self.pos) {
                Some(b' ' | b'\t') => self.pos += 1,
                Some(b'\\') if self.byte(self.pos + 1) == Some(b'\n') => self.pos += 2,
                _ => return,
            }
        }
    }

    fn lex_token(&mut self) -> Result<Tok, LexError> {
        self.skip_blanks();
        if self.byte(self.pos) == Some(b'#') {
            while let Some(c) = self.byte(self.pos) {
                if c == b'\n' {
                    break;
                }
                self.pos += 1;
            }
        }
        let start = self.pos;
        let at = self.at(start);
        let Some(c) = self.byte(start) else {
            return Ok(Tok {
                kind: TokKind::Eof,
                at,
            });
        };
        if c == b'\n' {
            self.pos += 1;
            self.read_heredoc_bodies()?;
            return Ok(Tok {
                kind: TokKind::Newline,
                at,
            });
        }
        // `<(` and `>(` start a word (a process substitution), as in
        // bash, not a redirection.
        let procsub = (c == b'<' || c == b'>') && self.byte(start + 1) == Some(b'(');
        let rest = &self.src[start..];
        for (text, op) in OPS.iter().filter(|_| !procsub) {
            if rest.starts_with(text) {
                self.pos += text.len();
                return Ok(Tok {
                    kind: TokKind::Op(*op),
                    at,
                });
            }
        }
        let word = self.read_word()?;
        // A word of digits right before `<` or `>` is the fd of a redirection.
        if let Some(b'<' | b'>') = self.byte(self.pos)
            && let [Part::Lit(t)] = word.parts.as_slice()
        {
            {
                if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
                    let n: u32 = t.parse().map_err(|_| {
                        unsupported(at, "a file descriptor this large", "use fds 0 to 9")
                    })?;
                    if n > 9 {
                        return Err(unsupported(
                            at,
                            "a redirection of a file descriptor above 9",
                            "use fds 0 to 9",
                        ));
                    }
                    return Ok(Tok {
                        kind: TokKind::IoNumber(n),
                        at,
                    });
                }
                if t.len() > 2
                    && t.starts_with('{')
                    && t.ends_with('}')
                    && lex::is_identifier(&t[1..t.len() - 1])
                {
                    return Err(unsupported(
                        at,
                        "`{NAME}` fd allocation in a redirection",
                        "redirect a fixed fd such as 3> instead",
                    ));
                }
            }
        }
        Ok(Tok {
            kind: TokKind::Word(word),
            at,
        })
    }

    // ---- words ----

    /// Reads one word at `pos` (which is not a metacharacter).
    fn read_word(&mut self) -> Result<Word, LexError> {
        let start = self.pos;
        let mut parts = Vec::new();
        while let Some(c) = self.byte(self.pos) {
            if matches!(c, b'<' | b'>') && self.byte(self.pos + 1) == Some(b'(') {
                // bash reads a process substitution anywhere in a word
                // (`a<(b)c` is one word).
                self.read_process_subst(&mut parts)?;
                continue;
            }
            if is_meta(c) {
                break;
            }
            self.read_unquoted_unit(&mut parts, None)?;
        }
        Ok(Word {
            offset: self.at(start),
            end: self.at(self.pos),
            parts,
        })
    }

    /// One unit of an unquoted word: a quoted run, an escape, an expansion
    /// or a plain character. `in_param` is the enclosing `${...}`'s
    /// operator, whose operand reads some quotes differently.
    fn read_unquoted_unit(
        &mut self,
        parts: &mut Vec<Part>,
        _in_param: Option<ParamOp>,
    ) -> Result<(), LexError> {
        let i = self.pos;
        let c = self.b[i];
        match c {
            b'\\' => match self.byte(i + 1) {
                Some(b'\n') => self.pos += 2,
                None => {
                    push_quoted(parts, "\\");
                    self.pos += 1;
                }
                Some(_) => {
                    let s = self.char_str(i + 1);
                    push_quoted(parts, s);
                    self.pos = i + 1 + s.len();
                }
            },
            b'\'' => {
                let Some(end) = self.src[i + 1..].find('\'') else {
                    return Err(err(
                        "lex.unterminated",
                        self.at(i),
                        "single quote is never closed".into(),
                        "close the quote with a matching '",
                    ));
                };
                let text = &self.src[i + 1..i + 1 + end];
                // `''` still makes the word quoted (an empty argument).
                if text.is_empty() {
                    parts.push(Part::Quoted(String::new()));
                } else {
                    push_quoted(parts, text);
                }
                self.pos = i + 2 + end;
            }
            b'"' => {
                self.pos += 1;
                let before = parts.len();
                self.read_quoted(parts, Quoting::Double, i)?;
                if parts.len() == before {
                    parts.push(Part::Quoted(String::new()));
                }
            }
            b'$' => self.read_dollar(parts, false)?,
            b'`' => self.read_backquote(parts, false)?,
            _ => {
                let s = self.char_str(i);
                push_lit(parts, s);
                self.pos += s.len();
            }
        }
        Ok(())
    }

    /// Reads double-quoted text (after the opening quote) or a here-document
    /// body, up to the closing quote or the end.
    fn read_quoted(
        &mut self,
        parts: &mut Vec<Part>,
        mode: Quoting,
        open: usize,
    ) -> Result<(), LexError> {
        loop {
            let i = self.pos;
            let Some(c) = self.byte(i) else {
                if mode == Quoting::Heredoc {
                    return Ok(());
                }
                return Err(err(
                    "lex.unterminated",
                    self.at(open),
                    "double quote is never closed".into(),
                    "close the quote with a matching \"",
                ));
            };
            match c {
                b'"' if mode == Quoting::Double => {
                    self.pos += 1;
                    return Ok(());
                }
                b'\\' => match self.byte(i + 1) {
                    Some(b'\n') => self.pos += 2,
                    Some(e @ (b'$' | b'`' | b'\\')) => {
                        push_quoted(
                            parts,
                            if e == b'$' {
                                "$"
                            } else if e == b'`' {
                                "`"
                            } else {
                                "\\"
                            },
                        );
                        self.pos += 2;
                    }
                    Some(b'"') if mode == Quoting::Double => {
                        push_quoted(parts, "\"");
                        self.pos += 2;
                    }
                    _ => {
                        push_quoted(parts, "\\");
                        self.pos += 1;
                    }
                },
                b'$' => self.read_dollar(parts, true)?,
                b'`' => self.read_backquote(parts, true)?,
                _ => {
                    let s = self.char_str(i);
                    push_quoted(parts, s);
                    self.pos += s.len();
                }
            }
        }
    }

    /// The list of a substitution opened at `at` (`$(`, `<(`, `>(`), up to
    /// and including its `)`; the messages say which one was not closed or
    /// holds the syntax error.
    fn list_to_paren(
        &mut self,
        at: usize,
        never_closed: &str,
        syntax: &str,
        syntax_hint: &'static str,
    ) -> Result<List, LexError> {
        self.enter(at)?;
        let body = self.parse_list()?;
        match self.next()?.kind {
            TokKind::Op(Op::RParen) => {}
            TokKind::Eof => {
                return Err(err(
                    "lex.unterminated",
                    at,
                    never_closed.into(),
                    "close it with a matching )",
                ));
            }
            _ => return Err(err(SYNTAX, at, syntax.into(), syntax_hint)),
        }
        self.leave();
        Ok(body)
    }

    /// `<(list)` or `>(list)` at `pos`: the list is parsed as a command
    /// substitution's is, up to its `)`.
    fn read_process_subst(&mut self, parts: &mut Vec<Part>) -> Result<(), LexError> {
        let i = self.pos;
        let at = self.at(i);
        let output = self.b[i] == b'>';
        self.pos = i + 2;
        let body = self.list_to_paren(
            at,
            "process substitution is never closed",
            "syntax error in process substitution",
            "fix the shell syntax inside the parentheses",
        )?;
        if body.is_empty() {
            // bash makes the word vanish: nothing a reader would want.
            return Err(unsupported(
                at,
                "an empty process substitution",
                "put the command whose output the program reads inside the parentheses",
            ));
        }
        parts.push(Part::Proc(Box::new(ProcSubst {
            offset: at,
            body,
            output,
        })));
        Ok(())
    }

    fn read_dollar(&mut self, parts: &mut Vec<Part>, quoted: bool) -> Result<(), LexError> {
        let i = self.pos;
        let at = self.at(i);
        if self.byte(i + 1) == Some(b'\\') && self.byte(i + 2) == Some(b'\n') {
            // bash joins the lines first: `$\<newline>[` is `$[`, and
            // `$\<newline>HOME` is `$HOME`.
            return Err(unsupported(
                at,
                "a line continuation right after `$`",
                "write the expansion on one line",
            ));
        }
        match self.byte(i + 1) {
            Some(b'(') if self.byte(i + 2) == Some(b'(') => {
                self.pos = i + 3;
                self.enter(at)?;
                let expr = self.read_arith_body(at)?;
                self.leave();
                parts.push(Part::Arith(Box::new(Arith {
                    offset: at,
                    expr,
                    quoted,
                })));
                Ok(())
            }
            Some(b'[') => Err(err(
                "syntax.arithmetic",
                at,
                "arithmetic expansion $[...] is not supported".into(),
                "write it as $((...))",
            )),
            Some(b'(') => {
                self.pos = i + 2;
                let body = self.list_to_paren(
                    at,
                    "command substitution $( is never closed",
                    "syntax error in command substitution $(...)",
                    "fix the shell syntax inside $(...)",
                )?;
                parts.push(Part::Subst(Box::new(Subst {
                    offset: at,
                    body,
                    quoted,
                })));
                Ok(())
            }
            Some(b'{') => {
                self.pos = i + 2;
                let p = self.read_braced_param(at, quoted)?;
                parts.push(Part::Param(Box::new(p)));
                Ok(())
            }
            Some(b'\'') if !quoted => {
                self.pos = i + 2;
                let s = self.read_ansi_c(at)?;
                parts.push(Part::Quoted(s));
                Ok(())
            }
            Some(b'"') if !quoted => {
                // $"..." is a translatable string: without a catalog, "...".
                self.pos = i + 1;
                Ok(())
            }
            Some(c) if is_name_start(c) => {
                let mut j = i + 1;
                while self.byte(j).is_some_and(is_name_char) {
                    j += 1;
                }
                parts.push(Part::Param(Box::new(Param {
                    offset: at,
                    name: self.src[i + 1..j].to_string(),
                    op: ParamOp::Plain,
                    index: None,
                    arg: None,
                    rep: None,
                    quoted,
                })));
                self.pos = j;
                Ok(())
            }
            Some(c @ (b'?' | b'$' | b'#' | b'0'..=b'9' | b'@' | b'*' | b'!')) => {
                parts.push(Part::Param(Box::new(Param {
                    offset: at,
                    name: (c as char).to_string(),
                    op: ParamOp::Plain,
                    index: None,
                    arg: None,
                    rep: None,
                    quoted,
                })));
                self.pos = i + 2;
                Ok(())
            }
            Some(c @ b'-') => Err(special_param(at, c)),
            _ => {
                if quoted {
                    push_quoted(parts, "$");
                } else {
                    push_lit(parts, "$");
                }
                self.pos = i + 1;
                Ok(())
            }
        }
    }

    /// The expression of `$((...))` or `((...))`, from just past the
    /// opening parentheses through the closing `))`: a word whose parts
    /// are all quoted (expansions inside are as in double quotes).
    fn read_arith_body(&mut self, at: usize) -> Result<Word, LexError> {
        Ok(self.read_arith_parts(at, false)?.pop().unwrap_or_default())
    }

    /// The expression(s) of `((...))`: with `semis`, the expressions
    /// separated by `;` at the top level (`for ((a; b; c))`).
    fn read_arith_parts(&mut self, at: usize, semis: bool) -> Result<Vec<Word>, LexError> {
        let mut done = Vec::new();
        let mut parts = Vec::new();
        let mut depth = 0usize;
        while self
            .byte(self.pos)
            .is_some_and(|c| matches!(c, b' ' | b'\t'))
        {
            self.pos += 1;
        }
        let mut start = self.pos;
        let mut end = start;
        loop {
            let i = self.pos;
            let Some(c) = self.byte(i) else {
                return Err(err(
                    "lex.unterminated",
                    at,
                    "arithmetic expression ((... is never closed".into(),
                    "close it with a matching ))",
                ));
            };
            match c {
                b'(' => {
                    depth += 1;
                    push_quoted(&mut parts, "(");
                    self.pos += 1;
                }
                b')' if depth == 0 => {
                    if self.byte(i + 1) != Some(b')') {
                        return Err(err(
                            SYNTAX,
                            self.at(i),
                            "a single `)` ends the arithmetic expression ((...))".into(),
                            "balance the parentheses and end the expression with ))",
                        ));
                    }
                    self.pos = i + 2;
                    break;
                }
                b')' => {
                    depth -= 1;
                    push_quoted(&mut parts, ")");
                    self.pos += 1;
                }
                b';' if semis && depth == 0 => {
                    done.push(Word {
                        offset: self.at(start),
                        end: self.at(end),
                        parts: std::mem::take(&mut parts),
                    });
                    self.pos += 1;
                    while self
                        .byte(self.pos)
                        .is_some_and(|c| matches!(c, b' ' | b'\t'))
                    {
                        self.pos += 1;
                    }
                    start = self.pos;
                    end = start;
                    continue;
                }
                b'"' => {
                    self.pos += 1;
                    self.read_quoted(&mut parts, Quoting::Double, i)?;
                }
                // bash reads a single-quoted string as one piece here too
                // (its `))` does not close the expression); the quotes stay
                // in the text, which the evaluator then refuses as bash's
                // does.
                b'\'' => {
                    let Some(len) = self.src[i + 1..].find('\'') else {
                        return Err(err(
                            "lex.unterminated",
                            self.at(i),
                            "a single quote in the arithmetic expression is never closed".into(),
                            "remove the quote: arithmetic takes numbers and variable names",
                        ));
                    };
                    push_quoted(&mut parts, &self.src[i..i + len + 2]);
                    self.pos = i + len + 2;
                }
                b'\\' if self.byte(i + 1) == Some(b'\n') => self.pos += 2,
                // A backslash and the character after it are one piece, as
                // bash reads them: an escaped `)` does not close the
                // expression (the evaluator then refuses the backslash).
                b'\\' if self.byte(i + 1).is_some() => {
                    let next = self.char_str(i + 1).len();
                    push_quoted(&mut parts, &self.src[i..i + 1 + next]);
                    self.pos = i + 1 + next;
                }
                b'$' => self.read_dollar(&mut parts, true)?,
                b'`' => self.read_backquote(&mut parts, true)?,
                _ => {
                    let s = self.char_str(i);
                    push_quoted(&mut parts, s);
                    self.pos += s.len();
                }
            }
            if !matches!(c, b' ' | b'\t' | b'\n') {
                end = self.pos;
            }
        }
        done.push(Word {
            offset: self.at(start),
            end: self.at(end),
            parts,
        });
        Ok(done)
    }

    /// The operand of `=~` inside `[[ ]]`: parentheses and `|` are part of
    /// the word; blanks end it outside parentheses.
    fn read_regex_word(&mut self) -> Result<Word, LexError> {
        self.skip_blanks();
        let start = self.pos;
        let mut parts = Vec::new();
        let mut depth = 0usize;
        while let Some(c) = self.byte(self.pos) {
            match c {
                b' ' | b'\t' | b'\n' if depth == 0 => break,
                b'&' | b';' | b'<' | b'>' if depth == 0 => break,
                b'(' => {
                    depth += 1;
                    push_lit(&mut parts, "(");
                    self.pos += 1;
                }
                b')' if depth == 0 => break,
                b')' => {
                    depth -= 1;
                    push_lit(&mut parts, ")");
                    self.pos += 1;
                }
                b' ' | b'\t' | b'\n' | b'&' | b';' | b'<' | b'>' | b'|' => {
                    push_lit(&mut parts, self.char_str(self.pos));
                    self.pos += 1;
                }
                _ => self.read_unquoted_unit(&mut parts, None)?,
            }
        }
        if parts.is_empty() || depth > 0 {
            return Err(self.unexpected());
        }
        Ok(Word {
            offset: self.at(start),
            end: self.at(self.pos),
            parts,
        })
    }

    /// `[[ expression ]]`, after the peeked `[[`: a simple command whose
    /// words are `[[`, the operands and operators (`&&`, `||`, `(`, `)`,
    /// `<`, `>` as bare words) and `]]`. The interpreter evaluates it from
    /// the words as written: no splitting, no pathname expansion.
    fn parse_cond(&mut self, at: usize) -> Result<SimpleCommand, LexError> {
        let TokKind::Word(first) = self.next()?.kind else {
            return Err(self.unexpected());
        };
        let mut words = vec![first];
        loop {
            if words.last().is_some_and(|w| w.is_bare("=~")) && self.peeked.is_none() {
                let w = self.read_regex_word()?;
                words.push(w);
                continue;
            }
            let tok = self.peek()?.clone();
            match tok.kind {
                TokKind::Word(w) => {
                    self.next()?;
                    let done = w.is_bare("]]");
                    words.push(w);
                    if done {
                        break;
                    }
                }
                TokKind::Op(
                    op @ (Op::AndIf | Op::OrIf | Op::LParen | Op::RParen | Op::Less | Op::Great),
                ) => {
                    self.next()?;
                    words.push(Word {
                        offset: tok.at,
                        end: tok.at + op.text().len(),
                        parts: vec![Part::Lit(op.text().into())],
                    });
                }
                _ => return Err(self.unexpected()),
            }
        }
        let inner = &words[1..words.len() - 1];
        let mut g = CondGrammar {
            words: inner,
            pos: 0,
        };
        let end = words[words.len() - 1].offset;
        g.or()
            .and_then(|()| match g.words.get(g.pos) {
                None => Ok(()),
                Some(w) => Err(w.offset),
            })
            .map_err(|o| {
                let near = inner
                    .iter()
                    .find(|w| w.offset == o)
                    .map_or_else(|| "]]".to_string(), describe_word);
                err(
                    SYNTAX,
                    o.min(end),
                    format!("syntax error in conditional expression near `{near}'"),
                    "write [[ OPERAND ]], [[ -OP OPERAND ]] or [[ LEFT OP RIGHT ]], joined by && and || and grouped by ( )",
                )
            })?;
        let redirects = self.parse_redirects()?;
        let id = self.next_id;
        self.next_id += 1;
        Ok(SimpleCommand {
            id,
            offset: at,
            assignments: Vec::new(),
            words,
            redirects,
        })
    }

    /// `${...}` after the opening brace.
    fn read_braced_param(&mut self, at: usize, quoted: bool) -> Result<Param, LexError> {
        let i = self.pos;
        let mut op = ParamOp::Plain;
        let mut j = i;
        if self.byte(j) == Some(b'!') && self.byte(j + 1).is_some_and(is_name_start) {
            return self.read_bang_param(at, quoted);
        }
        if self.byte(j) == Some(b'#') && self.byte(j + 1).is_some_and(|c| c != b'}') {
            op = ParamOp::Length;
            j += 1;
        }
        let name_start = j;
        match self.byte(j) {
            Some(c) if is_name_start(c) => {
                while self.byte(j).is_some_and(is_name_char) {
                    j += 1;
                }
            }
            Some(b'?' | b'$' | b'#' | b'@' | b'*') => j += 1,
            // `${!}` is `$!`; `${!name}` is indirection.
            Some(b'!') if self.byte(j + 1) == Some(b'}') => j += 1,
            // `${10}`: every digit belongs to the number, unlike `$10`.
            Some(b'0'..=b'9') => {
                while self.byte(j).is_some_and(|c| c.is_ascii_digit()) {
                    j += 1;
                }
            }
            Some(c @ (b'!' | b'-')) => {
                return Err(special_param(at, c));
            }
            None => {
                return Err(err(
                    "lex.unterminated",
                    at,
                    "${ is never closed".into(),
                    "close it with a matching }",
                ));
            }
            _ => {
                return Err(err(
                    SYNTAX,
                    at,
                    "bad substitution: ${...} needs a variable name".into(),
                    "write ${NAME} with a variable name",
                ));
            }
        }
        let name = self.src[name_start..j].to_string();
        let mut index = None;
        if self.byte(j) == Some(b'[') && self.byte(name_start).is_some_and(is_name_start) {
            self.pos = j + 1;
            index = Some(self.read_subscript(at)?);
            j = self.pos;
        }
        if self.byte(j) == Some(b'}') {
            self.pos = j + 1;
            return Ok(Param {
                offset: at,
                name,
                op,
                index,
                arg: None,
                rep: None,
                quoted,
            });
        }
        if op == ParamOp::Length {
            return Err(err(
                SYNTAX,
                at,
                "bad substitution: ${#NAME} takes nothing after the name".into(),
                "write ${#NAME}",
            ));
        }
        if self.byte(j).is_none() {
            return Err(err(
                "lex.unterminated",
                at,
                "${ is never closed".into(),
                "close it with a matching }",
            ));
        }
        let colon = self.byte(j) == Some(b':');
        let k = if colon { j + 1 } else { j };
        if colon && !matches!(self.byte(k), Some(b'-' | b'=' | b'+' | b'?')) {
            // `${x:offset}`, `${x:offset:length}`.
            self.pos = k;
            let (arg, stop) = self.read_operand(at, ParamOp::Substring, quoted, b":")?;
            let rep = match stop {
                Some(_) => Some(self.read_operand(at, ParamOp::Substring, quoted, b"")?.0),
                None => None,
            };
            return Ok(Param {
                offset: at,
                name,
                op: ParamOp::Substring,
                index,
                arg: Some(arg),
                rep,
                quoted,
            });
        }
        if !colon && self.byte(j) == Some(b'/') {
            let (mode, len) = match self.byte(j + 1) {
                Some(b'/') => (ReplaceMode::All, 2),
                Some(b'#') => (ReplaceMode::Prefix, 2),
                Some(b'%') => (ReplaceMode::Suffix, 2),
                _ => (ReplaceMode::First, 1),
            };
            let op = ParamOp::Replace { mode };
            self.pos = j + len;
            let (arg, stop) = self.read_operand(at, op, quoted, b"/")?;
            let rep = match stop {
                Some(_) => Some(self.read_replacement(at, quoted)?),
                None => None,
            };
            return Ok(Param {
                offset: at,
                name,
                op,
                index,
                arg: Some(arg),
                rep,
                quoted,
            });
        }
        if !colon && matches!(self.byte(j), Some(b'^' | b',')) {
            let upper = self.byte(j) == Some(b'^');
            let all = self.byte(j + 1) == self.byte(j);
            let op = ParamOp::Case { upper, all };
            self.pos = j + 1 + usize::from(all);
            let arg = self.read_operand(at, op, quoted, b"")?.0;
            return Ok(Param {
                offset: at,
                name,
                op,
                index,
                arg: (!arg.parts.is_empty()).then_some(arg),
                rep: None,
                quoted,
            });
        }
        let (op, len) = match (self.byte(k), self.byte(k + 1)) {
            (Some(b'-'), _) => (ParamOp::Default { colon }, 1),
            (Some(b'='), _) => (ParamOp::Assign { colon }, 1),
            (Some(b'+'), _) => (ParamOp::Alternative { colon }, 1),
            (Some(b'?'), _) => (ParamOp::Error { colon }, 1),
            (Some(b'#'), Some(b'#')) if !colon => (ParamOp::TrimPrefix { longest: true }, 2),
            (Some(b'#'), _) if !colon => (ParamOp::TrimPrefix { longest: false }, 1),
            (Some(b'%'), Some(b'%')) if !colon => (ParamOp::TrimSuffix { longest: true }, 2),
            (Some(b'%'), _) if !colon => (ParamOp::TrimSuffix { longest: false }, 1),
            (Some(b'@'), _) if !colon => {
                return Err(unsupported(
                    at,
                    "`${NAME@...}` (parameter transformation)",
                    "use printf '%q' to quote a value, or the value itself",
                ));
            }
            _ => {
                return Err(unsupported(
                    at,
                    "this form of ${...}",
                    "use $NAME, ${NAME}, ${NAME:-word}, ${NAME:=word}, ${NAME:+word}, ${NAME:?word}, ${#NAME}, ${NAME#pattern}, ${NAME%pattern}, ${NAME/pattern/string}, ${NAME:offset:length} or ${NAME^^}",
                ));
            }
        };
        self.pos = k + len;
        let arg = self.read_param_operand(at, op, quoted)?;
        Ok(Param {
            offset: at,
            name,
            op,
            index,
            arg: Some(arg),
            rep: None,
            quoted,
        })
    }

    /// `${!NAME}` (indirection) and `${!NAME[@]}` / `${!NAME[*]}` (the
    /// indices of an array), after `${`.
    fn read_bang_param(&mut self, at: usize, quoted: bool) -> Result<Param, LexError> {
        let start = self.pos + 1;
        let mut j = start;
        while self.byte(j).is_some_and(is_name_char) {
            j += 1;
        }
        let name = self.src[start..j].to_string();
        let rest = &self.src[j..];
        let (op, index, len) = if rest.starts_with("[@]}") {
            (ParamOp::Keys, Some(Subscript::All), 4)
        } else if rest.starts_with("[*]}") {
            (ParamOp::Keys, Some(Subscript::Star), 4)
        } else if rest.starts_with('}') {
            (ParamOp::Indirect, None, 1)
        } else if self.byte(j).is_none() {
            return Err(err(
                "lex.unterminated",
                at,
                "${ is never closed".into(),
                "close it with a matching }",
            ));
        } else {
            return Err(unsupported(
                at,
                "this form of `${!...}`",
                "use ${!NAME} (the variable NAME names) or ${!NAME[@]} (an array's indices)",
            ));
        };
        self.pos = j + len;
        Ok(Param {
            offset: at,
            name,
            op,
            index,
            arg: None,
            rep: None,
            quoted,
        })
    }

    /// The subscript of `NAME[...]`, after the `[`, through the matching
    /// `]`: `@`, `*`, or an expression (its text after expansion and
    /// quote removal: an index, evaluated as arithmetic, or a key).
    fn read_subscript(&mut self, at: usize) -> Result<Subscript, LexError> {
        let i = self.pos;
        if self.byte(i + 1) == Some(b']') {
            match self.byte(i) {
                Some(b'@') => {
                    self.pos = i + 2;
                    return Ok(Subscript::All);
                }
                Some(b'*') => {
                    self.pos = i + 2;
                    return Ok(Subscript::Star);
                }
                _ => {}
            }
        }
        let start = i;
        let mut parts = Vec::new();
        let mut depth = 0usize;
        loop {
            let i = self.pos;
            let Some(c) = self.byte(i) else {
                return Err(err(
                    "lex.unterminated",
                    at,
                    "an array subscript `[` is never closed".into(),
                    "close it with a matching ]",
                ));
            };
            match c {
                b'[' => {
                    depth += 1;
                    push_quoted(&mut parts, "[");
                    self.pos += 1;
                }
                b']' if depth == 0 => {
                    self.pos += 1;
                    break;
                }
                b']' => {
                    depth -= 1;
                    push_quoted(&mut parts, "]");
                    self.pos += 1;
                }
                b'"' => {
                    self.pos += 1;
                    let before = parts.len();
                    self.read_quoted(&mut parts, Quoting::Double, i)?;
                    if parts.len() == before {
                        parts.push(Part::Quoted(String::new()));
                    }
                }
                b'\\' if self.byte(i + 1) == Some(b'\n') => self.pos += 2,
                b'\\' if self.byte(i + 1).is_some() => {
                    let s = self.char_str(i + 1);
                    push_quoted(&mut parts, s);
                    self.pos = i + 1 + s.len();
                }
                b'\'' => {
                    let Some(len) = self.src[i + 1..].find('\'') else {
                        return Err(err(
                            "lex.unterminated",
                            self.at(i),
                            "single quote is never closed".into(),
                            "close the quote with a matching '",
                        ));
                    };
                    let text = &self.src[i + 1..i + 1 + len];
                    push_quoted(&mut parts, text);
                    self.pos = i + len + 2;
                }
                b'$' => self.read_dollar(&mut parts, true)?,
                b'`' => self.read_backquote(&mut parts, true)?,
                _ => {
                    let s = self.char_str(i);
                    push_quoted(&mut parts, s);
                    self.pos += s.len();
                }
            }
        }
        if parts.is_empty() {
            return Err(err(
                SYNTAX,
                at,
                "bad substitution: an empty array subscript".into(),
                "write NAME[INDEX], NAME[@] or NAME[*]",
            ));
        }
        Ok(Subscript::Expr(Word {
            offset: self.at(start),
            end: self.at(self.pos - 1),
            parts,
        }))
    }

    /// An operand of `${NAME:offset:length}` or `${NAME/pattern/...}`, up
    /// to one of `stops` (consumed: returned) or the closing `}`.
    fn read_operand(
        &mut self,
        at: usize,
        op: ParamOp,
        quoted: bool,
        stops: &[u8],
    ) -> Result<(Word, Option<u8>), LexError> {
        self.operand_until(at, op, quoted, stops, false)
    }

    /// The replacement of `${NAME/pattern/string}`: an unquoted `&` in
    /// it stands for the matched text (bash's `patsub_replacement`), kept
    /// as an unquoted part; `\&` is a quoted one.
    fn read_replacement(&mut self, at: usize, quoted: bool) -> Result<Word, LexError> {
        let op = ParamOp::Replace {
            mode: ReplaceMode::First,
        };
        Ok(self.operand_until(at, op, quoted, b"", true)?.0)
    }

    /// The operand of `${NAME op word}`, up to the matching `}`.
    fn read_param_operand(
        &mut self,
        at: usize,
        op: ParamOp,
        quoted: bool,
    ) -> Result<Word, LexError> {
        Ok(self.operand_until(at, op, quoted, b"", false)?.0)
    }

    /// An operand up to the closing `}` or an unquoted byte of `stops`
    /// (consumed and returned). In the replacement of `${x/p/r}` an
    /// unescaped `&` is kept as an unquoted part.
    fn operand_until(
        &mut self,
        at: usize,
        op: ParamOp,
        quoted: bool,
        stops: &[u8],
        replacement: bool,
    ) -> Result<(Word, Option<u8>), LexError> {
        let start = self.pos;
        let mut parts = Vec::new();
        let mut stopped = None;
        let trim = matches!(
            op,
            ParamOp::TrimPrefix { .. }
                | ParamOp::TrimSuffix { .. }
                | ParamOp::Replace { .. }
                | ParamOp::Case { .. }
        ) && !replacement;
        loop {
            let i = self.pos;
            let Some(c) = self.byte(i) else {
                return Err(err(
                    "lex.unterminated",
                    at,
                    "${ is never closed".into(),
                    "close it with a matching }",
                ));
            };
            if quoted && c == b'$' && matches!(self.byte(i + 1), Some(b'\'' | b'"')) {
                // bash reads `$'...'` (with its backslash escapes) and
                // `$"..."` here even inside double quotes.
                return Err(unsupported(
                    self.at(i),
                    "`$'` or `$\"` inside a double-quoted ${...}",
                    "assign the value to a variable first",
                ));
            }
            if matches!(c, b'<' | b'>') && self.byte(i + 1) == Some(b'(') {
                // bash reads a process substitution here too, so a `}`
                // inside its parentheses does not close the expansion;
                // agent-rsh runs one only as a word of its own.
                return Err(process_substitution_in_operand(self.at(i)));
            }
            match c {
                // The first `}` closes: bash does not pair plain braces
                // here (`${x:-{a}}` is `{a` then `}`).
                b'}' => {
                    self.pos += 1;
                    break;
                }
                _ if stops.contains(&c) => {
                    self.pos += 1;
                    stopped = Some(c);
                    break;
                }
                b'&' if replacement => {
                    push_lit(&mut parts, "&");
                    self.pos += 1;
                }
                b'\\' if replacement && self.byte(i + 1) == Some(b'&') => {
                    push_quoted(&mut parts, "&");
                    self.pos += 2;
                }
                b'\\' if stops.contains(&b'/') && self.byte(i + 1) == Some(b'/') => {
                    push_quoted(&mut parts, "/");
                    self.pos += 2;
                }
                b'\'' if quoted && !trim => {
                    // bash's parser still pairs single quotes here (to find
                    // the closing brace), though the expansion keeps them.
                    let Some(end) = self.src[i + 1..].find('\'') else {
                        return Err(err(
                            "lex.unterminated",
                            self.at(i),
                            "single quote is never closed".into(),
                            "close the quote with a matching '",
                        ));
                    };
                    push_quoted(&mut parts, &self.src[i..i + 2 + end]);
                    self.pos = i + 2 + end;
                }
                b'"' if quoted => {
                    return Err(unsupported(
                        self.at(i),
                        "a double quote inside a double-quoted ${...}",
                        "assign the value to a variable first",
                    ));
                }
                _ if quoted => {
                    // Double-quoted operand: the double-quote rules apply.
                    match c {
                        b'\\' => match self.byte(i + 1) {
                            Some(b'\n') => self.pos += 2,
                            Some(e @ (b'$' | b'`' | b'\\' | b'"' | b'}')) => {
                                push_quoted(&mut parts, &(e as char).to_string());
                                self.pos += 2;
                            }
                            // bash's parser skips the escaped quote when it
                            // pairs quotes here: it opens nothing. In a
                            // pattern it is a literal quote; elsewhere the
                            // expansion keeps the backslash (`\'`).
                            Some(b'\'') => {
                                push_quoted(&mut parts, if trim { "'" } else { "\\'" });
                                self.pos += 2;
                            }
                            _ => {
                                push_quoted(&mut parts, "\\");
                                self.pos += 1;
                            }
                        },
                        b'$' => self.read_dollar(&mut parts, true)?,
                        b'`' => self.read_backquote(&mut parts, true)?,
                        b'\'' => {
                            // Trim operand in double quotes: '...' quotes.
                            let Some(end) = self.src[i + 1..].find('\'') else {
                                return Err(err(
                                    "lex.unterminated",
                                    self.at(i),
                                    "single quote is never closed".into(),
                                    "close the quote with a matching '",
                                ));
                            };
                            let text = &self.src[i + 1..i + 1 + end];
                            parts.push(Part::Quoted(text.to_string()));
                            self.pos = i + 2 + end;
                        }
                        _ => {
                            let s = self.char_str(i);
                            if trim {
                                // A pattern: glob characters stay active.
                                push_lit(&mut parts, s);
                            } else {
                                push_quoted(&mut parts, s);
                            }
                            self.pos += s.len();
                        }
                    }
                }
                _ => self.read_unquoted_unit(&mut parts, Some(op))?,
            }
        }
        Ok((
            Word {
                offset: self.at(start),
                end: self.at(self.pos - 1),
                parts,
            },
            stopped,
        ))
    }

    /// `$'...'` after the opening quote.
    fn read_ansi_c(&mut self, at: usize) -> Result<String, LexError> {
        let mut out = String::new();
        loop {
            let i = self.pos;
            let Some(c) = self.byte(i) else {
                return Err(err(
                    "lex.unterminated",
                    at,
                    "$' quote is never closed".into(),
                    "close the quote with a matching '",
                ));
            };
            match c {
                b'\'' => {
                    self.pos += 1;
                    return Ok(out);
                }
                b'\\' => {
                    let Some(e) = self.byte(i + 1) else {
                        return Err(err(
                            "lex.unterminated",
                            at,
                            "$' quote is never closed".into(),
                            "close the quote with a matching '",
                        ));
                    };
                    self.pos = i + 2;
                    let simple = match e {
                        b'n' => Some('\n'),
                        b't' => Some('\t'),
                        b'r' => Some('\r'),
                        b'a' => Some('\u{7}'),
                        b'b' => Some('\u{8}'),
                        b'e' | b'E' => Some('\u{1b}'),
                        b'f' => Some('\u{c}'),
                        b'v' => Some('\u{b}'),
                        b'\\' => Some('\\'),
                        b'\'' => Some('\''),
                        b'"' => Some('"'),
                        b'?' => Some('?'),
                        _ => None,
                    };
                    if let Some(ch) = simple {
                        out.push(ch);
                        continue;
                    }
                    match e {
                        b'0'..=b'7' => {
                            let mut v = u32::from(e - b'0');
                            let mut n = 1;
                            while n < 3
                                && let Some(d @ b'0'..=b'7') = self.byte(self.pos)
                            {
                                v = v * 8 + u32::from(d - b'0');
                                self.pos += 1;
                                n += 1;
                            }
                            self.push_byte_char(&mut out, v & 0xff, at)?;
                        }
                        b'x' => {
                            let mut v = 0u32;
                            let mut n = 0;
                            while n < 2
                                && let Some(d) = self.byte(self.pos).filter(u8::is_ascii_hexdigit)
                            {
                                v = v * 16 + (d as char).to_digit(16).unwrap_or(0);
                                self.pos += 1;
                                n += 1;
                            }
                            if n == 0 {
                                out.push_str("\\x");
                            } else {
                                self.push_byte_char(&mut out, v, at)?;
                            }
                        }
                        _ => {
                            return Err(unsupported(
                                self.at(i),
                                "this escape in $'...'",
                                "use \\n, \\t, \\\\, \\', octal \\NNN or hex \\xHH",
                            ));
                        }
                    }
                }
                _ => {
                    let s = self.char_str(i);
                    out.push_str(s);
                    self.pos += s.len();
                }
            }
        }
    }

    fn push_byte_char(&self, out: &mut String, v: u32, at: usize) -> Result<(), LexError> {
        if v == 0 {
            // bash ends the string at a NUL; an argument cannot hold one.
            return Err(unsupported(
                at,
                "a NUL byte in $'...'",
                "arguments cannot contain NUL bytes",
            ));
        }
        if v >= 0x80 {
            return Err(unsupported(
                at,
                "a non-ASCII byte escape in $'...'",
                "write the character itself (UTF-8)",
            ));
        }
        out.push(char::from(v as u8));
        Ok(())
    }

    /// Backquotes: the text up to the closing backquote, with `\$`, `` \` ``
    /// and `\\` (and `\"` inside double quotes) unescaped, parsed as a
    /// script of its own.
    fn read_backquote(&mut self, parts: &mut Vec<Part>, quoted: bool) -> Result<(), LexError> {
        let open = self.pos;
        let at = self.at(open);
        let mut inner = String::new();
        let mut i = open + 1;
        loop {
            let Some(c) = self.byte(i) else {
                return Err(err(
                    "lex.unterminated",
                    at,
                    "backquote is never closed".into(),
                    "close it with a matching `, or use $(...)",
                ));
            };
            match c {
                b'`' => break,
                b'\\' => match self.byte(i + 1) {
                    Some(e @ (b'$' | b'`' | b'\\')) => {
                        inner.push(e as char);
                        i += 2;
                    }
                    Some(b'"') if quoted => {
                        inner.push('"');
                        i += 2;
                    }
                    _ => {
                        inner.push('\\');
                        i += 1;
                    }
                },
                _ => {
                    let s = self.char_str(i);
                    inner.push_str(s);
                    i += s.len();
                }
            }
        }
        self.pos = i + 1;
        self.enter(at)?;
        let mut sub = Parser::new(&inner, self.root, at + 1, self.next_id);
        sub.depth = self.depth;
        let body = sub.parse_list()?;
        if !matches!(sub.peek()?.kind, TokKind::Eof) {
            return Err(sub.unexpected());
        }
        sub.finish_heredocs_at_eof()?;
        if !sub.heredocs.is_empty() {
            return Err(unsupported(
                at,
                "a here-document inside backquotes",
                "use $(...) instead of backquotes",
            ));
        }
        self.next_id = sub.next_id;
        self.leave();
        parts.push(Part::Subst(Box::new(Subst {
            offset: at,
            body,
            quoted,
        })));
        Ok(())
    }

    // ---- here-documents ----

    fn read_heredoc_bodies(&mut self) -> Result<(), LexError> {
        let pending = std::mem::take(&mut self.pending);
        for p in pending {
            let body_start = self.pos;
            let mut body = String::new();
            let mut found = false;
            while self.pos < self.b.len() {
                let line_end = self.src[self.pos..]
                    .find('\n')
                    .map_or(self.b.len(), |n| self.pos + n);
                let mut line = &self.src[self.pos..line_end];
                if p.strip_tabs {
                    line = line.trim_start_matches('\t');
                }
                self.pos = (line_end + 1).min(self.b.len());
                if line == p.delimiter {
                    found = true;
                    break;
                }
                body.push_str(line);
                body.push('\n');
            }
            let _ = found;
            let at = self.at(body_start);
            let word = if p.quoted {
                Word {
                    offset: at,
                    end: self.at(self.pos),
                    parts: vec![Part::Quoted(body)],
                }
            } else {
                let mut sub = Parser::new(&body, self.root, at, self.next_id);
                sub.depth = self.depth;
                let mut parts = Vec::new();
                sub.read_quoted(&mut parts, Quoting::Heredoc, 0)?;
                if !sub.heredocs.is_empty() {
                    return Err(unsupported(
                        at,
                        "a here-document inside a here-document",
                        "write the inner text to a file first",
                    ));
                }
                self.next_id = sub.next_id;
                if parts.is_empty() {
                    parts.push(Part::Quoted(String::new()));
                }
                Word {
                    offset: at,
                    end: self.at(self.pos),
                    parts,
                }
            };
            if let Some(h) = self.heredocs.get_mut(p.index) {
                h.body = word;
            }
        }
        Ok(())
    }

    /// At the end of the command string, here-documents still waiting for
    /// a body get the empty one (bash warns and does the same).
    fn finish_heredocs_at_eof(&mut self) -> Result<(), LexError> {
        if !self.pending.is_empty() {
            self.read_heredoc_bodies()?;
        }
        Ok(())
    }

    // ---- grammar ----

    fn skip_newlines(&mut self) -> Result<(), LexError> {
        while matches!(self.peek()?.kind, TokKind::Newline) {
            self.next()?;
        }
        Ok(())
    }

    fn at_list_end(&mut self) -> Result<bool, LexError> {
        Ok(match &self.peek()?.kind {
            TokKind::Eof => true,
            TokKind::Op(Op::RParen | Op::DSemi | Op::SemiAmp | Op::DSemiAmp) => true,
            TokKind::Word(w) => TERMINATORS.iter().any(|t| w.is_bare(t)),
            _ => false,
        })
    }

    fn parse_list(&mut self) -> Result<List, LexError> {
        let mut list = Vec::new();
        loop {
            self.skip_newlines()?;
            if self.at_list_end()? {
                break;
            }
            list.push(self.parse_and_or()?);
            match &self.peek()?.kind {
                TokKind::Op(Op::Semi) | TokKind::Newline => {
                    self.next()?;
                }
                TokKind::Op(Op::Amp) => {
                    self.next()?;
                    if let Some(last) = list.last_mut() {
                        last.background = true;
                    }
                }
                _ => break,
            }
        }
        Ok(list)
    }

    /// A list that must not be empty, then the keyword that ends it.
    fn parse_body(&mut self, end: &[&str]) -> Result<List, LexError> {
        let list = self.parse_list()?;
        let ok = match &self.peek()?.kind {
            TokKind::Word(w) => end.iter().any(|e| w.is_bare(e)),
            _ => false,
        };
        if list.is_empty() || !ok {
            return Err(self.unexpected());
        }
        Ok(list)
    }

    fn parse_and_or(&mut self) -> Result<AndOr, LexError> {
        let first = self.parse_pipeline()?;
        let mut rest = Vec::new();
        loop {
            let c = match self.peek_op()? {
                Some(Op::AndIf) => Connector::And,
                Some(Op::OrIf) => Connector::Or,
                _ => break,
            };
            self.next()?;
            self.skip_newlines()?;
            rest.push((c, self.parse_pipeline()?));
        }
        Ok(AndOr {
            first,
            rest,
            background: false,
        })
    }

    fn parse_pipeline(&mut self) -> Result<Pipeline, LexError> {
        let offset = self.peek()?.at;
        let mut negated = false;
        let mut timed = None;
        loop {
            if self.peek_bare("!")? {
                self.next()?;
                negated = !negated;
            } else if timed.is_none() && self.peek_bare("time")? {
                let at = self.next()?.at;
                timed = Some(false);
                if self.peek_bare("-p")? {
                    self.next()?;
                    timed = Some(true);
                }
                if self.peek_bare("--")? {
                    self.next()?;
                }
                let ends = match &self.peek()?.kind {
                    TokKind::Eof | TokKind::Newline => true,
                    TokKind::Op(op) => !op.is_redirect() && *op != Op::LParen,
                    TokKind::Word(w) => TERMINATORS.iter().any(|t| w.is_bare(t)),
                    TokKind::IoNumber(_) => false,
                };
                if ends {
                    return Err(unsupported(
                        at,
                        "`time` without a command",
                        "write `time COMMAND`",
                    ));
                }
            } else {
                break;
            }
        }
        let mut stages = Vec::new();
        loop {
            let command = self.parse_command()?;
            let stderr_too = match self.peek_op()? {
                Some(Op::Pipe) => false,
                Some(Op::PipeAmp) => true,
                _ => {
                    stages.push(Stage {
                        command,
                        stderr_too: false,
                    });
                    break;
                }
            };
            self.next()?;
            self.skip_newlines()?;
            stages.push(Stage {
                command,
                stderr_too,
            });
        }
        Ok(Pipeline {
            offset,
            negated,
            timed,
            stages,
        })
    }

    fn parse_command(&mut self) -> Result<Command, LexError> {
        let tok = self.peek()?.clone();
        let at = tok.at;
        self.enter(at)?;
        let cmd = match &tok.kind {
            TokKind::Op(Op::LParen) => {
                // The `(` is peeked: `pos` is just past it.
                if self.byte(self.pos) == Some(b'(') {
                    // `((expression))`: a simple command `(( EXPR ))`
                    // run by the arithmetic builtin.
                    self.next()?;
                    let open = Word {
                        offset: at,
                        end: at + 2,
                        parts: vec![Part::Lit("((".into())],
                    };
                    self.pos += 1;
                    let expr = self.read_arith_body(at)?;
                    let close_at = self.pos - 2;
                    let close = Word {
                        offset: self.at(close_at),
                        end: self.at(self.pos),
                        parts: vec![Part::Lit("))".into())],
                    };
                    let redirects = self.parse_redirects()?;
                    let id = self.next_id;
                    self.next_id += 1;
                    let cmd = Command::Simple(SimpleCommand {
                        id,
                        offset: at,
                        assignments: Vec::new(),
                        words: vec![open, expr, close],
                        redirects,
                    });
                    if matches!(self.peek()?.kind, TokKind::Word(_)) {
                        return Err(self.unexpected());
                    }
                    self.leave();
                    return Ok(cmd);
                }
                self.next()?;
                let body = self.parse_list()?;
                if body.is_empty() || self.peek_op()? != Some(Op::RParen) {
                    return Err(self.unexpected());
                }
                self.next()?;
                Command::Subshell {
                    offset: at,
                    body,
                    redirects: self.parse_redirects()?,
                }
            }
            TokKind::Word(w) if bare_text(w).is_some() => {
                let text = bare_text(w).unwrap_or_default();
                match text {
                    "{" => {
                        self.next()?;
                        let body = self.parse_body(&["}"])?;
                        self.next()?;
                        Command::Group {
                            offset: at,
                            body,
                            redirects: self.parse_redirects()?,
                        }
                    }
                    "if" => self.parse_if(at)?,
                    "while" | "until" => {
                        let until = text == "until";
                        self.next()?;
                        let condition = self.parse_body(&["do"])?;
                        self.next()?;
                        let body = self.parse_body(&["done"])?;
                        self.next()?;
                        Command::While {
                            offset: at,
                            until,
                            condition,
                            body,
                            redirects: self.parse_redirects()?,
                        }
                    }
                    "for" => self.parse_for(at)?,
                    "case" => self.parse_case(at)?,
                    t if TERMINATORS.contains(&t) || matches!(t, "!" | "in" | "]]") => {
                        return Err(self.unexpected());
                    }
                    "function" => {
                        self.next()?;
                        let name = match self.next()?.kind {
                            TokKind::Word(w) => function_name(&w),
                            _ => None,
                        };
                        let Some(name) = name else {
                            return Err(err(
                                SYNTAX,
                                at,
                                "`function` needs a name (letters, digits, `_`, `-`, `.`)".into(),
                                "write `function NAME { ...; }` or `NAME() { ...; }`",
                            ));
                        };
                        if self.peek_op()? == Some(Op::LParen) {
                            self.next()?;
                            if self.peek_op()? != Some(Op::RParen) {
                                return Err(self.unexpected());
                            }
                            self.next()?;
                        }
                        self.parse_function_body(at, name)?
                    }
                    "[[" => {
                        let c = self.parse_cond(at)?;
                        if matches!(self.peek()?.kind, TokKind::Word(_)) {
                            return Err(self.unexpected());
                        }
                        Command::Simple(c)
                    }
                    "select" | "coproc" => {
                        return Err(unsupported(
                            at,
                            &format!("`{text}`"),
                            "write the commands out without it",
                        ));
                    }
                    _ => self.parse_simple_or_function()?,
                }
            }
            TokKind::Word(_) | TokKind::IoNumber(_) => self.parse_simple_or_function()?,
            TokKind::Op(op) if op.is_redirect() => Command::Simple(self.parse_simple()?),
            _ => return Err(self.unexpected()),
        };
        // bash takes a reserved word as one only where a command may start:
        // right after `fi`, `}` or `done` it may close an enclosing block,
        // but after the block's redirections (`fi > f fi`) it is a plain
        // word, and no plain word may follow a compound command.
        if !matches!(cmd, Command::Simple(_))
            && !cmd.redirects().is_empty()
            && matches!(self.peek()?.kind, TokKind::Word(_))
        {
            return Err(self.unexpected());
        }
        self.leave();
        Ok(cmd)
    }

    /// A simple command, or the function definition it turned out to be.
    fn parse_simple_or_function(&mut self) -> Result<Command, LexError> {
        let c = self.parse_simple()?;
        match self.function.take() {
            Some((name, at)) => self.parse_function_body(at, name),
            None => Ok(Command::Simple(c)),
        }
    }

    /// The body of a function: a compound command, after any newlines.
    fn parse_function_body(&mut self, at: usize, name: String) -> Result<Command, LexError> {
        self.skip_newlines()?;
        let body = self.parse_command()?;
        if let Command::Simple(s) = &body
            && !s
                .words
                .first()
                .is_some_and(|w| w.is_bare("[[") || w.is_bare("(("))
        {
            return Err(err(
                SYNTAX,
                s.offset,
                format!("the body of function `{name}` is not a compound command"),
                "write the body in braces: `NAME() { ...; }`",
            ));
        }
        Ok(Command::Function {
            offset: at,
            name,
            body: Box::new(body),
        })
    }

    fn parse_if(&mut self, at: usize) -> Result<Command, LexError> {
        self.next()?;
        let mut branches = Vec::new();
        let mut otherwise = None;
        loop {
            let cond = self.parse_body(&["then"])?;
            self.next()?;
            let body = self.parse_body(&["elif", "else", "fi"])?;
            branches.push((cond, body));
            let kw = self.next()?;
            match &kw.kind {
                TokKind::Word(w) if w.is_bare("elif") => continue,
                TokKind::Word(w) if w.is_bare("else") => {
                    otherwise = Some(self.parse_body(&["fi"])?);
                    self.next()?;
                    break;
                }
                _ => break,
            }
        }
        Ok(Command::If {
            offset: at,
            branches,
            otherwise,
            redirects: self.parse_redirects()?,
        })
    }

    fn parse_for(&mut self, at: usize) -> Result<Command, LexError> {
        self.next()?;
        let name_tok = self.next()?;
        let name = match &name_tok.kind {
            TokKind::Word(w) => match w.parts.as_slice() {
                [Part::Lit(t)] if lex::is_identifier(t) => t.clone(),
                _ => {
                    return Err(err(
                        SYNTAX,
                        name_tok.at,
                        format!("`{}` is not a valid loop variable name", describe_word(w)),
                        "write `for NAME in WORDS; do ...; done`",
                    ));
                }
            },
            TokKind::Op(Op::LParen) if self.byte(self.pos) == Some(b'(') => {
                return self.parse_arith_for(at);
            }
            _ => {
                self.peeked = Some(name_tok);
                return Err(self.unexpected());
            }
        };
        self.skip_newlines()?;
        let mut words = None;
        if self.peek_bare("in")? {
            self.next()?;
            let mut ws = Vec::new();
            loop {
                match self.next()? {
                    Tok {
                        kind: TokKind::Word(w),
                        ..
                    } => ws.push(w),
                    Tok {
                        kind: TokKind::Op(Op::Semi) | TokKind::Newline,
                        ..
                    } => break,
                    t => {
                        self.peeked = Some(t);
                        return Err(self.unexpected());
                    }
                }
            }
            words = Some(ws);
        } else if self.peek_op()? == Some(Op::Semi) {
            self.next()?;
        }
        self.skip_newlines()?;
        if !self.peek_bare("do")? {
            return Err(self.unexpected());
        }
        self.next()?;
        let body = self.parse_body(&["done"])?;
        self.next()?;
        Ok(Command::For {
            offset: at,
            name,
            words,
            body,
            redirects: self.parse_redirects()?,
        })
    }

    /// `for (( init; condition; step ))`, after `for (`: the expressions,
    /// then `do ... done` or `{ ...; }`.
    fn parse_arith_for(&mut self, at: usize) -> Result<Command, LexError> {
        self.pos += 1;
        let mut exprs = self.read_arith_parts(at, true)?;
        if exprs.len() != 3 {
            return Err(err(
                SYNTAX,
                at,
                "syntax error: `for ((...))` takes three expressions separated by `;`".into(),
                "write `for (( i = 0; i < n; i++ )); do ...; done`",
            ));
        }
        let step = exprs.pop().unwrap_or_default();
        let condition = exprs.pop().unwrap_or_default();
        let init = exprs.pop().unwrap_or_default();
        if self.peek_op()? == Some(Op::Semi) {
            self.next()?;
        }
        self.skip_newlines()?;
        let body = if self.peek_bare("do")? {
            self.next()?;
            let body = self.parse_body(&["done"])?;
            self.next()?;
            body
        } else if self.peek_bare("{")? {
            self.next()?;
            let body = self.parse_body(&["}"])?;
            self.next()?;
            body
        } else {
            return Err(self.unexpected());
        };
        Ok(Command::ArithFor {
            offset: at,
            init,
            condition,
            step,
            body,
            redirects: self.parse_redirects()?,
        })
    }

    fn parse_case(&mut self, at: usize) -> Result<Command, LexError> {
        self.next()?;
        let word = match self.next()? {
            Tok {
                kind: TokKind::Word(w),
                ..
            } => w,
            t => {
                self.peeked = Some(t);
                return Err(self.unexpected());
            }
        };
        self.skip_newlines()?;
        if !self.peek_bare("in")? {
            return Err(self.unexpected());
        }
        self.next()?;
        let mut arms = Vec::new();
        loop {
            self.skip_newlines()?;
            if self.peek_bare("esac")? {
                self.next()?;
                break;
            }
            if self.peek_op()? == Some(Op::LParen) {
                self.next()?;
            }
            let mut patterns = Vec::new();
            loop {
                match self.next()? {
                    Tok {
                        kind: TokKind::Word(w),
                        ..
                    } => patterns.push(w),
                    t => {
                        self.peeked = Some(t);
                        return Err(self.unexpected());
                    }
                }
                match self.next()? {
                    Tok {
                        kind: TokKind::Op(Op::Pipe),
                        ..
                    } => continue,
                    Tok {
                        kind: TokKind::Op(Op::RParen),
                        ..
                    } => break,
                    t => {
                        self.peeked = Some(t);
                        return Err(self.unexpected());
                    }
                }
            }
            let body = self.parse_list()?;
            let mut fall_through = false;
            match self.peek()?.kind.clone() {
                TokKind::Op(Op::DSemi) => {
                    self.next()?;
                }
                TokKind::Op(Op::SemiAmp) => {
                    self.next()?;
                    fall_through = true;
                }
                TokKind::Op(Op::DSemiAmp) => {
                    return Err(unsupported(
                        self.peek()?.at,
                        "`;;&`",
                        "end each case arm with `;;`",
                    ));
                }
                TokKind::Word(w) if w.is_bare("esac") => {}
                _ => return Err(self.unexpected()),
            }
            arms.push(CaseArm {
                patterns,
                body,
                fall_through,
            });
        }
        Ok(Command::Case {
            offset: at,
            word,
            arms,
            redirects: self.parse_redirects()?,
        })
    }

    fn parse_redirects(&mut self) -> Result<Vec<Redirect>, LexError> {
        let mut rs = Vec::new();
        loop {
            match self.peek()?.kind {
                TokKind::IoNumber(_) => rs.push(self.parse_redirect()?),
                TokKind::Op(op) if op.is_redirect() => rs.push(self.parse_redirect()?),
                _ => return Ok(rs),
            }
        }
    }

    fn parse_redirect(&mut self) -> Result<Redirect, LexError> {
        let first = self.next()?;
        let offset = first.at;
        let (fd, op_tok) = match first.kind {
            TokKind::IoNumber(n) => (Some(n), self.next()?),
            _ => (None, first),
        };
        let TokKind::Op(op) = op_tok.kind else {
            self.peeked = Some(op_tok);
            return Err(self.unexpected());
        };
        let target_tok = self.next()?;
        let TokKind::Word(target) = target_tok.kind else {
            self.peeked = Some(target_tok);
            return Err(self.unexpected());
        };
        let word = |op| Redirect {
            offset,
            fd,
            op,
            target: RedirTarget::Word(target.clone()),
        };
        Ok(match op {
            Op::Less => word(RedirOp::In),
            Op::Great => word(RedirOp::Out),
            Op::DGreat => word(RedirOp::Append),
            Op::Clobber => word(RedirOp::Clobber),
            Op::LessGreat => word(RedirOp::ReadWrite),
            Op::TLess => word(RedirOp::HereString),
            Op::AndGreat | Op::AndDGreat => {
                if fd.is_some() {
                    return Err(unsupported(
                        offset,
                        "a file descriptor before &>",
                        "write `&> file` alone",
                    ));
                }
                word(if op == Op::AndGreat {
                    RedirOp::OutErr
                } else {
                    RedirOp::AppendErr
                })
            }
            Op::GreatAnd | Op::LessAnd => {
                let lit = target.literal();
                let is_fd = lit.as_deref().is_some_and(|t| {
                    t == "-" || (!t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()))
                });
                if is_fd {
                    let t = lit.unwrap_or_default();
                    if t != "-" && t.parse::<u32>().map_or(true, |n| n > 9) {
                        return Err(unsupported(
                            offset,
                            "duplicating a file descriptor above 9",
                            "use fds 0 to 9",
                        ));
                    }
                    word(if op == Op::GreatAnd {
                        RedirOp::DupOut
                    } else {
                        RedirOp::DupIn
                    })
                } else if op == Op::GreatAnd && fd.is_none() && lit.is_some() {
                    // `>&file` is `&>file`.
                    word(RedirOp::OutErr)
                } else {
                    return Err(unsupported(
                        offset,
                        &format!("`{}` with a target that is not an fd number", op.text()),
                        "write `N>&M` with fd numbers, `N>&-` to close, or `&> file`",
                    ));
                }
            }
            Op::DLess | Op::DLessDash => {
                let mut delimiter = String::new();
                for p in &target.parts {
                    match p {
                        Part::Lit(t) | Part::Quoted(t) => delimiter.push_str(t),
                        _ => {
                            return Err(unsupported(
                                target.offset,
                                "an expansion in a here-document delimiter",
                                "use a plain word such as EOF",
                            ));
                        }
                    }
                }
                let index = self.heredocs.len();
                self.heredocs.push(Heredoc {
                    offset,
                    delimiter: delimiter.clone(),
                    quoted: target.has_quotes(),
                    body: Word::default(),
                });
                self.pending.push(Pending {
                    index,
                    delimiter,
                    quoted: target.has_quotes(),
                    strip_tabs: op == Op::DLessDash,
                });
                Redirect {
                    offset,
                    fd,
                    op: RedirOp::Heredoc,
                    target: RedirTarget::Heredoc(index),
                }
            }
            _ => {
                return Err(err(
                    SYNTAX,
                    offset,
                    format!("syntax error near unexpected token `{}`", op.text()),
                    "fix the shell syntax; bash refuses this command too",
                ));
            }
        })
    }

    fn parse_simple(&mut self) -> Result<SimpleCommand, LexError> {
        let offset = self.peek()?.at;
        let mut cmd = SimpleCommand {
            id: 0,
            offset,
            assignments: Vec::new(),
            words: Vec::new(),
            redirects: Vec::new(),
        };
        loop {
            let tok = self.peek()?.clone();
            match tok.kind {
                TokKind::IoNumber(_) => cmd.redirects.push(self.parse_redirect()?),
                TokKind::Op(op) if op.is_redirect() => {
                    let redirects_only = cmd.words.is_empty()
                        && cmd.assignments.is_empty()
                        && !cmd.redirects.is_empty();
                    let r = self.parse_redirect()?;
                    // bash's own quirk: in a command that so far holds only
                    // redirections, the word after `&>>` is read as an
                    // assignment when it has that shape, and the grammar
                    // then refuses it (`>c &>> x=1` is a syntax error in
                    // bash, `>c &> x=1` and `echo &>> x=1` are not).
                    if redirects_only
                        && r.op == RedirOp::AppendErr
                        && let RedirTarget::Word(w) = &r.target
                        && assignment_shaped(w)
                    {
                        return Err(err(
                            SYNTAX,
                            w.offset,
                            format!("syntax error near unexpected token `{}`", describe_word(w)),
                            "fix the shell syntax; bash refuses this command too (quote the file name after `&>>`)",
                        ));
                    }
                    cmd.redirects.push(r);
                }
                TokKind::Word(w) => {
                    self.next()?;
                    if cmd.words.is_empty() {
                        if let Some(a) = self.assignment(&w)? {
                            cmd.assignments.push(a);
                            continue;
                        }
                        if self.peek_op()? == Some(Op::LParen) {
                            // `NAME ( )`: a function definition.
                            let name = match cmd.redirects.is_empty() && cmd.assignments.is_empty()
                            {
                                true => function_name(&w),
                                false => None,
                            };
                            let Some(name) = name else {
                                return Err(self.unexpected());
                            };
                            self.next()?;
                            if self.peek_op()? != Some(Op::RParen) {
                                return Err(self.unexpected());
                            }
                            self.next()?;
                            self.function = Some((name, tok.at));
                            return Ok(cmd);
                        }
                    }
                    let mut w = w;
                    // `declare NAME=(...)`, `local NAME=(...)`: an array
                    // in a declaration builtin's argument, as bash reads it.
                    if cmd.words.first().is_some_and(|d| {
                        ["declare", "typeset", "local", "export", "readonly"]
                            .iter()
                            .any(|n| d.is_bare(n))
                    }) && let [Part::Lit(t)] = w.parts.as_slice()
                        && (t.ends_with('=') && lex::is_identifier(&t[..t.len() - 1])
                            || t.ends_with("+=") && lex::is_identifier(&t[..t.len() - 2]))
                        && self.peek_op()? == Some(Op::LParen)
                        && self.peek()?.at == w.end
                    {
                        let lit = self.array_literal()?;
                        w.parts.push(Part::Array(Box::new(lit)));
                        w.end = self.at(self.pos);
                    }
                    cmd.words.push(w);
                }
                _ => break,
            }
        }
        if cmd.words.is_empty() && cmd.assignments.is_empty() && cmd.redirects.is_empty() {
            return Err(self.unexpected());
        }
        if !cmd.words.is_empty()
            && let Some(a) = cmd
                .assignments
                .iter()
                .find(|a| a.index.is_some() || matches!(a.value.parts.as_slice(), [Part::Array(_)]))
        {
            return Err(unsupported(
                a.offset,
                "an array assignment before a command",
                "assign the array on its own line, then run the command",
            ));
        }
        cmd.id = self.next_id;
        self.next_id += 1;
        Ok(cmd)
    }

    /// `NAME=value` / `NAME+=value` / `NAME[SUBSCRIPT]=value` in
    /// assignment position; `NAME=(...)` reads the array's elements.
    fn assignment(&mut self, w: &Word) -> Result<Option<Assignment>, LexError> {
        let Some(Part::Lit(first)) = w.parts.first() else {
            return Ok(None);
        };
        let name_end = first
            .bytes()
            .position(|b| !is_name_char(b))
            .unwrap_or(first.len());
        let name = &first[..name_end];
        if name.is_empty() || !is_name_start(name.as_bytes()[0]) {
            return Ok(None);
        }
        let rest = &first[name_end..];
        if rest.starts_with('[') {
            return match split_subscript(w, name_end + 1) {
                Some((index, append, value)) => Ok(Some(Assignment {
                    offset: w.offset,
                    name: name.to_string(),
                    append,
                    index: Some(index),
                    value,
                })),
                // bash reads `NAME[...]` here as an array subscript, across
                // spaces and lines, up to the matching `]`.
                None => Err(unsupported(
                    w.offset,
                    "an array subscript (`NAME[...]`) without `=` where a command or an assignment starts",
                    "assign an element with NAME[INDEX]=value; quote the word if it is a command name",
                )),
            };
        }
        let (append, value_start) = if rest.starts_with("+=") {
            (true, name_end + 2)
        } else if rest.starts_with('=') {
            (false, name_end + 1)
        } else {
            return Ok(None);
        };
        let mut parts = Vec::new();
        if value_start < first.len() {
            parts.push(Part::Lit(first[value_start..].to_string()));
        }
        parts.extend(w.parts[1..].iter().cloned());
        // `NAME=(...)` is an array.
        if parts.is_empty()
            && self.peek_op()? == Some(Op::LParen)
            && self.peek()?.at == w.offset + first.len()
        {
            let lit = self.array_literal()?;
            parts.push(Part::Array(Box::new(lit)));
        }
        Ok(Some(Assignment {
            offset: w.offset,
            name: name.to_string(),
            append,
            index: None,
            value: Word {
                offset: w.offset + value_start,
                end: w.end,
                parts,
            },
        }))
    }

    /// `( word... )` after `NAME=`, the `(` peeked: the elements, across
    /// lines; `[SUBSCRIPT]=value` sets one index (or key).
    fn array_literal(&mut self) -> Result<ArrayLit, LexError> {
        let open = self.next()?;
        let mut elems = Vec::new();
        loop {
            self.skip_newlines()?;
            let tok = self.next()?;
            match tok.kind {
                TokKind::Op(Op::RParen) => break,
                TokKind::Word(w) => {
                    let indexed =
                        matches!(w.parts.first(), Some(Part::Lit(t)) if t.starts_with('['));
                    match indexed.then(|| split_subscript(&w, 1)).flatten() {
                        Some((index, false, value)) => elems.push(ArrayElem {
                            index: Some(index),
                            value,
                        }),
                        Some((_, true, _)) => {
                            return Err(unsupported(
                                w.offset,
                                "`[INDEX]+=value` in an array literal",
                                "write [INDEX]=value",
                            ));
                        }
                        None => elems.push(ArrayElem {
                            index: None,
                            value: w,
                        }),
                    }
                }
                TokKind::Eof => {
                    return Err(err(
                        "lex.unterminated",
                        open.at,
                        "an array's `(` is never closed".into(),
                        "close the list of elements with )",
                    ));
                }
                _ => {
                    self.peeked = Some(tok);
                    return Err(self.unexpected());
                }
            }
        }
        Ok(ArrayLit {
            offset: open.at,
            elems,
        })
    }
}

/// A word `...[SUBSCRIPT]=value` (or `+=`), the subscript starting at
/// byte `from` of its first (unquoted) part: the subscript, whether it
/// appends, and the value. None when no `]=` or `]+=` closes it.
fn split_subscript(w: &Word, from: usize) -> Option<(Word, bool, Word)> {
    let mut sub: Vec<Part> = Vec::new();
    let mut depth = 0usize;
    for (k, p) in w.parts.iter().enumerate() {
        let Part::Lit(t) = p else {
            if k == 0 {
                return None;
            }
            sub.push(p.clone());
            continue;
        };
        let start = if k == 0 { from } else { 0 };
        let text = t.get(start..)?;
        for (i, c) in text.char_indices() {
            match c {
                '[' => depth += 1,
                ']' if depth > 0 => depth -= 1,
                ']' => {
                    let before = &text[..i];
                    let after = &text[i + 1..];
                    let (append, value) = if let Some(v) = after.strip_prefix("+=") {
                        (true, v)
                    } else if let Some(v) = after.strip_prefix('=') {
                        (false, v)
                    } else {
                        return None;
                    };
                    if !before.is_empty() {
                        push_quoted(&mut sub, before);
                    }
                    if sub.is_empty() {
                        return None;
                    }
                    let mut vparts = Vec::new();
                    if !value.is_empty() {
                        vparts.push(Part::Lit(value.to_string()));
                    }
                    vparts.extend(w.parts[k + 1..].iter().cloned());
                    let index = Word {
                        offset: w.offset + from,
                        end: w.offset + from,
                        parts: sub,
                    };
                    let value = Word {
                        offset: w.offset,
                        end: w.end,
                        parts: vparts,
                    };
                    return Some((index, append, value));
                }
                _ => {}
            }
        }
        push_quoted(&mut sub, text);
    }
    None
}

/// Whether bash's lexer would read `w` as an assignment word: an
/// unquoted name, then `=`, `+=` or a subscript.
fn assignment_shaped(w: &Word) -> bool {
    let Some(Part::Lit(first)) = w.parts.first() else {
        return false;
    };
    let name_end = first
        .bytes()
        .position(|b| !is_name_char(b))
        .unwrap_or(first.len());
    let (name, rest) = first.split_at(name_end);
    !name.is_empty()
        && is_name_start(name.as_bytes()[0])
        && (rest.starts_with('=') || rest.starts_with("+=") || rest.starts_with('['))
}

fn process_substitution_in_operand(at: usize) -> LexError {
    err(
        "syntax.process-substitution",
        at,
        "a process substitution inside `${...}` is not supported".into(),
        "give the process substitution a word of its own: `cmd <(list)`",
    )
}

fn special_param(at: usize, c: u8) -> LexError {
    let what = match c {
        b'!' => "`${!NAME}` (indirection)",
        _ => "$-",
    };
    unsupported(at, what, "write the value itself")
}

/// A function's name as bash takes it: an unquoted word with no `$`, `/`
/// or `=`, not a reserved word.
fn function_name(w: &Word) -> Option<String> {
    let t = bare_text(w)?;
    let ok = !t.is_empty()
        && t.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ':' | '@' | '+'))
        && !t.starts_with(|c: char| c.is_ascii_digit())
        && !matches!(
            t,
            "if" | "then"
                | "else"
                | "elif"
                | "fi"
                | "do"
                | "done"
                | "case"
                | "esac"
                | "while"
                | "until"
                | "for"
                | "in"
                | "function"
                | "select"
                | "time"
                | "coproc"
        );
    ok.then(|| t.to_string())
}

/// The text of a word that is one unquoted literal.
fn bare_text(w: &Word) -> Option<&str> {
    match w.parts.as_slice() {
        [Part::Lit(t)] => Some(t),
        _ => None,
    }
}

/// A word for messages: its text when literal, else a placeholder.
fn describe_word(w: &Word) -> String {
    w.literal().unwrap_or_else(|| "word".to_string())
}
