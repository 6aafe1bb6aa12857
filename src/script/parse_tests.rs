//! Table tests of the parser: accepted scripts and their canonical
//! rendering; refusals with rule and offset.

use super::{parse, render};

fn r(s: &str) -> String {
    match parse(s, 65536) {
        Ok(sc) => render::script(&sc),
        Err(e) => panic!("{s:?} refused: {e}"),
    }
}

fn refused(s: &str) -> (&'static str, usize) {
    match parse(s, 65536) {
        Ok(sc) => panic!("{s:?} accepted as {}", render::script(&sc)),
        Err(e) => (e.rule, e.offset),
    }
}

#[test]
fn lists_and_pipelines() {
    let table: &[(&str, &str)] = &[
        ("ls", "ls"),
        ("ls -la; pwd", "ls -la; pwd"),
        ("a && b || c", "a && b || c"),
        ("a\nb\n\n c ;", "a; b; c"),
        ("a | b |& c", "a | b |& c"),
        ("! a | b", "! a | b"),
        ("! ! a", "a"),
        ("a &&\n b", "a && b"),
        ("a |\n\n b", "a | b"),
        ("ls # comment ; id", "ls"),
        ("echo a#b", "echo a#b"),
        ("echo a;#b\nc", "echo a; c"),
        ("(cd x && ls) ; { a; b; }", "( cd x && ls ); { a; b; }"),
        ("{ a\n}", "{ a; }"),
        ("echo }", "echo }"),
        ("echo {a,b} {} x{", "echo {a,b} {} x{"),
        ("a\\\nb", "ab"),
        (
            "if a; then if b; then c; fi fi",
            "if a; then if b; then c; fi; fi",
        ),
        // `&` ends an and-or list, which then runs in the background.
        ("sleep 1 &", "sleep 1 &"),
        ("a & b", "a & b"),
        ("a &\nb &\n", "a & b &"),
        ("a && b || c & d | e", "a && b || c & d | e"),
        ("{ a & }; ( b & )", "{ a & }; ( b & )"),
        ("if a & then b & fi", "if a & then b & fi"),
        ("case x in a) b & ;; esac", "case x in a) b & ;; esac"),
        ("x=$(a &)", "x=$(a &)"),
        ("a&>f&", "a &>f &"),
        ("echo $! ${!} \"$!\"", "echo ${!} ${!} \"${!}\""),
    ];
    for (i, want) in table {
        assert_eq!(r(i), *want, "input {i:?}");
    }
}

#[test]
fn arithmetic_and_conditionals() {
    let table: &[(&str, &str)] = &[
        (
            "echo $((1+2)) \"$(( x * 2 ))\"",
            "echo $((1+2)) \"$((x * 2 ))\"",
        ),
        ("echo $(( (1+2) * $y ))", "echo $(((1+2) * ${y} ))"),
        ("(( x++ )) && echo $((x))", "(( x++  )) && echo $((x))"),
        ("((a = \"1\" + $(echo 2)))", "(( a = 1 + $(echo 2) ))"),
        ("(())", "((  ))"),
        ("[[ -f x && $y == *.txt ]]", "[[ -f x && ${y} == *.txt ]]"),
        (
            "[[ a < b || ( ! -n \"$z\" ) ]]",
            "[[ a < b || ( ! -n \"${z}\" ) ]]",
        ),
        (
            "[[ $v =~ ^(a|b)+[0-9]$ ]] && echo y",
            "[[ ${v} =~ ^(a|b)+[0-9]$ ]] && echo y",
        ),
        ("[[ x =~ 'a b'c ]]", "[[ x =~ 'a b'c ]]"),
        // Accepted by bash too: an operand may look like an operator.
        ("[[ -z -z ]]", "[[ -z -z ]]"),
        ("[[ -f ]]x ]]", "[[ -f ]]x ]]"),
        ("[[ ! ! a ]]", "[[ ! ! a ]]"),
        ("[[ ! ( a ) ]]", "[[ ! ( a ) ]]"),
        ("[[ a == -f || b ]]", "[[ a == -f || b ]]"),
    ];
    for (i, want) in table {
        assert_eq!(r(i), *want, "input {i:?}");
    }
}

#[test]
fn words_and_quoting() {
    let table: &[(&str, &str)] = &[
        ("echo 'a b' \"c d\" e\\ f", "echo 'a b' 'c d' e' 'f"),
        ("echo \"a\\\"b\\$c\\`d\\\\e\\nf\"", "echo 'a\"b$c`d\\e\\nf'"),
        ("echo \"\"", "echo ''"),
        ("echo $x ${y} \"$z\"", "echo ${x} ${y} \"${z}\""),
        ("echo $? $$ $#", "echo ${?} ${$} ${#}"),
        (
            "echo ${x:-a b} ${x-d} ${x:=v} ${x:+alt} ${x:?err}",
            "echo ${x:-a b} ${x-d} ${x:=v} ${x:+alt} ${x:?err}",
        ),
        (
            "echo ${#x} ${x#a*} ${x##*/} ${x%.py} ${x%%.*}",
            "echo ${#x} ${x#a*} ${x##*/} ${x%.py} ${x%%.*}",
        ),
        ("echo \"${x:-'a'}\"", "echo \"${x:-'a'}\""),
        ("echo ${x:-{a}} ${y-${z-}}", "echo ${x:-{a}} ${y-${z-}}"),
        ("echo \"${x:-'a}b'}\"", "echo \"${x:-'a}b'}\""),
        (
            "echo $(ls -la | wc -l) `pwd`",
            "echo $(ls -la | wc -l) $(pwd)",
        ),
        ("echo \"$(cat f)\"", "echo \"$(cat f)\""),
        ("echo `echo \\`echo hi\\``", "echo $(echo $(echo hi))"),
        ("echo $'a\\tb\\x41\\101'", "echo 'a\tbAA'"),
        ("echo $\"hi\"", "echo 'hi'"),
        ("echo a$ $ \"$\"", "echo a$ $ '$'"),
        ("echo *.rs ~/x a=~", "echo *.rs ~/x a=~"),
        (
            "python3 -c \"import sys\nprint(1)\"",
            "python3 -c 'import sys\nprint(1)'",
        ),
        ("echo a\\", "echo a'\\'"),
    ];
    for (i, want) in table {
        assert_eq!(r(i), *want, "input {i:?}");
    }
}

#[test]
fn assignments_and_redirections() {
    let table: &[(&str, &str)] = &[
        ("A=1 B=\"x y\" env", "A=1 B='x y' env"),
        ("A=1", "A=1"),
        ("A+=x", "A+=x"),
        ("echo A=1", "echo A=1"),
        ("echo hi > f 2>>g &> h &>> i", "echo hi >f 2>>g &>h &>>i"),
        (
            "cmd 2>&1 >&2 3>&- <&3 0<f <>rw >|c",
            "cmd 2>&1 >&2 3>&- <&3 0<f <>rw >|c",
        ),
        ("echo >&/dev/null", "echo &>/dev/null"),
        (">f echo", "echo >f"),
        ("cat <<< \"$x\"", "cat <<<\"${x}\""),
        ("{ a; } > f 2>&1", "{ a; } >f 2>&1"),
        ("echo a2>f", "echo a2 >f"),
    ];
    for (i, want) in table {
        assert_eq!(r(i), *want, "input {i:?}");
    }
}

#[test]
fn here_documents() {
    let table: &[(&str, &str)] = &[
        (
            "cat <<'EOF' > f.py\nprint('$x')\nEOF\necho done",
            "cat <<<\"print('\\$x')\" >f.py; echo done",
        ),
        ("cat <<EOF\na $x \\$y\nEOF", "cat <<<\"a ${x} \\$y\""),
        ("cat <<-EOF\n\t\ta\n\tEOF\nls", "cat <<<\"a\"; ls"),
        (
            "cat <<A; cat <<B\n1\nA\n2\nB\n",
            "cat <<<\"1\"; cat <<<\"2\"",
        ),
        ("cat <<EOF\nnever closed", "cat <<<\"never closed\""),
        ("cat <<EOF\na\\\nb\nEOF", "cat <<<\"ab\""),
        ("x=$(cat <<EOF\nin\nEOF\n)", "x=$(cat <<<\"in\")"),
        ("cat <<\\EOF\n$x\nEOF", "cat <<<\"\\$x\""),
    ];
    for (i, want) in table {
        assert_eq!(r(i), *want, "input {i:?}");
    }
}

#[test]
fn control_flow() {
    let table: &[(&str, &str)] = &[
        ("if a; then b; fi", "if a; then b; fi"),
        (
            "if a\nthen b\nelif c; then d; else e; fi > f",
            "if a; then b; elif c; then d; else e; fi >f",
        ),
        ("while a; do b; done", "while a; do b; done"),
        ("until a; do b; done", "until a; do b; done"),
        (
            "for x in a 'b c' *.py; do echo $x; done",
            "for x in a 'b c' *.py; do echo ${x}; done",
        ),
        ("for x\ndo echo; done", "for x; do echo; done"),
        (
            "case $x in a|b) echo ab;; (c) ;; *) d;& esac",
            "case ${x} in a|b) echo ab; ;; c) ;; *) d; ;& esac",
        ),
        (
            "case x in\n a)\n echo\n ;;\nesac",
            "case x in a) echo; ;; esac",
        ),
    ];
    for (i, want) in table {
        assert_eq!(r(i), *want, "input {i:?}");
    }
}

#[test]
fn refusals() {
    let table: &[(&str, &str, usize)] = &[
        ("a & ; b", "syntax.error", 4),
        ("& a", "syntax.error", 0),
        ("a && & b", "syntax.error", 5),
        ("a & & b", "syntax.error", 4),
        ("echo ${!x[1]}", "syntax.unsupported", 5),
        ("echo ${x@Q}", "syntax.unsupported", 5),
        ("cat <(ls", "lex.unterminated", 4),
        // Function definitions: the body is a compound command.
        ("f() ls", "syntax.error", 4),
        ("function { ls; }", "syntax.error", 0),
        ("a=1 f() { ls; }", "syntax.error", 5),
        ("f/x() { ls; }", "syntax.error", 3),
        ("echo $[1+2]", "syntax.arithmetic", 5),
        ("echo $((1+2)", "syntax.error", 11),
        ("echo $((1+2", "lex.unterminated", 5),
        // A quote inside is read as bash reads it: `))` inside it does not
        // close the expression.
        ("echo $(( n * 2' + 1 ))", "lex.unterminated", 14),
        ("(( 'x ))", "lex.unterminated", 3),
        // An escaped `)` does not close the expression, as in bash.
        ("echo $(( 1 \\)) + 1", "syntax.error", 13),
        ("((x++)", "syntax.error", 5),
        ("for ((i=0;i<3)); do :; done", "syntax.error", 0),
        ("for ((i=0;i<3;i++)) echo", "syntax.error", 20),
        ("[[ -f x", "syntax.error", 7),
        ("[[ a =~ ]]", "syntax.error", 10),
        ("[[ a ]] b", "syntax.error", 8),
        // bash's grammar inside [[ ]]: `]]` ends only as a whole word.
        ("[[ a ]]x || [[ b ]]", "syntax.error", 5),
        ("[[ ]]", "syntax.error", 3),
        ("[[ ! ]]", "syntax.error", 5),
        ("[[ a && ]]", "syntax.error", 8),
        ("[[ a b ]]", "syntax.error", 5),
        ("[[ -f ]]", "syntax.error", 6),
        ("[[ -f && b ]]", "syntax.error", 6),
        ("[[ ( a ]]", "syntax.error", 7),
        ("[[ a ) ]]", "syntax.error", 5),
        ("[[ ( ) ]]", "syntax.error", 5),
        ("[[ a == b c ]]", "syntax.error", 10),
        ("[[ \"==\" a ]]", "syntax.error", 8),
        ("[[ a -q b ]]", "syntax.error", 5),
        ("time", "syntax.unsupported", 0),
        ("a=(1 2) ls", "syntax.unsupported", 0),
        ("a=(1; 2)", "syntax.error", 4),
        ("a=(1 2", "lex.unterminated", 2),
        ("echo a=(1)", "syntax.error", 7),
        ("cs[f e", "syntax.unsupported", 0),
        ("x=1 a[1]=2 ls", "syntax.unsupported", 4),
        ("echo ${a[1}", "lex.unterminated", 5),
        ("echo ${a[]}", "syntax.error", 5),
        ("echo ${#a[@]x}", "syntax.error", 5),
        ("echo {fd}>f", "syntax.unsupported", 5),
        ("ls |", "syntax.error", 4),
        ("ls &&", "syntax.error", 5),
        ("; ls", "syntax.error", 0),
        ("ls ;;", "syntax.error", 3),
        ("{ ls }", "syntax.error", 6),
        ("( )", "syntax.error", 2),
        ("if a; then fi", "syntax.error", 11),
        ("echo (a)", "syntax.error", 6),
        ("fi", "syntax.error", 0),
        ("]]", "syntax.error", 0),
        ("ls; in", "syntax.error", 4),
        // A reserved word after a block's redirections is a plain word.
        ("if a; then if b; then c; fi > f fi", "syntax.error", 32),
        ("{ { a; } > f }", "syntax.error", 13),
        ("while a; do { b; } 2>&1 done", "syntax.error", 24),
        ("echo 'a", "lex.unterminated", 5),
        ("echo \"a", "lex.unterminated", 5),
        ("echo $(ls", "lex.unterminated", 5),
        ("echo `ls", "lex.unterminated", 5),
        ("echo ${x", "lex.unterminated", 5),
        ("echo \"${x:='}\"", "lex.unterminated", 11),
        ("", "lex.empty", 0),
        ("  # only a comment", "lex.empty", 0),
        ("ls\r\n", "lex.newline", 2),
        ("ls \u{202e}", "lex.bidi", 3),
        ("ls\0", "lex.nul", 2),
    ];
    for (i, rule, off) in table {
        assert_eq!(refused(i), (*rule, *off), "input {i:?}");
    }
}

#[test]
fn arrays_and_newer_expansions() {
    let table: &[(&str, &str)] = &[
        ("a=(x y \"z w\")", "a=(x y 'z w')"),
        ("a=(\n  x # one\n  y\n)", "a=(x y)"),
        ("a+=(*.py) b=()", "a+=(*.py) b=()"),
        ("a=([2]=b [0]=a c)", "a=([2]=b [0]=a c)"),
        ("a[i+1]=v a[$k]+=w", "a[i+1]=v a[${k}]+=w"),
        (
            "echo \"${a[@]}\" ${a[*]} ${a[-1]}",
            "echo \"${a[@]}\" ${a[*]} ${a[-1]}",
        ),
        (
            "echo ${#a[@]} ${#a[2]} ${!a[@]} ${!a[*]}",
            "echo ${#a[@]} ${#a[2]} ${!a[@]} ${!a[*]}",
        ),
        ("echo ${a[\"k y\"]} ${a[$(f)]}", "echo ${a[k y]} ${a[$(f)]}"),
        (
            "echo ${a[@]:1:2} ${x:(-1)} ${x: -2}",
            "echo ${a[@]:1:2} ${x:(-1)} ${x: -2}",
        ),
        (
            "echo ${x/a/b} ${x//a} ${x/#a/b} ${x/%a/b}",
            "echo ${x/a/b} ${x//a} ${x/#a/b} ${x/%a/b}",
        ),
        ("echo ${x//\\//-} ${x/a/\\&}", "echo ${x//'/'/-} ${x/a/'&'}"),
        (
            "echo ${x^} ${x^^} ${x,} ${x,,[A-C]}",
            "echo ${x^} ${x^^} ${x,} ${x,,[A-C]}",
        ),
        ("echo ${!name}", "echo ${!name}"),
        ("declare -a a=(1 2) b", "declare -a a=(1 2) b"),
        ("local a+=(x)", "local a+=(x)"),
        ("echo a[1] b[@]", "echo a[1] b[@]"),
        (
            "for ((i=0; i<3; i++)); do :; done",
            "for ((i=0; i<3; i++)); do :; done",
        ),
        (
            "for (( ; ; ))\ndo break; done",
            "for ((; ; )); do break; done",
        ),
        (
            "for ((i=0;i<2;i++)) { echo $i; }",
            "for ((i=0; i<2; i++)); do echo ${i}; done",
        ),
        (
            "time ls | wc; time -p sleep 1",
            "time ls | wc; time -p sleep 1",
        ),
        ("time ! ls", "time ! ls"),
    ];
    for (i, want) in table {
        assert_eq!(r(i), *want, "input {i:?}");
    }
}

#[test]
fn deep_nesting_is_refused_not_overflowed() {
    let s = format!("{}ls{}", "( ".repeat(500), ")".repeat(500));
    assert_eq!(refused(&s).0, "syntax.unsupported");
    let s = format!("{}ls{}", "$(echo ".repeat(500), ")".repeat(500));
    assert_eq!(refused(&s).0, "syntax.unsupported");
    let s = "{ ".repeat(500);
    assert!(parse(&s, 1 << 20).is_err());
}

#[test]
fn rendering_reparses_to_itself() {
    for s in [
        "a && b | c; { d; } > f",
        "echo \"${x:-'a'}\" $(ls) 'q'",
        "case $x in a|b) echo;; esac",
        "for i in 1 2; do echo $i; done",
        "{ a & } & b & c",
        "case $x in a) b & ;; esac &",
        "a=(1 \"2 3\" [5]=x $y) b[i+1]+=z; echo \"${a[@]}\" ${a[*]} ${#a[@]} ${!a[@]} ${a[$i]}",
        "echo ${x/a/b} \"${x//\\//-}\" ${x/#p} ${x/%s/&} ${x^^} ${x,} ${x:1:2} ${x: -1} ${!n}",
        "for ((i = 0; i < 3; i++)); do echo $i; done; time -p ls | wc",
        "declare -a a=(1 2); local -A m=([k]=v)",
    ] {
        let once = r(s);
        assert_eq!(r(&once), once, "input {s:?}");
    }
}

#[test]
fn simple_commands_are_numbered_in_source_order() {
    let s = parse("a $(b) | c; d", 1000).unwrap();
    let mut ids = Vec::new();
    super::ast::each_simple(&s, &s.body, &mut |c| ids.push((c.id, c.offset)));
    // Substitutions are parsed (and numbered) before the command holding them.
    assert_eq!(ids, vec![(0, 4), (1, 0), (2, 9), (3, 12)]);
    assert_eq!(s.simple_commands, 4);
}

#[test]
fn the_interpreter_job_carries_any_policy() {
    use crate::policy::{EXAMPLE_POLICY, Policy, Source};
    for text in [EXAMPLE_POLICY, crate::policy::DEFAULT_POLICY] {
        let p = Policy::parse(text, Source::Embedded).unwrap();
        let job = super::interp::Job {
            script: "ls | wc -l".into(),
            max_bytes: 8192,
            policy: p.clone(),
            workspace: "/tmp/x".into(),
            resolved: vec![None, None],
        };
        let json = serde_json::to_vec(&job).unwrap();
        let back: super::interp::Job = serde_json::from_slice(&json).unwrap();
        assert_eq!(back.policy.to_toml(), p.to_toml());
    }
}

#[test]
fn an_assignment_shaped_word_after_append_both_in_a_redirection_only_command() {
    // bash refuses these (its lexer reads the target as an assignment
    // word); found by the script_parse fuzzer's bash differential.
    for (s, at) in [
        (">c &>> x=1", 7),
        ("&>>c&>>ccx=$s", 7),
        (">c >d &>> x+=1", 10),
        ("! >c &>> a_b=", 9),
    ] {
        assert_eq!(refused(s), ("syntax.error", at), "{s}");
    }
    // What bash accepts stays accepted.
    for s in [
        ">c &> x=1",
        "echo &>> x=1",
        "&>> x=1",
        "x=2 >c &>> x=1",
        ">c x=2 &>> y=1",
        ">c &>> \"x=1\"",
        ">c &>> 1x=1",
        ">c &>> =1",
    ] {
        r(s);
    }
}

#[test]
fn an_escaped_single_quote_in_a_double_quoted_operand_opens_nothing() {
    // Found by the script_parse fuzzer's bash differential: bash pairs
    // single quotes inside "${x:=...}" but skips an escaped one.
    r("echo \"${x:=\\'}\" 'c'");
    r("echo \"${x:-a\\'b'c'}\"");
    r("echo \"${x#\\'}\"");
    assert_eq!(refused("echo \"${x:=\\\\'}\" c").0, "lex.unterminated");
}

#[test]
fn process_substitution_syntax_inside_an_operand_is_refused() {
    // bash reads `>(` here as a process substitution whose `)` it then
    // waits for: found by the script_parse fuzzer's bash differential.
    assert_eq!(
        refused("echo \"${x:=>(a}\""),
        ("syntax.process-substitution", 11)
    );
    assert_eq!(refused("echo ${x:-<(a}").0, "syntax.process-substitution");
    r("echo \"${x:=(a}\"");
    r("echo \"${x:-a>b}\"");
}

#[test]
fn a_line_continuation_right_after_a_dollar_is_refused() {
    // bash joins the lines first (`$\<newline>[` is `$[`): found by the
    // script_parse fuzzer's bash differential.
    assert_eq!(refused("echo c11$\\\n[ ").0, "syntax.unsupported");
    assert_eq!(refused("echo \"$\\\nHOME\"").0, "syntax.unsupported");
    r("echo a\\\nb");
}

#[test]
fn ansi_c_quoting_inside_a_double_quoted_operand_is_refused() {
    // bash reads `$'...'` there, escapes included: found by the
    // script_parse fuzzer's bash differential.
    assert_eq!(refused("echo \"${x:=$'}\"c\\'}\"").0, "syntax.unsupported");
    r("echo \"${x:=$y}\"");
}

#[test]
fn verbatim_keeps_arithmetic_text_as_written() {
    for src in ["((x))", "((;x)) && ((  y ))", "(( i += 1, j = i ** 2 )) >f"] {
        let s = crate::script::parse(src, 8192).unwrap();
        assert_eq!(
            crate::script::render::verbatim(&s, src).as_deref(),
            Some(src),
            "{src}"
        );
    }
}

#[test]
fn process_substitution_is_a_word_or_part_of_one() {
    let table: &[(&str, &str)] = &[
        ("diff <(sort a) <(sort b)", "diff <(sort a) <(sort b)"),
        ("cat < <(ls)", "cat < <(ls)"),
        (
            "while read -r l; do echo $l; done < <(find . -name x)",
            "while read -r l; do echo ${l}; done < <(find . -name x)",
        ),
        ("tee >(wc -l > n) >/dev/null", "tee >(wc -l >n) >/dev/null"),
        // bash reads one anywhere in a word, digits before it included.
        ("echo a<(b)c 2>(x) <(a)<(b)", "echo a<(b)c 2>(x) <(a)<(b)"),
        ("cat <(a | b; c && d &)", "cat <(a | b; c && d &)"),
        ("x=$(cat <(echo a))", "x=$(cat <(echo a))"),
        ("cat <(\nls\n)", "cat <(ls)"),
        (
            "cat <( echo ')' ) <(case a in a) echo x;; esac)",
            "cat <(echo ')') <(case a in a) echo x; ;; esac)",
        ),
        ("echo \"<(a)\" '>(b)' x\\<y", "echo '<(a)' '>(b)' x'<'y"),
    ];
    for (i, want) in table {
        assert_eq!(r(i), *want, "input {i:?}");
        // The rendering reads back as itself.
        assert_eq!(r(want), *want, "rendering of {i:?}");
    }
}

#[test]
fn process_substitution_bodies_are_visited_as_commands() {
    let s = parse("diff <(sort a) >(id) < <(ls)", 65536).unwrap();
    let mut names = Vec::new();
    crate::script::ast::each_simple(&s, &s.body, &mut |c| {
        names.push(c.words[0].literal().unwrap())
    });
    assert_eq!(names, ["sort", "id", "ls", "diff"]);
}

#[test]
fn malformed_process_substitutions_are_refused() {
    assert_eq!(refused("cat <(ls"), ("lex.unterminated", 4));
    assert_eq!(refused("cat <(ls; fi)").0, "syntax.error");
    // bash makes an empty one vanish from the command line.
    assert_eq!(refused("cat <() x"), ("syntax.unsupported", 4));
    // `<<(` and `>>(` are operators followed by `(`, as in bash.
    assert_eq!(refused("cat <<(ls)").0, "syntax.error");
    assert_eq!(refused("echo >>(cat)").0, "syntax.error");
    assert_eq!(
        refused("echo ${x:-<(ls)}"),
        ("syntax.process-substitution", 10)
    );
}
