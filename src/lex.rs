//! The lexer: a command string to argv, exactly as `bash -c` would split it,
//! or a refusal.
//!
//! The invariant (the project's main correctness claim): every string this
//! lexer accepts yields exactly the argv that `bash -c STRING` builds for its
//! simple command; everything bash would treat as more than a simple command
//! with literal words (expansions, redirections, lists, globs, reserved words,
//! assignments, comments) is refused with a rule id, a byte offset and a hint.
//! Refusing is always allowed; accepting something bash reads differently is
//! a bug. `tests/it/lex_bash.rs` checks the claim against a real bash.

use std::fmt;

/// One word of the lexed command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Word {
    /// The word after quote removal: what the program receives.
    pub text: String,
    /// Byte offset of the word's first character in the input.
    pub offset: usize,
    /// True when any part of the word was quoted or escaped. Bash recognises
    /// reserved words only in unquoted form.
    pub quoted: bool,
}

/// Why a command string was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LexError {
    /// Stable rule id, e.g. `lex.metachar`.
    pub rule: &'static str,
    /// Byte offset of the offending character in the input.
    pub offset: usize,
    pub reason: String,
    pub hint: &'static str,
}

impl fmt::Display for LexError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} at byte {}: {} ({})",
            self.rule, self.offset, self.reason, self.hint
        )
    }
}

/// Words bash recognises as reserved in command position when unquoted.
const RESERVED: &[&str] = &[
    "!", "[[", "]]", "{", "}", "case", "coproc", "do", "done", "elif", "else", "esac", "fi", "for",
    "function", "if", "in", "select", "then", "time", "until", "while",
];

/// Characters refused anywhere in the input, quoted or not: they make a
/// string display differently from what runs, or end the command in bash.
/// Returns the rule id and a description.
pub fn forbidden_char(c: char) -> Option<(&'static str, &'static str)> {
    match c {
        '\0' => Some(("lex.nul", "NUL byte")),
        '\n' | '\r' => Some(("lex.newline", "line break")),
        '\t' | ' ' => None,
        c if (c as u32) < 0x20 || c == '\u{7f}' => Some(("lex.control", "control character")),
        '\u{80}'..='\u{9f}' => Some(("lex.control", "C1 control character")),
        '\u{2028}' | '\u{2029}' => Some(("lex.control", "Unicode line or paragraph separator")),
        '\u{202a}'..='\u{202e}'
        | '\u{2066}'..='\u{2069}'
        | '\u{200e}'
        | '\u{200f}'
        | '\u{061c}' => Some(("lex.bidi", "Unicode bidirectional control")),
        '\u{00ad}'
        | '\u{0600}'..='\u{0605}'
        | '\u{06dd}'
        | '\u{070f}'
        | '\u{08e2}'
        | '\u{180e}'
        | '\u{200b}'..='\u{200d}'
        | '\u{2060}'..='\u{2064}'
        | '\u{206a}'..='\u{206f}'
        | '\u{feff}'
        | '\u{fff9}'..='\u{fffb}'
        | '\u{110bd}'
        | '\u{110cd}'
        | '\u{1bca0}'..='\u{1bca3}'
        | '\u{1d173}'..='\u{1d17a}'
        | '\u{e0001}'
        | '\u{e0020}'..='\u{e007f}' => Some(("lex.invisible", "invisible format character")),
        _ => None,
    }
}

fn hint_for_char(rule: &str) -> &'static str {
    match rule {
        "lex.nul" | "lex.newline" => {
            "send one command per call; agent-rsh runs exactly one simple command"
        }
        "lex.bidi" | "lex.invisible" | "lex.control" => {
            "remove the invisible or control character; it can make the command read differently from what runs"
        }
        _ => "remove the character",
    }
}

/// Checks one already-split word (from `run --argv`) against the character
/// rules. Argv words need no quoting, so only the characters that are
/// refused everywhere apply.
pub fn check_argv_word(word: &str, base_offset: usize) -> Result<(), LexError> {
    for (i, c) in word.char_indices() {
        if let Some((rule, what)) = forbidden_char(c) {
            return Err(LexError {
                rule,
                offset: base_offset + i,
                reason: format!("{what} U+{:04X} is not allowed", c as u32),
                hint: hint_for_char(rule),
            });
        }
    }
    Ok(())
}

fn refuse(rule: &'static str, offset: usize, reason: String, hint: &'static str) -> LexError {
    LexError {
        rule,
        offset,
        reason,
        hint,
    }
}

/// Where an unquoted character stands in its word, for the characters
/// that are shell syntax only in some places.
struct Context<'a> {
    /// No character of the word precedes it (not even a quoted empty one).
    at_word_start: bool,
    /// The word's text so far is empty (`''~` still starts a tilde-prefix
    /// in a careless reading; refusing it costs nothing).
    text_empty: bool,
    /// The input character right before it, quoted or not.
    prev: Option<char>,
    /// The whole word as written, quotes included.
    raw: &'a str,
}

/// Is the unquoted character `c` literal text in bash here? Bash leaves
/// these literal (tests/lex_bash.rs checks each shape against bash):
/// - `~` inside a word, unless it follows `=` or `:` (tilde expansion
///   happens at a word's start and after `=`/`:` in assignment words);
/// - `{` and `}` in a word with no `,` and no `..` (brace expansion needs
///   one of them: `stash@{0}`, `{}` and `a{b}c` stay as written);
/// - `!` inside a word (history expansion is off under `bash -c`; `!`
///   alone first is the pipeline negation, a reserved word);
/// - `]` in a word with no `[` (it closes nothing).
fn literal_here(c: char, ctx: &Context) -> bool {
    match c {
        '~' => !ctx.text_empty && !matches!(ctx.prev, Some('=' | ':')),
        '{' | '}' => {
            // Quotes removed too, so `.'.'` counts as `..`.
            let bare: String = ctx
                .raw
                .chars()
                .filter(|c| !matches!(c, '\'' | '"' | '\\'))
                .collect();
            !bare.contains(',') && !bare.contains("..")
        }
        '!' => !ctx.at_word_start && !ctx.text_empty,
        ']' => !ctx.raw.contains('['),
        _ => false,
    }
}

/// The end (exclusive) of the word that contains byte `from`: the next
/// unquoted space or tab, quotes and escapes skipped as the lexer reads them.
fn raw_word_end(input: &str, from: usize) -> usize {
    let mut chars = input[from..].char_indices().map(|(k, c)| (from + k, c));
    while let Some((i, c)) = chars.next() {
        match c {
            ' ' | '\t' => return i,
            '\\' => {
                chars.next();
            }
            '\'' => {
                for (_, q) in chars.by_ref() {
                    if q == '\'' {
                        break;
                    }
                }
            }
            '"' => {
                while let Some((_, q)) = chars.next() {
                    match q {
                        '"' => break,
                        '\\' => {
                            chars.next();
                        }
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    input.len()
}

fn unquoted_refusal(c: char, offset: usize, at_word_start: bool) -> Option<LexError> {
    let (rule, hint): (&'static str, &'static str) = match c {
        ';' | '&' => (
            "lex.list",
            "run one command per call; agent-rsh never starts a shell, so lists and background jobs do not exist",
        ),
        '|' => (
            "lex.pipe",
            "run each command on its own, or use the program's own options (e.g. `grep -c` instead of `| wc -l`); quote it ('a|b') if it is literal text",
        ),
        '<' | '>' => (
            "lex.redirect",
            "redirection is not supported: output is captured in the result, and files are passed as arguments; to write a file, give its content as standard input (`--stdin`, the MCP `stdin` argument) to a program that writes it, e.g. `tee FILE`",
        ),
        '(' | ')' => (
            "lex.subshell",
            "subshells are not supported; quote the parenthesis if it is literal text",
        ),
        '$' => (
            "lex.expansion",
            "variables and substitutions are not expanded; write the value itself, or quote it ('$x') if the dollar is literal",
        ),
        '`' => (
            "lex.expansion",
            "command substitution is not supported; run the inner command separately",
        ),
        '*' | '?' | '[' | ']' => (
            "lex.glob",
            "globs are not expanded; quote the pattern ('*.rs') if it is for the program, or list files with `find`",
        ),
        '{' | '}' => (
            "lex.brace",
            "brace expansion is not supported; write each word out, or quote the braces",
        ),
        '~' => (
            "lex.tilde",
            "`~` is not expanded; use a path relative to the workspace, or quote the word ('HEAD~1', '~') if the tilde is literal",
        ),
        '!' => (
            "lex.bang",
            "`!` is shell syntax; quote it ('!') if it is literal text",
        ),
        '#' if at_word_start => (
            "lex.comment",
            "`#` at the start of a word begins a comment in a shell; quote it ('#') if it is literal text",
        ),
        _ => return None,
    };
    Some(refuse(
        rule,
        offset,
        format!("unquoted `{c}` is shell syntax"),
        hint,
    ))
}

/// Splits `input` into words with bash's quoting rules, refusing anything
/// that would make bash do more than run one simple command.
pub fn lex(input: &str, max_bytes: usize) -> Result<Vec<Word>, LexError> {
    if input.len() > max_bytes {
        return Err(refuse(
            "lex.too-long",
            max_bytes,
            format!(
                "command is {} bytes, the policy allows at most {max_bytes}",
                input.len()
            ),
            "shorten the command, or pass long data in a file in the workspace",
        ));
    }
    check_argv_word(input, 0)?;

    let mut words = Vec::new();
    let mut cur: Option<Word> = None;
    let mut chars = input.char_indices().peekable();

    while let Some((i, c)) = chars.next() {
        match c {
            ' ' | '\t' => {
                if let Some(w) = cur.take() {
                    words.push(w);
                }
            }
            '\'' => {
                let w = cur.get_or_insert_with(|| new_word(i));
                w.quoted = true;
                loop {
                    match chars.next() {
                        Some((_, '\'')) => break,
                        Some((_, ch)) => w.text.push(ch),
                        None => {
                            return Err(refuse(
                                "lex.unterminated",
                                i,
                                "single quote is never closed".into(),
                                "close the quote with a matching '",
                            ));
                        }
                    }
                }
            }
            '"' => {
                let w = cur.get_or_insert_with(|| new_word(i));
                w.quoted = true;
                loop {
                    match chars.next() {
                        Some((_, '"')) => break,
                        Some((j, '\\')) => match chars.peek() {
                            Some(&(_, e @ ('"' | '\\' | '`' | '$'))) => {
                                w.text.push(e);
                                chars.next();
                            }
                            Some(_) => w.text.push('\\'),
                            None => {
                                return Err(refuse(
                                    "lex.unterminated",
                                    j,
                                    "double quote is never closed".into(),
                                    "close the quote with a matching \"",
                                ));
                            }
                        },
                        Some((j, '$')) => {
                            return Err(refuse(
                                "lex.expansion",
                                j,
                                "`$` inside double quotes is expanded by a shell".into(),
                                "write \\$ or use single quotes ('$x') for a literal dollar; variables are not expanded",
                            ));
                        }
                        Some((j, '`')) => {
                            return Err(refuse(
                                "lex.expansion",
                                j,
                                "backquote inside double quotes is command substitution".into(),
                                "write \\` or use single quotes for a literal backquote",
                            ));
                        }
                        Some((_, ch)) => w.text.push(ch),
                        None => {
                            return Err(refuse(
                                "lex.unterminated",
                                i,
                                "double quote is never closed".into(),
                                "close the quote with a matching \"",
                            ));
                        }
                    }
                }
            }
            '\\' => {
                let w = cur.get_or_insert_with(|| new_word(i));
                w.quoted = true;
                match chars.next() {
                    Some((_, ch)) => w.text.push(ch),
                    None => {
                        return Err(refuse(
                            "lex.trailing-backslash",
                            i,
                            "backslash at the end of the command escapes nothing".into(),
                            "remove it, or write \\\\ for a literal backslash",
                        ));
                    }
                }
            }
            _ => {
                if let Some(e) = unquoted_refusal(c, i, cur.is_none()) {
                    let start = cur.as_ref().map_or(i, |w| w.offset);
                    let ctx = Context {
                        at_word_start: cur.is_none(),
                        text_empty: cur.as_ref().is_none_or(|w| w.text.is_empty()),
                        prev: input[..i].chars().next_back(),
                        raw: &input[start..raw_word_end(input, i)],
                    };
                    if !literal_here(c, &ctx) {
                        return Err(e);
                    }
                }
                cur.get_or_insert_with(|| new_word(i)).text.push(c);
            }
        }
    }
    if let Some(w) = cur.take() {
        words.push(w);
    }
    check_command_position(&words)?;
    Ok(words)
}

fn new_word(offset: usize) -> Word {
    Word {
        text: String::new(),
        offset,
        quoted: false,
    }
}

/// Rules about the first word: bash gives reserved words and assignments a
/// meaning there that is not "run this program".
fn check_command_position(words: &[Word]) -> Result<(), LexError> {
    let Some(first) = words.first() else {
        return Err(refuse(
            "lex.empty",
            0,
            "the command is empty".into(),
            "give a command, e.g. `ls -la`",
        ));
    };
    if !first.quoted && RESERVED.contains(&first.text.as_str()) {
        return Err(refuse(
            "lex.reserved-word",
            first.offset,
            format!("`{}` is a shell reserved word", first.text),
            "shell control structures are not supported; quote the word if it names a program",
        ));
    }
    if is_assignment(&first.text) {
        return Err(refuse(
            "lex.assignment",
            first.offset,
            format!(
                "`{}` is a variable assignment, not a command",
                first.text.split('=').next().unwrap_or_default()
            ),
            "set environment variables with --env NAME=VALUE",
        ));
    }
    Ok(())
}

/// `NAME=...` or `NAME+=...` with a shell identifier as NAME.
pub fn is_assignment(word: &str) -> bool {
    let Some(eq) = word.find('=') else {
        return false;
    };
    let name = word[..eq].strip_suffix('+').unwrap_or(&word[..eq]);
    is_identifier(name)
}

/// A shell identifier: `[A-Za-z_][A-Za-z0-9_]*`.
pub fn is_identifier(name: &str) -> bool {
    let mut bytes = name.bytes();
    matches!(bytes.next(), Some(b'A'..=b'Z' | b'a'..=b'z' | b'_'))
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<String> {
        lex(s, 8192)
            .unwrap_or_else(|e| panic!("{s:?} refused: {e}"))
            .into_iter()
            .map(|w| w.text)
            .collect()
    }

    fn rule(s: &str) -> (&'static str, usize) {
        let e = lex(s, 8192).expect_err(s);
        (e.rule, e.offset)
    }

    #[test]
    fn accepted_strings_split_like_bash() {
        let table: &[(&str, &[&str])] = &[
            ("ls -la", &["ls", "-la"]),
            ("  ls\t -la  ", &["ls", "-la"]),
            ("grep \"a|b;c\" file", &["grep", "a|b;c", "file"]),
            ("echo 'it''s'", &["echo", "its"]),
            ("echo \"a\\\"b\"", &["echo", "a\"b"]),
            ("echo \"a\\nb\"", &["echo", "a\\nb"]),
            ("echo \"\\$x \\` \\\\\"", &["echo", "$x ` \\"]),
            ("echo a\\ b", &["echo", "a b"]),
            ("echo \\;", &["echo", ";"]),
            ("echo '' \"\"", &["echo", "", ""]),
            ("echo a#b", &["echo", "a#b"]),
            ("echo a=b", &["echo", "a=b"]),
            ("echo x\u{a0}y", &["echo", "x\u{a0}y"]),
            ("echo '$(id)' '*'", &["echo", "$(id)", "*"]),
            ("\"time\" ls", &["time", "ls"]),
            ("echo \"!\"", &["echo", "!"]),
            ("find . -name '*.rs'", &["find", ".", "-name", "*.rs"]),
            // What bash leaves literal although a careless reading would not.
            ("git diff HEAD~1", &["git", "diff", "HEAD~1"]),
            ("echo a~b x'y'~", &["echo", "a~b", "xy~"]),
            (
                "git stash show stash@{0}",
                &["git", "stash", "show", "stash@{0}"],
            ),
            (
                "find . -exec cat {} +",
                &["find", ".", "-exec", "cat", "{}", "+"],
            ),
            ("echo a{b}c } {", &["echo", "a{b}c", "}", "{"]),
            ("git commit -m fix!", &["git", "commit", "-m", "fix!"]),
            ("echo a!b", &["echo", "a!b"]),
            ("test a = b ]", &["test", "a", "=", "b", "]"]),
            ("echo a]b", &["echo", "a]b"]),
        ];
        for (input, want) in table {
            assert_eq!(argv(input), *want, "input {input:?}");
        }
    }

    #[test]
    fn refusals_name_rule_and_offset() {
        let table: &[(&str, &str, usize)] = &[
            ("ls; id", "lex.list", 2),
            ("ls | wc", "lex.pipe", 3),
            ("ls & ", "lex.list", 3),
            ("echo $(id)", "lex.expansion", 5),
            ("echo `id`", "lex.expansion", 5),
            ("echo \"$HOME\"", "lex.expansion", 6),
            ("ls *", "lex.glob", 3),
            ("ls a?", "lex.glob", 4),
            ("ls [ab]", "lex.glob", 3),
            ("echo {a,b}", "lex.brace", 5),
            ("cat ~/.ssh/id_rsa", "lex.tilde", 4),
            ("FOO=1 ls", "lex.assignment", 0),
            ("A+=1", "lex.assignment", 0),
            ("echo > f", "lex.redirect", 5),
            ("cat < f", "lex.redirect", 4),
            ("(ls)", "lex.subshell", 0),
            ("! ls", "lex.bang", 0),
            ("echo !x", "lex.bang", 5),
            ("echo ''!x", "lex.bang", 7),
            ("echo ~", "lex.tilde", 5),
            ("echo ''~", "lex.tilde", 7),
            ("make prefix=~/x", "lex.tilde", 12),
            ("echo a=b:~", "lex.tilde", 9),
            ("echo {a,b}c", "lex.brace", 5),
            ("echo x{1..3}", "lex.brace", 6),
            ("echo {a.'.'b}", "lex.brace", 5),
            ("echo {a'b,c'}", "lex.brace", 5),
            ("echo '['a]", "lex.glob", 9),
            ("ls #x", "lex.comment", 3),
            ("time ls", "lex.reserved-word", 0),
            ("if", "lex.reserved-word", 0),
            ("echo 'abc", "lex.unterminated", 5),
            ("echo \"abc", "lex.unterminated", 5),
            ("echo abc\\", "lex.trailing-backslash", 8),
            ("ls\nid", "lex.newline", 2),
            ("ls\0", "lex.nul", 2),
            ("ls\u{b}x", "lex.control", 2),
            ("ls\u{c}x", "lex.control", 2),
            ("ls \u{202e}x", "lex.bidi", 3),
            ("ls \u{200b}", "lex.invisible", 3),
            ("ls \u{2028}", "lex.control", 3),
            ("", "lex.empty", 0),
            ("   ", "lex.empty", 0),
        ];
        for (input, want_rule, want_off) in table {
            assert_eq!(rule(input), (*want_rule, *want_off), "input {input:?}");
        }
    }

    #[test]
    fn too_long_is_refused() {
        let s = format!("echo {}", "a".repeat(9000));
        assert_eq!(lex(&s, 8192).unwrap_err().rule, "lex.too-long");
    }

    #[test]
    fn offsets_point_at_word_starts() {
        let w = lex("ls  'a b' c", 100).unwrap();
        assert_eq!(
            w.iter().map(|w| w.offset).collect::<Vec<_>>(),
            vec![0, 4, 10]
        );
    }
}
