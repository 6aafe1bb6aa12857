//! Differential test of compound commands: generated scripts over the
//! supported grammar and bash's builtins (`echo`, `printf`, `test`, `[[ ]]`,
//! arithmetic, `read`, `IFS`, `command -v`, `type`, ...), each run by
//! `bash --norc --noprofile -c` in one scratch directory and by `agent-rsh
//! run` in an identical one; stdout, stderr (with the shells' own message
//! prefixes made equal), the exit status and the resulting files must be
//! equal in every case. No stage of a pipeline of several stages writes a
//! file: the stages run at the same time, in bash as in agent-rsh.
//!
//! A quarter of the cases run a generated script as a file, written into
//! both directories first (`s.sh`, executable, with no first line,
//! `#!/bin/sh`, `#!/bin/bash` or `#!/usr/bin/env bash`): `bash s.sh ARGS`,
//! `sh s.sh ARGS`, `./s.sh ARGS`, `source s.sh ARGS`, `. ./s.sh ARGS`, or
//! as the text of `bash -c '...' nm ARGS` / `sh -c ...`; its scripts use
//! the positional parameters, `shift`, `getopts`, `return` (an error
//! outside a sourced file), `exit`, `set -e` and traps, and the outer
//! string may set `--` parameters, export or not, or prefix an assignment.
//! agent-rsh runs `sh` on its bash-like interpreter (docs/scripts.md); a
//! Debian `sh` is dash, which has no arrays, `[[ ]]` or `local -a` and
//! words its messages otherwise, so bash's side runs each `sh` form as
//! `bash` (and a `#!/bin/sh` file as `#!/bin/bash`): the comparison is
//! with what agent-rsh promises.
//!
//! SCRIPT_CASES sets the number of scripts (default 4,000), SCRIPT_SEED
//! the first seed; a failure prints the script and its seed. The default
//! run takes about 2 minutes on 2 shared cores (4,000 in 104 s, release
//! build, before the script-file cases; about as long with them).
//!
//! Measured with the script-file cases (release build, 2 cores shared,
//! load 7 to 12): seeds 1 to 11,678 in 419 s, stopped at 5 mismatches, all
//! of the generator's (messages whose `s.sh: line N: ` prefix went
//! through `sort`, `cut` or `tr`; an `eval $c` after `IFS=o`), since
//! narrowed; then seeds 11,679 to about 17,100 in 177 s, stopped at 5
//! mismatches: a lone `printf` whose format holds `|` (coreutils'
//! program ran; since narrowed), `${!n}` with `n` unset under `set -u`
//! (bash's `invalid indirect expansion` abandons the line, agent-rsh
//! stopped: since fixed), a file written through two descriptors (`&> f`
//! around `echo > f`) whose NUL-filled length follows a message's
//! prefix, an unset `$1` under `set -u` in a function (the
//! known message difference, docs/scripts.md), and bash's own internal
//! error (`pop_scope: head of shell_variables not a temporary environment
//! scope`) after `Z=pre source` of a file that ends by `set -e` inside a
//! function call. Both since narrowed (NULs counted as one; no prefix
//! assignment in front of `source`).
//!
//! Then seeds 1 to 18,696 in 1,095 s (release build, two busy loops and a
//! full test run beside it), stopped at 5 mismatches: three of the
//! harness's (agent-rsh's diagnosis of a "No such file or directory" on
//! stderr; bash's `environment: ` prefix; a "Text file busy" exec of a
//! file another thread of the test had open as it forked), since handled;
//! `(( N += M ))` under `set -u` named M where bash names N (the left
//! side is read first: since fixed); and `${arr[-1]}` of an unset array
//! under `set -e`, where bash warns `bad array subscript` and ends the
//! script with 1 and agent-rsh expands it empty: still open (docs/scripts.md).
//! After those fixes seeds 18,697 to 21,096 passed (160 s); a run from
//! seed 21,097 stopped after about 8,000 (256 s) at 6 mismatches, two of
//! them messages piped through `grep -c line` (bash's carry `line N: `,
//! agent-rsh's do not), the others a SIGPIPE status, a 127 against 0 and
//! a loop bash's side ran to its time-out.
//!
//! Then agent-rsh's messages took bash's `NAME: line N: `; `${a[-1]}` of
//! an unset name became a bad subscript (ending the shell under `set -e`),
//! `${#a[@]}` of an unset array under `set -u` abandons the line, unquoted
//! `$@`/`$*`/`${a[*]}` join with IFS's first character and split, pushd
//! names itself, and two nested `for (( ))` loops of the generator no
//! longer share `k` (bash looped forever on such a script too). Seeds
//! 21,097 to about 34,600 then stopped at 4 mismatches, all fixed above;
//! seeds 1 to 20,000 passed with 0 mismatches (401 s). With `readonly` in
//! the generator, two runs found bash's `set -e` rule for an assignment
//! to a read-only name (the shell ends, even left of `||`), since
//! followed; after it, seeds 1 to 20,000: 0 mismatches (328 s, release
//! build, 2 cores). Seeds 20,001 to 40,000 then found a read-only name
//! assigned in a file sourced left of `||` (bash goes on there) and a
//! stage's `1>&2` racing the last stage into one `&>` file (the
//! generator's: no stage writes into stderr now); after both, seeds
//! 20,001 to 40,000: 0 mismatches (385 s, a fuzz build beside it).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::common::BIN;
const PROGRAMS: &[&str] = &[
    "echo", "printf", "cat", "grep", "wc", "sort", "head", "tail", "tr", "cut", "uniq", "seq",
    "mkdir", "touch", "rm", "test",
];

/// xorshift64*: small, seedable, no dependency.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn chance(&mut self, pct: usize) -> bool {
        self.below(100) < pct
    }
    fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[self.below(xs.len())]
    }
}

struct Gen {
    r: Rng,
    depth: usize,
    /// Here-document bodies waiting for the end of the current line.
    pending: Vec<String>,
    loops: usize,
    piped: usize,
    /// The script began with `cd .`, which sets OLDPWD, so `cd -` works
    /// (without it `cd -` fails with a shell message, which differs from
    /// bash's by design).
    oldpwd: bool,
    /// Inside a stage of a pipeline of several stages: the stages run at
    /// the same time, so nothing there may write a file (another stage may
    /// read or write it; which comes first is the scheduler's choice).
    concurrent: usize,
    /// Generating the text of a script file (or of `sh -c`): positional
    /// parameters, `shift`, `return` and `set -e` come up more often.
    body: bool,
    /// An EXIT trap may be set: no `$(( ))` error in a stage of a
    /// pipeline after it (bash then runs the shell's EXIT trap in that
    /// stage's process too, and reports `wait_for: No record of
    /// process`).
    trapped: bool,
}

/// One generated case: the command string agent-rsh runs, the one bash
/// runs, and the script file `s.sh` written into both workspaces first.
struct Case {
    script: String,
    /// `script` with each `sh` that runs the generated text as `bash`.
    reference: String,
    /// The text of `s.sh`: agent-rsh's, then bash's (its `#!/bin/sh` line
    /// as `#!/bin/bash`).
    file: Option<(String, String)>,
}

/// Arguments a script file or `sh -c` string is run with.
const ARGS: &[&str] = &[
    "a", "'b c'", "''", "-a", "-b", "v", "3", "*.txt", "-x", "\"q\"",
];

/// Files commands read and write (`sub` holds the same ones, so a `cd sub`
/// changes nothing about which exist). Shell error messages differ from
/// bash's by design, so the scripts avoid them: inputs always exist and
/// outputs are in the current directory.
const FILES: &[&str] = &["a.txt", "b.txt", "c.log", "new.txt", "out", "sp ace"];
const INPUTS: &[&str] = &["a.txt", "b.txt", "c.log"];
const VARS: &[&str] = &["X", "Y", "Z", "lst"];

impl Gen {
    fn new(seed: u64) -> Gen {
        Gen {
            r: Rng::new(seed),
            depth: 0,
            pending: Vec::new(),
            loops: 0,
            piped: 0,
            oldpwd: false,
            concurrent: 0,
            body: false,
            trapped: false,
        }
    }

    fn file(&mut self) -> String {
        let f = self.r.pick(FILES);
        if f.contains(' ') {
            format!("'{f}'")
        } else {
            f.to_string()
        }
    }

    fn plain_word(&mut self) -> String {
        self.r
            .pick(&[
                "a", "b", "hello", "x1", "foo", "bar", "A", "3", "10", "-", "a.txt", "%s", "x=y",
                "a,b", "+", "@", "ab:cd", "Q", "e",
            ])
            .to_string()
    }

    /// An argument word, exercising quoting and expansions.
    fn word(&mut self) -> String {
        match self.r.below(30) {
            0..=7 => self.plain_word(),
            8 => format!("'{} {}'", self.plain_word(), self.plain_word()),
            9 => format!("\"{}  {}\"", self.plain_word(), self.plain_word()),
            10 => format!("${}", self.r.pick(VARS)),
            11 => format!("\"${}\"", self.r.pick(VARS)),
            12 => format!("${{{}:-{}}}", self.r.pick(VARS), self.plain_word()),
            13 => format!("\"${{{}:+set}}\"", self.r.pick(VARS)),
            14 => format!("${{#{}}}", self.r.pick(VARS)),
            15 => "$?".into(),
            16 => self
                .r
                .pick(&[
                    "*.txt", "*", "s*", "?.txt", "[ab]*", "sub/*", "*.none", "[!a]*", ".h*",
                ])
                .to_string(),
            17 => self
                .r
                .pick(&[
                    "{a,b}",
                    "x{1,2}y",
                    "{1..3}",
                    "{c..a}",
                    "{a,b}{c,d}",
                    "{x}",
                    "pre{,1}",
                ])
                .to_string(),
            18 => format!("$({})", self.inner_command()),
            19 => format!("\"$({})\"", self.inner_command()),
            20 => "~".into(),
            21 => "~/sub".into(),
            22 => format!("a\\ {}", self.plain_word()),
            23 => format!(
                "{}\"{}\"'{}'",
                self.plain_word(),
                self.plain_word(),
                self.plain_word()
            ),
            24 => format!("\"${{{}#*.}}\"", self.r.pick(VARS)),
            25 => format!("${{{}%.*}}", self.r.pick(VARS)),
            26 => "\"a\\\"b\\\\c\\$d\"".into(),
            27 => format!("`echo {}`", self.plain_word()),
            28 => "$'t\\tq'".into(),
            _ => "''".into(),
        }
    }

    /// A short command for substitutions.
    fn inner_command(&mut self) -> String {
        match self.r.below(6) {
            0 => format!("echo {}", self.word_simple()),
            1 => format!("cat {} | wc -l", self.file()),
            2 => "seq 3".into(),
            3 => format!("printf '%s-' {} {}", self.word_simple(), self.word_simple()),
            4 => format!("head -n 1 {}", self.file()),
            _ => "pwd".into(),
        }
    }

    fn word_simple(&mut self) -> String {
        match self.r.below(4) {
            0 => format!("${}", self.r.pick(VARS)),
            _ => self.plain_word(),
        }
    }

    fn words(&mut self, max: usize) -> String {
        let n = self.r.below(max + 1);
        (0..n).map(|_| self.word()).collect::<Vec<_>>().join(" ")
    }

    fn redirect(&mut self) -> String {
        if self.concurrent > 0 {
            return match self.r.below(7) {
                0 => "2>/dev/null".into(),
                1 => "2>&1".into(),
                2 => format!("< {}", self.r.pick(INPUTS)),
                3 => format!("<<< {}", self.word()),
                4 => ">/dev/null".into(),
                // Not into stderr: when an outer `&> f` makes it the
                // same file as the last stage's output, which write
                // comes first is the scheduler's choice.
                5 => "2>/dev/null".into(),
                _ => "2>&1".into(),
            };
        }
        match self.r.below(18) {
            0 => format!("> {}", self.file()),
            1 => format!(">> {}", self.file()),
            2 => "2>/dev/null".into(),
            3 => "2>&1".into(),
            4 => format!("2> {}", self.file()),
            5 => format!("< {}", self.r.pick(INPUTS)),
            6 => format!("<<< {}", self.word()),
            7 => format!("&> {}", self.file()),
            8 => ">/dev/null".into(),
            9 => format!(">{}", self.file()),
            10 => {
                let quoted = self.r.chance(50);
                let body = if quoted {
                    "body $X `q` \\ 'a'\nline 2".to_string()
                } else {
                    "body $X ${Y:-y} \\$lit \"q\"\n$(echo sub)".to_string()
                };
                self.pending.push(format!("{body}\nEOF"));
                if quoted {
                    "<<'EOF'".into()
                } else {
                    "<<EOF".into()
                }
            }
            11 => format!(">| {}", self.file()),
            12 => format!("2>> {}", self.file()),
            13 => format!("&>> {}", self.file()),
            // stdout and stderr swapped through fd 3, which is closed after.
            14 => "3>&1 1>&2 2>&3 3>&-".into(),
            15 => format!("3< {} 0<&3", self.r.pick(INPUTS)),
            16 => {
                // Leading tabs of the body and the delimiter line go.
                let quoted = self.r.chance(50);
                self.pending
                    .push("\tbody $X `echo q`\n\t\tline 2\n  spaces stay\n\tEOF".to_string());
                if quoted {
                    "<<-'EOF'".into()
                } else {
                    "<<-EOF".into()
                }
            }
            _ => "1>&2".into(),
        }
    }

    fn simple(&mut self) -> String {
        let mut s = String::new();

        // One in four: a builtin of bash's own.
        let mut pick = if self.r.chance(if self.body { 35 } else { 25 }) {
            28
        } else {
            self.r.below(29)
        };
        // Commands that write files, and the loops that do, stay out of
        // concurrent stages.
        while self.concurrent > 0 && matches!(pick, 17..=19) {
            pick = self.r.below(29);
        }
        // A prefix assignment, but not before a keyword or a list.
        if pick != 28 && self.r.chance(8) {
            s.push_str(&format!("{}={} ", self.r.pick(VARS), self.word_simple()));
        }
        let cmd = match pick {
            0..=3 => format!("echo {}", self.words(3)),
            4 => format!("echo -n {}", self.words(2)),
            5 => format!("printf '%s\\n' {}", self.words(3)),
            6 => format!("printf '[%s]' {}", self.words(2)),
            7 => format!("cat {}", self.file()),
            8 => format!(
                "grep {}{} {}",
                self.r.pick(&["", "-c ", "-v ", "-i "]),
                self.r.pick(&["a", "line", "x", "^b", "[0-9]"]),
                self.file()
            ),
            9 =>
            // Lines only: a shell's message may be in the input, and bash's
            // carry `line N: ` where agent-rsh's do not.
            {
                "wc -l".to_string()
            }
            10 => format!("sort {}", self.r.pick(&["", "-r", "-n", "-u"])),
            11 => format!("head -n {}", self.r.below(3) + 1),
            12 => format!("tail -n {}", self.r.below(3) + 1),
            13 => format!("tr {}", self.r.pick(&["a-z A-Z", "-d a", "a b"])),
            14 => format!("cut {}", self.r.pick(&["-c1-2", "-d: -f1", "-c2"])),
            15 => format!("uniq {}", self.r.pick(&["", "-c"])),
            16 => format!("seq {}", self.r.pick(&["3", "2 4", "0"])),
            17 => format!("mkdir -p {}", self.r.pick(&["d1", "d1/d2", "sub"])),
            18 => format!("touch {}", self.file()),
            19 => format!("rm -f {}", self.r.pick(&["new.txt", "out", "'sp ace'"])),
            20 => format!(
                "test {}",
                self.r.pick(&[
                    "-f a.txt",
                    "-d sub",
                    "-f none",
                    "-n \"$X\"",
                    "-z \"$Y\"",
                    "a = a",
                    "a = b"
                ])
            ),
            21 => self.r.pick(&["true", "false", ":", "pwd"]).to_string(),
            // Not `cd` alone nor `cd ~`: in a persistent workspace HOME is
            // its state directory, where bash goes and the interpreter does
            // not (bare `cd` returns to the workspace root; docs/scripts.md).
            22 => format!(
                "cd {}",
                self.r
                    .pick(&["sub", ".", "sub/", "sub/.", "\"$PWD\"", "\"$PWD/sub\""])
            ),
            23 => format!("{}={}", self.r.pick(VARS), self.word()),
            24 => format!("export {}={}", self.r.pick(VARS), self.word_simple()),
            // It prints where it goes.
            25 if self.oldpwd => "cd -".into(),
            26 => format!("unset {}", self.r.pick(VARS)),
            // Rarely: it ends the script (or its subshell, or its stage).
            27 if self.r.chance(30) => format!("exit {}", self.r.pick(&["0", "1", "3"])),
            28 => self.builtin(),
            _ => format!("echo {} {}", self.word(), self.word()),
        };
        s.push_str(&cmd);
        if self.r.chance(25) {
            s.push(' ');
            s.push_str(&self.redirect());
        }
        s
    }

    /// An arithmetic expression over the variables and numbers.
    fn arith(&mut self) -> String {
        let operand = |g: &mut Gen| -> String {
            match g.r.below(6) {
                0 => g.r.pick(&["N", "M", "i"]).to_string(),
                1 => format!("${}", g.r.pick(&["N", "M"])),
                2 => g.r.pick(&["0x1f", "010", "2#101", "36#z", "0"]).to_string(),
                _ => (g.r.below(12) as i64 - 2).to_string(),
            }
        };
        let mut e = operand(self);
        for _ in 0..self.r.below(3) {
            let op = self.r.pick(&[
                " + ", "-", " * ", " / ", " % ", " ** ", " << ", ">>", " & ", "|", " ^ ", " < ",
                " >= ", " == ", " != ", " && ", " || ", ",",
            ]);
            e = format!("{e}{op}{}", operand(self));
        }
        match self.r.below(10) {
            0 => format!("({e}) * 2"),
            1 => format!("!{e}"),
            2 => format!("{e} ? 1 : -1"),
            3 => format!("N += {e}"),
            4 => "M++".to_string(),
            5 => "--N".to_string(),
            6 => format!("i = {e}"),
            _ => e,
        }
    }

    /// One of bash's builtins, with arguments bash and agent-rsh must treat
    /// alike.
    fn builtin(&mut self) -> String {
        if self.body && self.r.chance(30) {
            return self.positional();
        }
        match self.r.below(26) {
            0 => self
                .r
                .pick(&[
                    "echo -e 'a\\tb\\x41\\0101\\c zz'",
                    "echo -n -e 'x\\ny'",
                    "echo -E 'p\\tq'",
                    "echo -ne 'r'",
                    "echo -- -n",
                    "echo -x y",
                    // Two commands, so the second is always the builtin: alone, an
                    // allowed echo is coreutils', which reads `\101` as octal.
                    "echo -e 'tab\\there \\x4a\\x4B \\0101'; echo -e 'x \\101'",
                ])
                .to_string(),
            1 => {
                let f = self.r.pick(&[
                    "'%0.s-'",
                    "'%5.2f|%d|%x\\n'",
                    "'%b\\n'",
                    "'%q\\n'",
                    "'%s=%s\\n'",
                    "'%-4s|%4s|\\n'",
                    "'%c%c\\n'",
                    "'%e %g %G\\n'",
                    "'%i %u %o %X %#x %+d\\n'",
                    "'%05.1f %.3s %%\\n'",
                    "'[%*d]\\n'",
                    "'%d\\n'",
                ]);
                let args = (0..self.r.below(4))
                    .map(|_| {
                        self.r
                            .pick(&[
                                "1",
                                "-3",
                                "255",
                                "3.14159",
                                "12345.678",
                                "0.00001",
                                "abc",
                                "'a b'",
                                "x",
                                "'\\t\\101'",
                                "\"$X\"",
                                "010",
                                "0x1F",
                                "''",
                                "\"'A\"",
                            ])
                            .to_string()
                    })
                    .collect::<Vec<_>>()
                    .join(" ");
                if self.r.chance(20) {
                    format!("printf -v {} {f} {args}; echo \"${0}\"", self.r.pick(VARS))
                } else {
                    format!("printf {f} {args}")
                }
            }
            2 => {
                let t = self.r.pick(&[
                    "-f a.txt",
                    "-d sub",
                    "-e none",
                    "-s c.log",
                    "-r a.txt",
                    "-w a.txt",
                    "-x a.txt",
                    "-L a.txt",
                    "\"$X\" = a",
                    "3 -lt 10",
                    "a \\< b",
                    "! -f none",
                    "-n \"$Y\" -a -z \"$Z\"",
                    "\\( -f a.txt \\) -o -d x",
                    "a.txt -ef ./a.txt",
                    "abc -eq 1",
                    "-f",
                    "a =",
                    "a b c",
                    "\"$lst\"",
                    "1 -ge 1 -a ! 2 -ne 2",
                    "-z",
                ]);
                if self.r.chance(50) {
                    format!("[ {t} ]")
                } else {
                    format!("test {t}")
                }
            }
            3 => format!(
                "[[ {} ]]",
                self.r.pick(&[
                    "-f a.txt && -d sub",
                    "$X == a*",
                    "\"$X\" == \"a*\"",
                    "a.txt == *.txt",
                    "-z $Y || $Z != x",
                    "! -e none",
                    "2 -lt 10",
                    "b > a",
                    "( -n x ) && ! -z x",
                    "$lst",
                    "$X",
                    "x$Y == x",
                    "1+1 -eq 2",
                    "$X =~ ^[a-z]+$",
                    "$Z != *.*",
                ])
            ),
            4 => format!(
                "[[ {} =~ {} ]] && echo \"$BASH_REMATCH\"",
                self.word_simple(),
                self.r
                    .pick(&["^a", "[0-9]+", "b|x", "^(a|f)o*", "\\.", "'a b'", "o$"])
            ),
            5 if !(self.trapped && self.concurrent > 0) => {
                format!("echo $(( {} ))", self.arith())
            }
            6 => format!("(( {} )) && echo yes", self.arith()),
            7 => format!(
                "N={}; M=$((N * {})); echo $N $M",
                self.r.below(9),
                self.r.below(5)
            ),
            8 => format!(
                "let {} N+=1; echo $N",
                self.r.pick(&["'M = 2 * 3'", "i++", "M=N"])
            ),
            9 => self
                .r
                .pick(&[
                    "read -r A B <<< 'x y z'; echo \"[$A][$B]\"",
                    "echo 'a:b:c' | { IFS=: read -r p q; echo \"$q\"; }",
                    "while read -r L; do echo \"<$L>\"; done < a.txt",
                    "read X < c.log; echo \"$X\"",
                    "read -n 3 X <<< abcdef; echo $X",
                    "read -d : X <<< 'ab:cd'; echo $X",
                    "read X < /dev/null; echo $? \"[$X]\"",
                    "printf 'a\\nb' | while read -r L; do echo $L; done",
                    "read <<< '  sp  '; echo \"[$REPLY]\"",
                    "IFS=, read -r A B <<< 'x,y,z'; echo $A+$B",
                    "read A <<< 'back\\ slash\\'; echo \"$A\"",
                    "read -r A <<< 'back\\ slash'; echo \"$A\"",
                    // Not `cat b.txt`: the loop's output may be appended to b.txt,
                    // and reading a file while writing it is a race in bash too.
                    "printf 'b:2\\na:1\\n' | while IFS=: read -r k v; do echo \"$v-$k\"; done",
                ])
                .to_string(),
            10 => self
                .r
                .pick(&[
                    "IFS=:; X='a:b::c'; printf '[%s]' $X; echo",
                    "printf '%q\\n' \"$IFS\"",
                    "IFS=; printf '[%s]' $lst; echo",
                    "IFS=' :'; X=' : a :b '; printf '[%s]' $X; echo",
                    "unset IFS; X=' p  q '; printf '[%s]' $X; echo",
                    "IFS=o; printf '[%s]' $(echo foo boo); echo",
                ])
                .to_string(),
            11 => self
                .r
                .pick(&[
                    "command -v cat",
                    "command -v echo",
                    "command -v none || echo missing",
                    "command -V cd",
                    "type echo",
                    "type -t cat",
                    "type -t if",
                    "type -P cat",
                    "type none",
                    "hash cat",
                    "hash none",
                    "type -t [[",
                    "command -v grep sort",
                ])
                .to_string(),
            12 => self
                .r
                .pick(&[
                    "shift",
                    "jobs",
                    "local x=1",
                    "declare X=5; echo $X",
                    "declare -x Y=1; echo $Y",
                    "shift 0",
                ])
                .to_string(),
            13 if !(self.trapped && self.concurrent > 0) => format!(
                "echo $(( {} ))",
                self.r.pick(&["1/0", "2 + ", "X", "N / (M - M)", "1 ? 2"])
            ),
            14 => format!(
                "(( {} )); echo $?",
                self.r.pick(&["1/0", "0", "N", "X + 1", "a b"])
            ),
            16 => self.arrays(),
            17 => self.param_ops(),
            18 if self.loops < 2 => {
                self.loops += 1;
                // `k` (`j` in a second loop) is no other loop's
                // variable; the loop ends by its condition or the break.
                let k = ["k", "j"][self.loops - 1];
                format!(
                    "for (( {k} = {}; {k} {} {}; {k}{} )); do {}; (( {k} >= 4 )) && break; done",
                    self.r.below(3),
                    self.r.pick(&["<", "<=", "!="]),
                    self.r.below(5),
                    self.r.pick(&["++", " += 2", "++, N++"]),
                    self.simple()
                )
            }
            18 => "pushd sub > /dev/null && pwd && popd > /dev/null && pwd".to_string(),
            20 => self.functions(),
            21 => self.getopts(),
            22 => self.traps(),
            23 => self
                .r
                .pick(&[
                    "eval 'echo $X; Y=ev'; echo $Y",
                    // IFS as bash's default: split otherwise, `$c` could
                    // name a program that is not there (`ech`).
                    "c='echo \"a  b\"'; eval \"$c\"; unset IFS; eval $c",
                    "eval \"N=3; echo \\$((N * 2))\"",
                    "eval 'for e in 1 2; do echo $e; done'",
                    "eval echo {a,b}",
                    "eval false; echo $?",
                    "eval; echo $?",
                    "{ f() { eval 'return 5'; echo no; }; f; echo $?; }",
                    "eval 'echo \"$#\" \"${1-}\"'",
                    "eval '(( 2 > 1 ))' && echo yes",
                ])
                .to_string(),
            24 => self
                .r
                .pick(&[
                    // Set first: the umask the test runs under is not the
                    // script's business.
                    "umask 027; umask; umask -S",
                    "umask 022; (umask 077; umask -p); umask",
                    "umask 0; umask -S; umask 22; umask",
                    "read -r -d '' X <<< 'a b'; echo \"$? [$X]\"",
                    "printf 'p\\0q r\\0' | while read -r -d '' L; do echo \"<$L>\"; done",
                    "read -r -a arr -d , <<< 'p q,r'; echo ${#arr[@]} \"${arr[1]}\"",
                    "read -r X Y <<< ' lead  trail '; echo \"[$X][$Y]\"",
                    // `readonly`: RO and RA are no other snippet's.
                    "readonly RO=1; RO=2; echo never",
                    "readonly RO=k; echo $RO; RO=v true; echo $? $RO",
                    "readonly -a RA=(1 2); RA[0]=3; echo never",
                    "readonly RO=1; (( RO++ )); echo $?; unset RO; echo $? $RO",
                    "readonly RO=1; export RO=2; echo $? $RO; read RO <<< x; echo $?",
                ])
                .to_string(),
            25 => self.positional(),
            _ => format!(
                "for i in 1 2 3; do (( i % 2 )) && continue; echo $((i * {})); done",
                self.r.below(4)
            ),
        }
    }

    /// The positional parameters of a script file, `sh -c` or `source`
    /// (at the top level of the command string there are none).
    fn positional(&mut self) -> String {
        match self.r.below(13) {
            0 => "echo \"$#\" \"${1-none}\" \"${2-none}\"".into(),
            1 => "printf '[%s]' \"$@\"; echo".into(),
            2 => "printf '[%s]' $* \"$*\"; echo".into(),
            3 => "for a; do echo \"<$a>\"; done".into(),
            4 => "shift && echo \"$# $*\"".into(),
            5 => format!("shift {}; echo $? $#", self.r.pick(&["0", "1", "2", "5"])),
            6 => "set -- x 'y z'; echo $# \"$2\"".into(),
            7 => "echo \"${@:2}\" \"${1:-empty}\"".into(),
            8 => "echo \"$0\"".into(),
            // Rarely: it ends a sourced file or a function, and is an
            // error anywhere else.
            9 if self.r.chance(30) => format!("return {}", self.r.pick(&["", "0", "2"])),
            10 => "{ f() { echo \"$# $1\"; shift; echo \"$*\"; }; f \"$@\"; f x; echo \"$#\"; }".into(),
            11 => "while getopts ab:x o; do echo \"$o ${OPTARG-}\"; done; shift $((OPTIND - 1)); echo \"$#\"".into(),
            _ => "while [ $# -gt 0 ]; do echo \"arg $1\"; shift; done".into(),
        }
    }

    /// Functions: `local`, `declare`/`typeset` (local in a function, as in
    /// bash, unless `-g`), dynamic scope, recursion, `return`.
    fn functions(&mut self) -> String {
        // In braces: the definition runs whenever the calls do (after
        // `||` neither may; `f: command not found` is bash's message).
        format!("{{ {}; }}", self.function_use())
    }

    fn function_use(&mut self) -> String {
        match self.r.below(12) {
            0 => format!(
                "f() {{ local v=${{1-none}} w; w=$#; echo \"$v $w\"; }}; f {}; echo \"${{v-u}} ${{w-u}}\"",
                self.words(2)
            ),
            1 => "f() { declare d=${1:-e}; declare -a da=(1 2); typeset t=t; echo \"$d ${#da[@]} $t\"; }; f x; echo \"${d-u} ${da-u} ${t-u}\"".into(),
            2 => "f() { declare -g G=g; local L=l; echo $G$L; }; f; echo \"${G-u}${L-u}\"".into(),
            3 => "g() { echo \"${v-none}\"; }; f() { local v=in; g; }; f; g".into(),
            4 => "f() { local X=1; local X; echo ${X-u}; X=2; }; X=0; f; echo $X".into(),
            5 => "f() { local -x E=e; bash -c 'echo ${E-u}'; }; f; echo ${E-u}".into(),
            6 => "f() { return 3; echo no; }; f; echo $?".into(),
            7 => "f() { local n=$1; (( n > 0 )) || return 0; echo $n; f $((n - 1)); }; f 3".into(),
            8 => "f() { local -a arr=(x y); arr+=(z); echo ${#arr[@]}; }; arr=(o); f; echo ${#arr[@]}".into(),
            9 => "X=out; f() { declare X=in; declare -p X; unset X; echo ${X-gone}; }; f; echo $X".into(),
            10 => "f() { typeset t=1; t+=2; echo $t; declare -x D=d; }; f; echo ${t-u} ${D-u}".into(),
            // Not `type f`: bash prints the function's text, in its own
            // layout.
            _ => "f() { echo \"f:$*\"; }; type -t f; command -v f; f a b".into(),
        }
    }

    /// `getopts` over `set --` words, in a function with a local OPTIND,
    /// and with its words given.
    fn getopts(&mut self) -> String {
        let spec = self.r.pick(&["ab:c", ":ab:", "a", "xb:"]);
        let args = (0..self.r.below(4))
            .map(|_| {
                self.r.pick(&[
                    "-a", "-b v", "-bv", "-ac", "-z", "--", "-b", "file", "-ca", "-x",
                ])
            })
            .collect::<Vec<_>>()
            .join(" ");
        match self.r.below(3) {
            0 => format!(
                "set -- {args}; while getopts {spec} o; do echo \"$o[${{OPTARG-}}]\"; done; echo \"$OPTIND\"; shift $((OPTIND - 1)); echo \"rest: $*\""
            ),
            1 => format!(
                "{{ f() {{ local OPTIND o; while getopts {spec} o; do echo \"$o=${{OPTARG-}}\"; done; echo $OPTIND; }}; f {args}; f -a; }}"
            ),
            _ => format!("getopts {spec} o {args}; echo $? \"$o\" $OPTIND"),
        }
    }

    /// `trap ... EXIT`: run when the shell (or subshell, or script file)
    /// ends.
    fn traps(&mut self) -> String {
        self.trapped = true;
        if self.concurrent > 0 {
            // In a stage of a pipeline, bash runs the EXIT trap a stage
            // set when the stage is a simple command or `{ ...; }`, but
            // not when it is `if`, `case` or a loop (they end through
            // another path in bash); agent-rsh runs it in every one. A
            // subshell of its own is the same everywhere.
            return self
                .r
                .pick(&["( trap 'echo sub $?' EXIT; false )", "trap -p EXIT"])
                .into();
        }
        match self.r.below(5) {
            0 => format!("trap 'echo bye $?' EXIT; {}", self.simple()),
            1 => "trap 'echo one' EXIT; trap - EXIT; trap -p EXIT; echo none".into(),
            2 => "( trap 'echo sub $?' EXIT; false )".into(),
            3 => "trap 'echo t1' EXIT; trap 'echo t2' EXIT; trap -p EXIT".into(),
            _ => "trap 'echo \"bye $X\"' EXIT".into(),
        }
    }

    /// Indexed arrays: literals (split and globbed), elements, `[@]` and
    /// `[*]` quoted and not, counts, indices, slices, `+=`, `unset`,
    /// `mapfile`, `read -a`, `BASH_REMATCH`.
    fn arrays(&mut self) -> String {
        let lit = format!("arr=({} {} {})", self.word(), self.word(), self.word());
        let use_ = match self.r.below(12) {
            0 => "printf '<%s>' \"${arr[@]}\"; echo".to_string(),
            1 => "printf '<%s>' ${arr[*]} \"${arr[*]}\"; echo".to_string(),
            2 => format!(
                "echo \"${{#arr[@]}}\" \"${{arr[{}]}}\" ${{!arr[@]}}",
                self.r.pick(&["0", "1", "-1", "i+1", "5", "$N"])
            ),
            3 => format!(
                "arr+=({}); arr[7]={}; echo ${{!arr[@]}} \"${{arr[*]}}\"",
                self.word(),
                self.plain_word()
            ),
            4 => "unset 'arr[1]'; echo ${#arr[@]} ${!arr[@]}; arr+=(z); echo ${!arr[@]}".into(),
            5 => format!(
                "for e in \"${{arr[@]}}\"; do echo \"[$e]\"; done; echo \"${{arr[@]:{}}}\"",
                self.r.pick(&["1", "0:2", "1:1", " -1", "5"])
            ),
            6 => format!(
                "mapfile -t arr < {}; echo ${{#arr[@]}} \"${{arr[-1]}}\"",
                self.r.pick(INPUTS)
            ),
            7 => format!(
                "IFS={} read -ra arr <<< {}; echo ${{#arr[@]}} \"${{arr[0]}}\"",
                self.r.pick(&[":", "' '", "','"]),
                self.r.pick(&["'a b  c'", "x:y::z", "'p,q'", "''"])
            ),
            8 => format!(
                "[[ {} =~ ([a-z]+)([0-9]*) ]] && echo \"${{BASH_REMATCH[@]}}\" ${{#BASH_REMATCH[@]}}",
                self.word()
            ),
            9 => "printf '%s\\n' \"${arr[@]/#/-}\" \"${arr[@]%.txt}\" ${arr[@]^}".into(),
            10 => "f() { local -a loc=(\"$@\"); echo ${#loc[@]} \"${loc[*]}\"; }; f \"${arr[@]}\""
                .into(),
            _ => "sum=0; for ((k = 0; k < ${#arr[@]}; k++)); do (( sum += k )); done; echo $sum"
                .into(),
        };
        format!("{lit}; {use_}")
    }

    /// `${x/p/r}` and its forms, `${x:o:l}`, `${x^^}` and friends.
    fn param_ops(&mut self) -> String {
        let v = self.r.pick(VARS);
        match self.r.below(6) {
            0 => format!(
                "echo \"${{{v}/{}/{}}}\" ${{{v}//{}}}",
                self.r.pick(&["a", "*.", "?", "[ab]", ".", "b*"]),
                self.r.pick(&["X", "", "<&>", "\\&", "-"]),
                self.r.pick(&["a", ".", " ", "[qr]"])
            ),
            1 => format!(
                "echo \"${{{v}/#{}/P}}\" \"${{{v}/%{}/S}}\"",
                self.r.pick(&["a", "*.", "", "?"]),
                self.r.pick(&["c", ".*", "", "r"])
            ),
            2 => format!(
                "echo \"${{{v}:{}}}\" \"${{{v}:{}:{}}}\"",
                self.r.pick(&["0", "1", " -2", "(-1)", "9"]),
                self.r.pick(&["0", "2", "N"]),
                self.r.pick(&["1", "0", "-1", "2"])
            ),
            3 => format!("echo ${{{v}^^}} \"${{{v},,}}\" ${{{v}^}} \"${{{v}^^[ab]}}\""),
            4 => format!("n={v}; echo \"${{!n}}\" ${{#{v}}}"),
            _ => format!(
                "set -- {} {} {}; echo $# \"${{@:2}}\" ${{@: -1}} \"${{*/a/A}}\"",
                self.plain_word(),
                self.plain_word(),
                self.plain_word()
            ),
        }
    }

    fn command(&mut self) -> String {
        if self.depth >= 2 || self.r.chance(if self.depth == 0 { 70 } else { 85 }) {
            return self.simple();
        }
        self.depth += 1;
        let c = match self.r.below(9) {
            0 => format!("{{ {}; }}", self.list(2)),
            1 => format!("( {} )", self.list(2)),
            2 => format!(
                "if {}; then {}; else {}; fi",
                self.pipeline(),
                self.list(2),
                self.list(1)
            ),
            3 => format!("if {}; then {}; fi", self.pipeline(), self.list(2)),
            4 if self.loops < 2 => {
                self.loops += 1;
                format!(
                    "for {} in {}; do {}; done",
                    self.r.pick(VARS),
                    self.words(3),
                    self.list(2)
                )
            }
            5 => format!(
                "case {} in a|b) {};; *.txt) {};; *) {};; esac",
                self.word(),
                self.simple(),
                self.simple(),
                self.simple()
            ),
            6 if self.loops < 2 && self.concurrent == 0 => {
                self.loops += 1;
                "while test ! -f stop; do touch stop; echo looped; done".to_string()
            }
            7 if self.loops < 2 && self.concurrent == 0 => {
                self.loops += 1;
                format!(
                    "until test -f {f}; do touch {f}; echo {}; done",
                    self.word(),
                    f = self.r.pick(&["stop", "halt"])
                )
            }
            _ => self.simple(),
        };
        self.depth -= 1;
        if self.r.chance(10) && !c.starts_with("echo") {
            format!("{c} {}", self.redirect_no_heredoc())
        } else {
            c
        }
    }

    fn redirect_no_heredoc(&mut self) -> String {
        loop {
            let r = self.redirect();
            if !r.starts_with("<<") || r.starts_with("<<<") {
                return r;
            }
            self.pending.pop();
        }
    }

    fn pipeline(&mut self) -> String {
        let mut s = String::new();
        if self.r.chance(8) {
            s.push_str("! ");
        }
        let extra = match self.r.below(10) {
            0..=6 => 0,
            7..=8 => 1,
            _ => 2,
        };
        if extra > 0 {
            self.concurrent += 1;
        }
        s.push_str(&self.command());
        if extra > 0 {
            self.concurrent -= 1;
        }
        // Later stages read their input, so no stage races a reader that
        // already left (bash and agent-rsh would both be at the mercy of
        // SIGPIPE timing).
        // `|&` only after a simple command: after a compound one, its
        // stages' stdout and stderr would race into the pipe.
        let simple_left = !s.contains(['{', '(', ';']);
        let mut merged = false;
        for _ in 0..extra {
            if simple_left && self.r.chance(15) {
                s.push_str(" |& ");
                merged = true;
            } else {
                s.push_str(" | ");
            }
            // After `|&` a shell's message is in the data: no `tr` (it
            // would change the prefix that the comparison makes equal)
            // nor `sort` (bash's `line N: ` could order it otherwise).
            let mut f = self.filter();
            while merged && (f.starts_with("tr ") || f.contains("sort")) {
                f = self.filter();
            }
            s.push_str(&f);
        }
        s
    }

    fn filter(&mut self) -> String {
        loop {
            let f = self.filter_any();
            // In a script file a shell's message starts `s.sh: line N: `
            // in bash (`nm: ` for `-c`), `agent-rsh: ` in agent-rsh: no
            // filter there that cuts, sorts or changes it before the
            // comparison makes the prefixes equal.
            if !self.body || !(f.contains("sort") || f.contains("cut") || f.contains("tr ")) {
                return f;
            }
        }
    }

    fn filter_any(&mut self) -> String {
        let f = match self.r.below(11) {
            0 => "cat".to_string(),
            1 =>
            // Lines only: a shell's message may be in the input, and bash's
            // carry `line N: ` where agent-rsh's do not.
            {
                "wc -l".to_string()
            }
            2 => format!("sort {}", self.r.pick(&["", "-r", "-n", "-u"])),
            3 => format!("tr {}", self.r.pick(&["a-z A-Z", "-d a", "a b"])),
            4 => format!("cut {}", self.r.pick(&["-c1-2", "-d: -f1", "-c2"])),
            5 => format!("uniq {}", self.r.pick(&["", "-c"])),
            6 => format!("grep {}", self.r.pick(&["a", "-v x", "-c line", "^b"])),
            7 => format!("tail -n {}", self.r.below(3) + 1),
            // A plain word: a later stage writes nothing to stderr, where
            // it would race the first stage's messages.
            8 => format!("{{ cat; echo {}; }}", self.plain_word()),
            9 => "( sort; echo end )".to_string(),
            _ => {
                self.piped += 1;
                // A dotfile: no glob of the script sees it appear.
                format!("cat > .piped{}", self.piped)
            }
        };
        if self.r.chance(10) {
            format!("{f} 2>/dev/null")
        } else {
            f
        }
    }

    fn and_or(&mut self) -> String {
        let mut s = self.pipeline();
        for _ in 0..self.r.below(3).saturating_sub(1) {
            s.push_str(if self.r.chance(50) { " && " } else { " || " });
            s.push_str(&self.pipeline());
        }
        s
    }

    fn list(&mut self, max: usize) -> String {
        let n = 1 + self.r.below(max);
        (0..n).map(|_| self.and_or()).collect::<Vec<_>>().join("; ")
    }

    fn script(&mut self) -> String {
        let mut lines = Vec::new();
        if self.r.chance(40) {
            lines.push("cd .".to_string());
            self.oldpwd = true;
        }
        if self.r.chance(if self.body { 25 } else { 10 }) {
            // Not `set -u` in a script file: its `$1` may be unset, and
            // bash's message names `$1` where agent-rsh's names `1`
            // (docs/scripts.md).
            let sets: &[&str] = if self.body {
                &["set -e", "set -o pipefail", "set -eo pipefail"]
            } else {
                &["set -e", "set -o pipefail", "set -eo pipefail", "set -u"]
            };
            let set = self.r.pick(sets);
            if set == "set -u" {
                lines.push("X=1 Y= Z=a.b.c lst='q r'".to_string());
            }
            lines.push(set.to_string());
        }
        for _ in 0..1 + self.r.below(3) {
            let line = self.list(2);
            lines.push(line);
            for body in std::mem::take(&mut self.pending) {
                lines.push(body);
            }
        }
        if self.r.chance(5) {
            lines.push(
                self.r
                    .pick(&[
                        "exec echo last",
                        "exec >> out 2>&1; echo logged",
                        "exec cat a.txt",
                    ])
                    .to_string(),
            );
        }
        lines.join("\n")
    }
}

impl Gen {
    /// A case: most often a command string, else a generated script run
    /// as a file (`bash s.sh`, `sh s.sh`, `./s.sh`), sourced (`source`,
    /// `.`), or as the text of `bash -c`/`sh -c`, with arguments.
    ///
    /// `sh` runs on agent-rsh's bash-like interpreter (docs/scripts.md),
    /// while Debian's `sh` is dash, which differs from bash in much the
    /// scripts use (arrays, `[[ ]]`, `local -a`, messages): bash's side
    /// runs each `sh` form as `bash`, and a `#!/bin/sh` file as
    /// `#!/bin/bash`, so that the comparison is with what agent-rsh
    /// promises.
    fn case(&mut self) -> Case {
        if !self.r.chance(25) {
            let mut script = self.script();
            if !script.contains('\n') && !script.trim_end().ends_with('&') {
                // A string that is one command of literal words runs the
                // program of that name where the policy allows it (a
                // single `printf` is coreutils', which differs from
                // bash's builtin): a second command keeps the builtin.
                script.push_str("; :");
            }
            return Case {
                reference: script.clone(),
                script,
                file: None,
            };
        }
        self.body = true;
        let body = self.script();
        self.body = false;
        // The outer string's own state: the body's `cd .` is not its.
        self.oldpwd = false;
        self.loops = 0;
        let args: Vec<&str> = (0..self.r.below(4)).map(|_| self.r.pick(ARGS)).collect();
        let args = args.iter().map(|a| format!(" {a}")).collect::<String>();
        let mut pre = String::new();
        if self.r.chance(30) {
            // What a sourced file without arguments sees.
            pre.push_str("set -- p 'q r'; ");
        }
        if self.r.chance(20) {
            // A new shell sees only the exported one.
            pre.push_str("export X=exp; Y=notexp; ");
        }
        if self.r.chance(15) {
            pre.push_str("Z=pre ");
        }
        let quoted = format!("'{}'", body.replace('\'', "'\\''"));
        let shebang = |g: &mut Gen| -> (&'static str, &'static str) {
            match g.r.below(5) {
                0 => ("", ""),
                1 => ("#!/bin/sh\n", "#!/bin/bash\n"),
                2 => ("#!/bin/bash\n", "#!/bin/bash\n"),
                3 => ("#!/usr/bin/env bash\n", "#!/usr/bin/env bash\n"),
                _ => ("#!/bin/sh\n\n# a comment\n", "#!/bin/bash\n\n# a comment\n"),
            }
        };
        let (call, reference, file) = match self.r.below(9) {
            0 | 1 => {
                let (a, _) = shebang(self);
                (
                    format!("bash s.sh{args}"),
                    format!("bash s.sh{args}"),
                    Some((format!("{a}{body}"), format!("{a}{body}"))),
                )
            }
            2 => {
                let (a, b) = shebang(self);
                (
                    format!("sh s.sh{args}"),
                    format!("bash s.sh{args}"),
                    Some((format!("{a}{body}"), format!("{b}{body}"))),
                )
            }
            3 | 4 => {
                let (a, b) = shebang(self);
                (
                    format!("./s.sh{args}"),
                    format!("./s.sh{args}"),
                    Some((format!("{a}{body}"), format!("{b}{body}"))),
                )
            }
            5 | 6 => {
                let how = self.r.pick(&["source s.sh", ". ./s.sh", "source ./s.sh"]);
                (
                    format!("{how}{args}"),
                    format!("{how}{args}"),
                    Some((body.clone(), body.clone())),
                )
            }
            // Always named: `sh -c TEXT` alone has `$0` `sh`, which bash's
            // side would print as `bash`.
            7 => (
                format!("bash -c {quoted} nm{args}"),
                format!("bash -c {quoted} nm{args}"),
                None,
            ),
            _ => (
                format!("sh -c {quoted} nm{args}"),
                format!("bash -c {quoted} nm{args}"),
                None,
            ),
        };
        let tail = self
            .r
            .pick(&[
                "",
                "; echo \"st=$?\"",
                "; echo \"st=$? $# ${1-} ${X-u} ${Y-u} ${Z-u}\"",
                // Not `tr`: a message's prefix goes through it.
                " | cat -n",
                " || echo \"failed $?\"",
            ])
            .to_string();
        // bash fails on its own (`pop_scope: head of shell_variables not a
        // temporary environment scope`) when a file sourced with an
        // assignment in front ends under `set -e` in a function call.
        if call.starts_with("source") || call.starts_with(". ") {
            pre = pre.replace("Z=pre ", "");
        }
        Case {
            script: format!("{pre}{call}{tail}"),
            reference: format!("{pre}{reference}{tail}"),
            file,
        }
    }
}

fn setup(dir: &Path) {
    std::fs::write(dir.join("a.txt"), "line one\nbeta\nline 3\nalpha\n").unwrap();
    std::fs::write(dir.join("b.txt"), "b:2\na:1\nb:2\n10\n9\n").unwrap();
    std::fs::write(dir.join("c.log"), "x\n").unwrap();
    std::fs::write(dir.join(".hid"), "hidden\n").unwrap();
    std::fs::create_dir(dir.join("sub")).unwrap();
    std::fs::write(dir.join("sub/d.txt"), "in sub\n").unwrap();
    for f in ["a.txt", "b.txt", "c.log"] {
        std::fs::copy(dir.join(f), dir.join("sub").join(f)).unwrap();
    }
    std::fs::write(dir.join("sp ace"), "spaced\n").unwrap();
}

/// Output as compared: the shells' own message prefixes are the only
/// difference allowed.
/// Both shells' message prefixes become `<SH>: `, wherever they stand in a
/// line: an error can follow output printed without a newline (`echo -n`).
fn normal(text: &str, _dir: &Path) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while !rest.is_empty() {
        let (skip, len) = [
            ("agent-rsh: line ", true),
            ("bash: line ", true),
            // A script file's and a named `bash -c`'s.
            ("./s.sh: line ", true),
            ("s.sh: line ", true),
            ("nm: line ", true),
            ("agent-rsh: ", false),
            ("bash: ", false),
            // bash's name for where an error in a function called from a
            // `!` pipeline inside a group happened.
            ("environment: ", false),
        ]
        .iter()
        .filter_map(|&(p, numbered)| {
            let at = rest.find(p)?;
            let after = &rest[at + p.len()..];
            if !numbered {
                return Some((at, p.len()));
            }
            let digits = after.bytes().take_while(u8::is_ascii_digit).count();
            (digits > 0 && after[digits..].starts_with(": ")).then_some((at, p.len() + digits + 2))
        })
        .min_by_key(|&(at, len)| (at, std::cmp::Reverse(len)))
        .unwrap_or((rest.len(), 0));
        out.push_str(&rest[..skip]);
        if len > 0 {
            out.push_str("<SH>: ");
        }
        rest = &rest[skip + len..];
    }
    // bash names an unset positional parameter `$1` under `set -u`,
    // agent-rsh `1` (docs/scripts.md, known differences).
    for d in '1'..='9' {
        out = out.replace(
            &format!("${d}: unbound variable"),
            &format!("{d}: unbound variable"),
        );
    }
    // A message that went through a filter (`2>&1 | tr -d a`) keeps
    // bash's `line N: ` after a prefix the filter changed.
    let mut text = out;
    for line in [": line ", ": LINE "] {
        let mut out = String::with_capacity(text.len());
        let mut rest = text.as_str();
        while let Some(at) = rest.find(line) {
            let after = &rest[at + line.len()..];
            let digits = after.bytes().take_while(u8::is_ascii_digit).count();
            out.push_str(&rest[..at + 2]);
            rest = if digits > 0 && after[digits..].starts_with(": ") {
                &after[digits + 2..]
            } else {
                &rest[at + 2..]
            };
        }
        out.push_str(rest);
        text = out;
    }
    text
}

fn tree(dir: &Path) -> BTreeMap<String, String> {
    fn walk(root: &Path, d: &Path, out: &mut BTreeMap<String, String>) {
        for e in std::fs::read_dir(d).unwrap().flatten() {
            let p = e.path();
            let rel = p.strip_prefix(root).unwrap().display().to_string();
            if p.is_dir() {
                out.insert(rel, "<dir>".into());
                walk(root, &p, out);
            } else {
                let text = String::from_utf8_lossy(&std::fs::read(&p).unwrap()).into_owned();
                // A file written through two descriptors (`&> f` around
                // `echo > f`) is padded with NULs up to the other's offset,
                // which follows the length of a message's prefix: a run of
                // NULs counts as one.
                let mut squeezed = String::with_capacity(text.len());
                for ch in text.chars() {
                    if !(ch == '\0' && squeezed.ends_with('\0')) {
                        squeezed.push(ch);
                    }
                }
                out.insert(rel, normal(&squeezed, root));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

struct Outcome {
    stdout: String,
    status: i32,
    files: BTreeMap<String, String>,
    stderr: String,
}

/// The HOME agent-rsh gives a run in the persistent workspace `ws`: its
/// state directory under `$XDG_STATE_HOME` (run_agent sets it beside ws).
fn agent_home(ws: &Path) -> PathBuf {
    ws.parent()
        .unwrap()
        .join("state/agent-rsh/workspaces")
        .join(agent_rsh::workspace::state_leaf(ws))
}

fn run_bash(script: &str, dir: &Path) -> Outcome {
    let home = agent_home(dir);
    std::fs::create_dir_all(&home).unwrap();
    let out = Command::new("timeout")
        // Named agent-rsh ($0), bash's messages start as agent-rsh's do, so a
        // script that filters its own errors (`|& grep ^b`) sees the same text.
        .args([
            "60",
            "bash",
            "--norc",
            "--noprofile",
            "-c",
            script,
            "agent-rsh",
        ])
        .current_dir(dir)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", &home)
        .env("LC_ALL", "C")
        .output()
        .unwrap();
    Outcome {
        stdout: normal(&String::from_utf8_lossy(&out.stdout), dir),
        status: out.status.code().unwrap_or(-1),
        files: tree(dir),
        stderr: normal(&String::from_utf8_lossy(&out.stderr), dir),
    }
}

fn run_agent(script: &str, dir: &Path, policy: &Path) -> Outcome {
    let out = Command::new(BIN)
        .args(["run", "--policy"])
        .arg(policy)
        .arg("--workspace")
        .arg(dir)
        .args(["--timeout", "60000", "--", script])
        .env_clear()
        .env("XDG_STATE_HOME", dir.parent().unwrap().join("state"))
        .env("LC_ALL", "C")
        .output()
        .unwrap();
    Outcome {
        stdout: normal(&String::from_utf8_lossy(&out.stdout), dir),
        status: out.status.code().unwrap_or(-1),
        files: tree(dir),
        // agent-rsh's own notice about the kept workspace is not the
        // script's.
        stderr: normal(&without_notice(&String::from_utf8_lossy(&out.stderr)), dir),
    }
}

/// Stderr without agent-rsh's notice that the workspace was kept (which
/// may follow a last line the script left open).
fn without_notice(text: &str) -> String {
    let mut t = text.to_string();
    // And its diagnosis of a program's "No such file or directory",
    // which bash has no counterpart for.
    for notice in [
        "agent-rsh: workspace kept at ",
        "agent-rsh: warning: \"No such file or directory\" may be",
    ] {
        while let Some(i) = t.find(notice) {
            let end = t[i..].find('\n').map_or(t.len(), |j| i + j + 1);
            t.replace_range(i..end, "");
        }
    }
    t
}

fn compare(seed: u64, policy: &Path) -> Result<(), String> {
    let mut g = Gen::new(seed);
    let case = g.case();
    let script = &case.script;
    let write_file = |ws: &Path, text: &str| {
        let p = ws.join("s.sh");
        std::fs::write(&p, text).unwrap();
        std::fs::set_permissions(&p, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    };
    // One directory, used by bash and then, reset, by agent-rsh: paths
    // in the output (`pwd`, `~`) are the same for both.
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("w");
    // A file just written may be "busy" for an exec: another thread of
    // this test can fork while holding it open for writing (its child
    // keeps the descriptor until its own exec). The machine's doing, not
    // a shell's: the side is run again from a fresh directory.
    let busy = |o: &Outcome| o.stderr.contains("Text file busy");
    let fresh = |text: Option<&String>| {
        let _ = std::fs::remove_dir_all(&ws);
        let _ = std::fs::remove_dir_all(dir.path().join("state"));
        std::fs::create_dir(&ws).unwrap();
        setup(&ws);
        if let Some(t) = text {
            write_file(&ws, t);
        }
    };
    fresh(case.file.as_ref().map(|(_, theirs)| theirs));
    let mut want = run_bash(&case.reference, &ws);
    for _ in 0..5 {
        if !busy(&want) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
        fresh(case.file.as_ref().map(|(_, theirs)| theirs));
        want = run_bash(&case.reference, &ws);
    }
    if let Some((ours, theirs)) = &case.file
        && want.files.get("s.sh") == Some(&normal(theirs, &ws))
    {
        // The same file, as each side was given it.
        want.files.insert("s.sh".into(), normal(ours, &ws));
    }
    fresh(case.file.as_ref().map(|(ours, _)| ours));
    let mut got = run_agent(script, &ws, policy);
    for _ in 0..5 {
        if !busy(&got) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
        fresh(case.file.as_ref().map(|(ours, _)| ours));
        got = run_agent(script, &ws, policy);
    }
    if want.stdout != got.stdout
        || want.stderr != got.stderr
        || want.status != got.status
        || want.files != got.files
    {
        let mut diff = String::new();
        for (k, v) in want.files.iter() {
            if got.files.get(k) != Some(v) {
                diff.push_str(&format!(
                    "  {k}: bash {v:?} / agent-rsh {:?}\n",
                    got.files.get(k)
                ));
            }
        }
        for k in got.files.keys().filter(|k| !want.files.contains_key(*k)) {
            diff.push_str(&format!("  {k}: only agent-rsh {:?}\n", got.files[k]));
        }
        return Err(format!(
            "seed {seed}\n--- script ---\n{script}\n--- s.sh ---\n{}\n--- bash: status {} stdout {:?}\n stderr {:?}\n--- agent-rsh: status {} stdout {:?}\n stderr {:?}\n--- files\n{diff}",
            case.file.as_ref().map_or("(none)", |f| f.0.as_str()),
            want.status,
            want.stdout,
            want.stderr,
            got.status,
            got.stdout,
            got.stderr
        ));
    }
    Ok(())
}

/// The policy's memory bound, off: an account without a cgroup of its own
/// would get a warning on stderr that it is not enforced, which is the
/// machine's, not the script's, and bash has no counterpart.
const NO_MEMORY_BOUND: &str = "[limits]\nmemory_bytes = 0\n";

fn policy_file(dir: &Path) -> PathBuf {
    let p = dir.join("policy.toml");
    std::fs::write(
        &p,
        format!(
            "confinement = \"best-effort\"\n[env]\npass = [\"LC_ALL\"]\n[commands]\nallow = {:?}\n{NO_MEMORY_BOUND}",
            PROGRAMS
        ),
    )
    .unwrap();
    p
}

#[test]
fn generated_scripts_match_bash() {
    let cases: usize = std::env::var("SCRIPT_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4_000);
    let first: u64 = std::env::var("SCRIPT_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let pdir = tempfile::tempdir().unwrap();
    let policy = policy_file(pdir.path());
    let next = AtomicUsize::new(0);
    let failures = Mutex::new(Vec::new());
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get()) * 2;
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= cases {
                        return;
                    }
                    if let Err(e) = compare(first + i as u64, &policy) {
                        let mut f = failures.lock().unwrap();
                        f.push(e);
                        if f.len() >= 5 {
                            next.store(cases, Ordering::Relaxed);
                        }
                    }
                }
            });
        }
    });
    let f = failures.into_inner().unwrap();
    assert!(
        f.is_empty(),
        "{} mismatches, first ones:\n{}",
        f.len(),
        f.join("\n")
    );
}

/// The generator itself: every script it makes parses (bash would run it).
#[test]
fn generated_scripts_are_valid_bash() {
    for seed in 1..300u64 {
        let case = Gen::new(seed).case();
        let texts = [Some(&case.script), case.file.as_ref().map(|f| &f.0)];
        for script in texts.into_iter().flatten() {
            let out = Command::new("bash")
                .args(["-n", "-c", script])
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "seed {seed}: {script}\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    let _ = PROGRAMS;
    // Every production shows up in the default run's first seeds.
    let scripts: Vec<String> = (1..2000u64)
        .map(|seed| {
            let case = Gen::new(seed).case();
            format!(
                "{}\n{}",
                case.script,
                case.file.map(|f| f.0).unwrap_or_default()
            )
        })
        .collect();
    for construct in [
        ">| ",
        "2>> ",
        "&>> ",
        "3>&1 1>&2 2>&3 3>&-",
        " 0<&3",
        "<<-'EOF'",
        "<<-EOF",
        "\n\tEOF",
        "cd -",
        "unset ",
        "exit ",
        "until test",
        "bash s.sh",
        "sh s.sh",
        "./s.sh",
        "source s.sh",
        ". ./s.sh",
        "bash -c '",
        "sh -c '",
        "#!/bin/sh",
        "#!/usr/bin/env bash",
        "shift",
        "\"$@\"",
        "return",
        "getopts",
        "trap '",
        "eval ",
        "umask",
        "declare d=",
        "typeset t=",
        "local OPTIND",
        "read -r -d ''",
    ] {
        assert!(
            scripts.iter().any(|s| s.contains(construct)),
            "no generated script has {construct:?}"
        );
    }
}

/// bash's own reading of a script's structure: the body of `declare -f`
/// for a function holding it.
fn bash_structure(script: &str) -> Option<String> {
    let out = Command::new("bash")
        .args(["--norc", "--noprofile", "-c"])
        .arg(format!("f() {{\n{script}\n}}\ndeclare -f f"))
        .env_clear()
        .output()
        .unwrap();
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The parser's oracle: the structure agent-rsh parsed, written back with
/// each word spelled as in the source, reads the same to bash (`declare
/// -f`) as the original script. Lists, pipelines, compound commands,
/// redirections, assignments and word boundaries must all agree.
fn same_structure(script: &str) -> Result<(), String> {
    let parsed = agent_rsh::script::parse(script, 1 << 20)
        .map_err(|e| format!("refused {script:?}: {e}"))?;
    let Some(ours) = agent_rsh::script::render::verbatim(&parsed, script) else {
        return Ok(());
    };
    let want = bash_structure(script);
    let got = bash_structure(&ours);
    if want != got || want.is_none() {
        return Err(format!(
            "{script:?}\n  read back as {ours:?}\n  bash: {want:?}\n  ours: {got:?}"
        ));
    }
    Ok(())
}

#[test]
fn scripts_parse_as_bash_parses_them() {
    let tricky = [
        "a;b&&c||d|e|&f",
        "! a | b && ! c",
        "a #c\nb",
        "echo a#b '#' \\#x",
        "x=1 y=$(a b) c d=2 >f 2>&1 <g",
        "{ a; b; } >f; ( c; d ) 2>/dev/null | e",
        "if a; then b; elif c; then d; else e; fi",
        "while a; do b; done; until c; do d; done",
        "for x in a \"b c\" $(d); do e $x; done",
        "for x\ndo a; done",
        "case $x in a|b) c;; (d) ;; *) e;& esac",
        "echo ${x:-a b} ${y#*.} \"${z:+q}\" $'a\\tb'",
        "echo }{ {a,b} \"}\" a{",
        "echo a\\\nb c\\ d",
        "python3 -c \"import x\nprint(1)\" | head -n 2",
        "a &&\n\nb ||\nc |\nd",
        "echo 2>f a2>g 3>h 2 >i",
        "echo $(a $(b) \"$(c)\")",
        "x=$(case a in a) echo b;; esac)",
        "echo >&2 x 2<&0 3<>f",
        "cd /tmp && ls -la | grep x > out.txt 2>&1 || echo fail",
        "a & b &\nc && d || e & f | g &",
        "{ a & } & ( b & ) ; if c & then d & fi",
        "case x in a) b & ;; esac &",
        "echo $! ${!} \"$!\"; a&>f& b >&2 &",
    ];
    let mut failures = Vec::new();
    for s in tricky {
        if let Err(e) = same_structure(s) {
            failures.push(e);
        }
    }
    for seed in 1..2000u64 {
        let mut g = Gen::new(seed);
        let script = g.script();
        if let Err(e) = same_structure(&script) {
            failures.push(format!("seed {seed}: {e}"));
        }
        if failures.len() > 5 {
            break;
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// `&`, `$!`, `wait` and `trap`, compared with bash as the generated
/// scripts are. Every output here is deterministic: a background job
/// prints only before the `wait` that waits for it returns.
#[test]
fn background_jobs_wait_and_traps_match_bash() {
    let scripts = [
        "(echo a) & wait; echo b",
        "false & wait $!; echo $?",
        "(exit 3) & p=$!; wait $p; echo $?; wait $p; echo again $?",
        "true & x=$?; echo status $x",
        "{ echo g1; echo g2; } > g.txt & wait; cat g.txt",
        "echo one | tr a-z A-Z & wait; echo two",
        "(sleep 0.1; echo late) & echo early; wait; echo end",
        "sleep 30 & kill $!; wait $!; echo killed $?",
        "cat & wait $!; echo cat $?",
        "(exit 7) & wait %1; echo $?; wait %1; echo gone $?",
        "wait; echo none $?; wait -n; echo n $?",
        "(exit 4) & wait -n; echo $?",
        "echo \"[$!]\"; true & [ \"$!\" -gt 0 ] && echo pid",
        "f() { echo in f; return 3; }; f & wait $!; echo $?",
        "set -e; false & wait; echo survived",
        "set -e; false & wait $! || echo caught $?; echo end",
        "for i in 1 2 3; do (exit $i) & done; wait; echo loop",
        "trap 'echo bye' EXIT; echo hi",
        "trap 'echo bye $?' EXIT; exit 3",
        "trap 'echo bye $?' EXIT; set -e; false; echo never",
        "trap 'echo one' EXIT; trap 'echo two' EXIT; trap; trap - EXIT; trap; echo end",
        "trap 'exit 5' EXIT; exit 3",
        "trap 'false; exit' EXIT; true",
        "trap \"echo 'q' \\\"d\\\"\" EXIT; trap -p EXIT",
        "(trap 'echo sub' EXIT; echo in); echo out",
        "trap 'echo top' EXIT; x=$(echo sub); (echo in); echo $x",
        "trap '' EXIT; echo quiet",
        "trap 'echo err $?' ERR; false; echo after; ! false; false || true; if false; then :; fi",
        "trap 'echo err' ERR; f() { false; echo in f; }; f; echo $?",
        "trap 'echo int' INT; trap 'echo term' TERM; trap; trap - INT; trap",
        "trap 'echo got usr1' USR1; kill -USR1 $$; echo after",
        "sleep 30 & p=$!; trap 'echo t $?; kill $p; exit 7' TERM; kill -TERM $$; wait; echo never",
        "trap 'echo gone' EXIT; exec echo replaced",
    ];
    let pdir = tempfile::tempdir().unwrap();
    let policy = pdir.path().join("policy.toml");
    let mut allow: Vec<&str> = PROGRAMS.to_vec();
    allow.extend(["sleep", "kill", "tr"]);
    std::fs::write(
        &policy,
        format!(
            "confinement = \"best-effort\"\n[env]\npass = [\"LC_ALL\"]\n[commands]\nallow = {allow:?}\n{NO_MEMORY_BOUND}"
        ),
    )
    .unwrap();
    let mut failures = Vec::new();
    for script in scripts {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("w");
        std::fs::create_dir(&ws).unwrap();
        setup(&ws);
        let want = run_bash(script, &ws);
        std::fs::remove_dir_all(&ws).unwrap();
        let _ = std::fs::remove_dir_all(dir.path().join("state"));
        std::fs::create_dir(&ws).unwrap();
        setup(&ws);
        let got = run_agent(script, &ws, &policy);
        if (&want.stdout, &want.stderr, want.status, &want.files)
            != (&got.stdout, &got.stderr, got.status, &got.files)
        {
            failures.push(format!(
                "{script}\n  bash:      {} {:?} {:?}\n  agent-rsh: {} {:?} {:?}",
                want.status, want.stdout, want.stderr, got.status, got.stdout, got.stderr
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
