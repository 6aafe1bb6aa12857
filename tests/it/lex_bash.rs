//! Differential test of the lexer's invariant: every string it accepts
//! yields exactly the argv bash builds from it.
//!
//! Strings are generated from an alphabet rich in quotes, escapes,
//! metacharacters and tricky Unicode; all accepted ones go to one bash
//! process as `f <string>` lines, where `f` prints its arguments
//! NUL-separated. Bash runs with an empty PATH so that a wrongly accepted
//! substitution finds no program to run.

use agent_rsh::lex;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, TestRunner};
use std::io::Write;
use std::process::{Command, Stdio};

const CASES: usize = 12_000;

fn pieces() -> impl Strategy<Value = String> {
    let atoms: Vec<&'static str> = vec![
        "a", "b", "Z", "0", "-", "--x", "_", ".", "/", ",", ":", "@", "%", "^", "+", "=", "x=",
        " ", " ", "  ", "\t", "'", "'", "\"", "\"", "\\", "\\", ";", "|", "&", "$", "`", "*", "?",
        "[", "]", "{", "}", "~", "!", "#", "(", ")", "<", ">", "é", "日本", "\u{a0}", "\u{2028}",
        "\u{202e}", "\u{200b}", "\u{b}", "\u{c}", "\n", "if", "time", "A=1", "\\n", "\\'", "\\\"",
        "$x", "''", "\"\"", "\\ ", "a#b", "\\#", "'a b'", "\"a b\"", "\"\\$\"", "\"\\\\\"",
        "\"\\`\"", "\"\\a\"",
    ];
    prop::collection::vec(prop::sample::select(atoms), 1..12).prop_map(|v| v.concat())
}

/// Mostly-acceptable strings: quoting and escaping in every combination,
/// with metacharacters only inside quotes or after a backslash.
fn quoting() -> impl Strategy<Value = String> {
    let atoms: Vec<&'static str> = vec![
        "a",
        "b",
        "-x",
        "--y=z",
        "=",
        "a=b",
        "#",
        "a#",
        " ",
        "\t",
        r"\t",
        "'",
        r"\'",
        r"\\",
        r#"\""#,
        r"\ ",
        r"\;",
        r"\|",
        r"\$",
        r"\*",
        r"\~",
        r"\!",
        r"\#",
        r"\{",
        "'$(x)'",
        "'*'",
        "'a;b'",
        r"'\\'",
        r#"'\"'"#,
        r#""'""#,
        r#""\$""#,
        r#""\`""#,
        r#""\\""#,
        r#""\"""#,
        r#""\n""#,
        r#""!""#,
        r#""a b""#,
        r#""""#,
        "''",
        "é",
        "\u{a0}",
        "日",
        r#""~""#,
        r#""*?[]{}""#,
        r#""<>|&;()""#,
    ];
    prop::collection::vec(prop::sample::select(atoms), 1..10)
        .prop_map(|v| format!("w {}", v.concat()))
}

/// Shapes bash leaves literal in some places and expands in others: `~`
/// inside words and after `=` or `:`, braces with and without `,` or `..`,
/// `!` at and after a word's start, `]` with and without a `[`; next to
/// quotes, escapes and assignment-shaped words.
fn literal_shapes() -> impl Strategy<Value = String> {
    let atoms: Vec<&'static str> = vec![
        "a", "b", "HEAD", "stash", "x=", "A=", "a+=", "0", "1", "-", "--p=", "/", "@", "~", "~",
        "~1", "~/", "{", "{", "}", "}", "{}", "{0}", "@{0}", ",", ".", "..", "=", ":", "!", "!",
        "]", "]", "[", "'['", "'a'", "''", "\"\"", "\"~\"", "'{'", "\\~", "\\!", "\\,", "\\{",
        "\\]", "\"a,b\"", "'..'", " ", " ", "\t", "+", "%", "^",
    ];
    prop::collection::vec(prop::sample::select(atoms), 1..9)
        .prop_map(|v| format!("w {}", v.concat()))
}

/// argv lists as bash builds them, one per line of `commands`.
fn bash_argvs(commands: &[String]) -> Vec<Vec<String>> {
    let mut script = String::from("f() { printf '%s\\0' \"$@\"; printf '\\1'; }\n");
    for c in commands {
        script.push_str("f ");
        script.push_str(c);
        script.push('\n');
    }
    let bash = ["/bin/bash", "/usr/bin/bash"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
        .expect("bash is needed for the differential test");
    let mut child = Command::new(bash)
        .args(["--noprofile", "--norc", "-s"])
        .env_clear()
        .env("PATH", "/nonexistent")
        // Tilde expansion would show as this path.
        .env("HOME", "/home/expanded-tilde")
        .env("LC_ALL", "C.UTF-8")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("bash is needed for the differential test");
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(script.as_bytes()));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    let mut records: Vec<Vec<String>> = out
        .stdout
        .split(|&b| b == 1)
        .map(|rec| {
            rec.split(|&b| b == 0)
                .map(|w| String::from_utf8(w.to_vec()).expect("bash argv is UTF-8"))
                .collect::<Vec<_>>()
        })
        .map(|mut v| {
            v.pop(); // the empty piece after the last NUL
            v
        })
        .collect();
    records.pop(); // after the last \1
    records
}

#[test]
fn accepted_strings_match_bash_argv() {
    let mut runner = TestRunner::new(Config {
        rng_algorithm: proptest::test_runner::RngAlgorithm::ChaCha,
        ..Config::default()
    });
    let hostile = pieces();
    let friendly = quoting();
    let shapes = literal_shapes();
    let mut accepted: Vec<(String, Vec<String>)> = Vec::new();
    let mut refused = 0;
    // Each accepted shape with a character bash leaves literal only in
    // some places, counted so the test shows it met them.
    let mut literal = [0usize; 4];
    for i in 0..CASES * 3 {
        let s = match i % 3 {
            0 => hostile.new_tree(&mut runner).unwrap().current(),
            1 => friendly.new_tree(&mut runner).unwrap().current(),
            _ => shapes.new_tree(&mut runner).unwrap().current(),
        };
        match lex::lex(&s, 8192) {
            Ok(words) => {
                let words: Vec<String> = words.into_iter().map(|w| w.text).collect();
                for (k, c) in ['~', '{', '!', ']'].into_iter().enumerate() {
                    if words.iter().skip(1).any(|w| w.contains(c)) {
                        literal[k] += 1;
                    }
                }
                accepted.push((s, words));
            }
            Err(e) => {
                assert!(e.offset <= s.len(), "offset past the end for {s:?}");
                assert!(!e.hint.is_empty());
                refused += 1;
            }
        }
    }
    for (k, c) in ['~', '{', '!', ']'].into_iter().enumerate() {
        assert!(
            literal[k] >= 500,
            "too few accepted words with `{c}`: {}",
            literal[k]
        );
    }
    assert!(
        accepted.len() >= 15_000,
        "too few accepted strings to mean anything: {}",
        accepted.len()
    );
    let commands: Vec<String> = accepted.iter().map(|(s, _)| s.clone()).collect();
    let bash = bash_argvs(&commands);
    assert_eq!(
        bash.len(),
        accepted.len(),
        "bash printed a different number of records"
    );
    for ((s, ours), theirs) in accepted.iter().zip(&bash) {
        assert_eq!(ours, theirs, "lexer and bash disagree on {s:?}");
    }
    eprintln!(
        "{} strings: {} accepted and equal to bash ({} with a literal ~, {} with braces, {} with !, {} with ]), {refused} refused",
        CASES * 3,
        accepted.len(),
        literal[0],
        literal[1],
        literal[2],
        literal[3]
    );
}

#[test]
fn unquoted_metacharacters_are_refused_with_their_rule() {
    let table = [
        (';', "lex.list"),
        ('&', "lex.list"),
        ('|', "lex.pipe"),
        ('<', "lex.redirect"),
        ('>', "lex.redirect"),
        ('(', "lex.subshell"),
        (')', "lex.subshell"),
        ('$', "lex.expansion"),
        ('`', "lex.expansion"),
        ('*', "lex.glob"),
        ('?', "lex.glob"),
        ('[', "lex.glob"),
    ];
    for (c, rule) in table {
        for (prefix, suffix) in [
            ("echo ", ""),
            ("echo a", "b"),
            ("echo 'q'", "x"),
            ("echo \"q\"", ""),
        ] {
            let s = format!("{prefix}{c}{suffix}");
            let e = lex::lex(&s, 8192).expect_err(&s);
            assert_eq!((e.rule, e.offset), (rule, prefix.len()), "{s:?}");
            // Quoted, the same character is plain text.
            let quoted = format!("echo '{c}'");
            assert_eq!(lex::lex(&quoted, 8192).unwrap()[1].text, c.to_string());
        }
    }
}

/// `~ { } ! ]` are syntax in some places only: refused there (with the
/// offset of the character), literal elsewhere (the differential test
/// compares those with bash).
#[test]
fn context_characters_are_refused_where_bash_reads_them() {
    let refused = [
        ("echo ~", "lex.tilde", 5),
        ("echo ~root", "lex.tilde", 5),
        ("echo ''~", "lex.tilde", 7),
        ("echo a=~", "lex.tilde", 7),
        ("echo a=b:~/x", "lex.tilde", 9),
        ("echo --prefix=~", "lex.tilde", 14),
        ("echo {a,b}", "lex.brace", 5),
        ("echo a{b,c}d", "lex.brace", 6),
        ("echo {1..3}", "lex.brace", 5),
        ("echo x}{a,b}", "lex.brace", 6),
        ("echo {a\\,b}", "lex.brace", 5),
        ("echo !", "lex.bang", 5),
        ("echo !x", "lex.bang", 5),
        ("echo \"\"!x", "lex.bang", 7),
        ("echo '['a]", "lex.glob", 9),
        ("echo \\[a]", "lex.glob", 8),
        ("{ ls; }", "lex.list", 4),
        ("{", "lex.reserved-word", 0),
        ("}", "lex.reserved-word", 0),
        ("!", "lex.bang", 0),
    ];
    for (s, rule, offset) in refused {
        let e = lex::lex(s, 8192).expect_err(s);
        assert_eq!((e.rule, e.offset), (rule, offset), "{s:?}");
    }
    let literal: &[(&str, &[&str])] = &[
        ("git diff HEAD~1", &["git", "diff", "HEAD~1"]),
        ("echo a~b x=a~", &["echo", "a~b", "x=a~"]),
        (
            "git stash show stash@{0}",
            &["git", "stash", "show", "stash@{0}"],
        ),
        (
            "find . -exec cat {} +",
            &["find", ".", "-exec", "cat", "{}", "+"],
        ),
        ("echo { } a{b}c", &["echo", "{", "}", "a{b}c"]),
        ("git commit -m fix!", &["git", "commit", "-m", "fix!"]),
        ("test -n x ]", &["test", "-n", "x", "]"]),
    ];
    for (s, want) in literal {
        let got: Vec<String> = lex::lex(s, 8192)
            .unwrap_or_else(|e| panic!("{s:?}: {e}"))
            .into_iter()
            .map(|w| w.text)
            .collect();
        assert_eq!(got, *want, "{s:?}");
    }
    // And bash agrees.
    let strings: Vec<String> = literal.iter().map(|(s, _)| s.to_string()).collect();
    let bash = bash_argvs(&strings);
    for ((s, want), theirs) in literal.iter().zip(&bash) {
        assert_eq!(theirs, want, "bash reads {s:?} differently");
    }
}
