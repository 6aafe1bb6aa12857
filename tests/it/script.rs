//! End-to-end tests of compound commands: the shapes agents write, the
//! refusals (rule, offset, hint) and that a refused script runs and
//! writes nothing; the run-time check of commands built by expansions;
//! the `commands` report; `check --json`.

use assert_cmd::Command;
use serde_json::Value;
use std::path::{Path, PathBuf};

use crate::common::BIN;

struct Setup {
    _dir: tempfile::TempDir,
    policy: PathBuf,
    ws: PathBuf,
}

fn setup(extra: &str) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.toml");
    std::fs::write(
        &policy,
        format!(
            "confinement = \"best-effort\"\n{extra}\n[commands]\nallow = [\"cat\", \"echo\", \"ls\", \"grep\", \"head\", \"sed\", \"wc\", \"python3\", \"mkdir\", \"touch\", \"printf\", \"sort\", \"find\", \"test\", \"tr\", \"seq\", \"rm\"]\n"
        ),
    )
    .unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    Setup {
        _dir: dir,
        policy,
        ws,
    }
}

impl Setup {
    fn run(&self, script: &str) -> (Value, i32) {
        let out = Command::new(BIN)
            .args(["run", "--json", "--policy"])
            .arg(&self.policy)
            .arg("--workspace")
            .arg(&self.ws)
            .arg("--")
            .arg(script)
            .env_remove("AGENT_RSH_POLICY")
            .output()
            .unwrap();
        let v: Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
        (v, out.status.code().unwrap_or(-1))
    }

    fn ok(&self, script: &str) -> String {
        let (v, code) = self.run(script);
        assert_eq!(code, 0, "{script}: {v:#}");
        v["stdout"].as_str().unwrap().to_string()
    }

    fn file(&self, name: &str) -> String {
        std::fs::read_to_string(self.ws.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
    }

    fn files(&self) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(&self.ws)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }
}

fn python3() -> bool {
    Path::new("/usr/bin/python3").exists()
}

#[test]
fn here_documents_write_files() {
    let s = setup("");
    let out = s.ok(
        "cat <<'EOF' > f.py\nprint('$HOME is not expanded')\nx = \"`id`\"\nEOF\ncat f.py | wc -l",
    );
    assert_eq!(out.trim(), "2");
    assert_eq!(
        s.file("f.py"),
        "print('$HOME is not expanded')\nx = \"`id`\"\n"
    );
    // An unquoted delimiter expands; <<- strips leading tabs.
    s.ok("name=world\ncat <<EOF > g.txt\nhello $name\n\\$literal\nEOF\ncat <<-END >> g.txt\n\tindented\n\tEND");
    assert_eq!(s.file("g.txt"), "hello world\n$literal\nindented\n");
}

#[test]
fn lists_cd_and_fallbacks() {
    let s = setup("");
    std::fs::create_dir(s.ws.join("src")).unwrap();
    std::fs::write(s.ws.join("src/a.txt"), "alpha\nbeta\n").unwrap();
    assert_eq!(s.ok("mkdir -p out && echo made"), "made\n");
    assert_eq!(s.ok("cd src && ls && cat a.txt | grep b"), "a.txt\nbeta\n");
    // cd lasts for the script; bare cd goes back to the workspace root.
    assert_eq!(s.ok("cd src; cd; ls -d src"), "src\n");
    assert_eq!(
        s.ok("cat missing.txt 2>/dev/null || echo fallback"),
        "fallback\n"
    );
    assert_eq!(s.ok("false; echo $?"), "1\n");
    assert_eq!(
        s.ok("echo one > o.txt; echo two >> o.txt; cat o.txt"),
        "one\ntwo\n"
    );
    assert_eq!(s.ok("seq 1 20 | sed -n '3,5p' | head -n 2"), "3\n4\n");
    assert_eq!(s.ok("ls src/*.txt"), "src/a.txt\n");
    assert_eq!(
        s.ok("echo {a,b}.txt ~/x | tr ' ' '\\n' | head -n 2"),
        "a.txt\nb.txt\n"
    );
    // ~ is $HOME, as in bash: for a persistent workspace that is its state
    // directory outside the tree, not the workspace.
    let home = s.ok("echo $HOME");
    assert!(!home.trim().is_empty());
    assert_eq!(s.ok("echo ~"), home);
}

#[test]
fn multi_line_python() {
    if !python3() {
        crate::common::unavailable("multi_line_python", "needs /usr/bin/python3");
        return;
    }
    // The inline-code rule is the policy's business, not the syntax's.
    let s = setup("[packs]\nrules_off = [\"args.python.inline-code\"]");
    let out = s.ok("python3 -c \"\nimport sys\nfor i in range(3):\n    print(i)\n\" | wc -l");
    assert_eq!(out.trim(), "3");
}

#[test]
fn variables_expansions_and_control_flow() {
    let s = setup("");
    assert_eq!(
        s.ok("x='a  b'; echo $x \"$x\" ${y:-dflt}"),
        "a b a  b dflt\n"
    );
    assert_eq!(
        s.ok("f=report.tar.gz; echo ${f%%.*} ${f#*.}"),
        "report tar.gz\n"
    );
    assert_eq!(s.ok("n=$(echo 3); echo \"n=$n\" `echo bq`"), "n=3 bq\n");
    assert_eq!(
        s.ok("for i in 1 2 3; do if test $i = 2; then continue; fi; echo $i; done"),
        "1\n3\n"
    );
    assert_eq!(
        s.ok("case x.py in *.rs) echo rust;; *.py) echo python;; esac"),
        "python\n"
    );
    assert_eq!(
        s.ok("touch stop; while test -f stop; do rm stop; echo once; done"),
        "once\n"
    );
    assert_eq!(s.ok("export K=v; printf '%s\\n' \"$K\""), "v\n");
    // set -e stops at the first failure; pipefail reports it.
    let (v, code) = s.run("set -e; echo a; false; echo never");
    assert_eq!((code, v["stdout"].as_str().unwrap()), (1, "a\n"));
    let (_, code) = s.run("set -o pipefail; false | cat");
    assert_eq!(code, 1);
    let (_, code) = s.run("false | cat");
    assert_eq!(code, 0);
    let (v, code) = s.run("set -u; echo $nope");
    assert_eq!(code, 127, "{v:#}");
    let (_, code) = s.run("exit 7");
    assert_eq!(code, 7);
}

#[test]
fn the_result_lists_each_command() {
    let s = setup("");
    let (v, code) = s.run("echo a | grep -c a; cd .; false || echo b");
    assert_eq!(code, 0);
    assert_eq!(v["argv"], serde_json::json!([]));
    let cmds = v["commands"].as_array().unwrap();
    let shown: Vec<(String, i64, i64)> = cmds
        .iter()
        .map(|c| {
            (
                c["argv"][0].as_str().unwrap().to_string(),
                c["exitCode"].as_i64().unwrap(),
                c["offset"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        shown,
        vec![
            ("echo".into(), 0, 0),
            ("grep".into(), 0, 9),
            ("cd".into(), 0, 20),
            ("false".into(), 1, 26),
            ("echo".into(), 0, 35),
        ]
    );
    assert!(cmds.iter().all(|c| c["durationMs"].is_u64()));
}

#[test]
fn a_refused_stage_refuses_the_whole_script_before_anything_runs() {
    let s = setup("");
    let cases: &[(&str, &str, u64)] = &[
        ("ls | id", "command.not-allowed", 5),
        ("echo hi > m.txt && id", "command.not-allowed", 19),
        ("touch made; echo $(id)", "command.not-allowed", 19),
        (
            "touch made; echo x > /etc/agent-rsh-test",
            "redirect.outside",
            19,
        ),
        ("touch made; echo x > ../escape", "redirect.outside", 19),
        // A background command is judged like any other.
        ("touch made; id &", "command.not-allowed", 12),
        // So are a trap's commands, when they are known before running.
        (
            "touch made; trap 'echo; id' EXIT",
            "command.not-allowed",
            17,
        ),
        // A process substitution's commands, as a command substitution's.
        ("touch made; cat <(id)", "command.not-allowed", 18),
        ("touch made; sort >(id)", "command.not-allowed", 19),
        (
            "touch made; echo ${x:-<(ls)}",
            "syntax.process-substitution",
            22,
        ),
        ("touch made; exec cd /", "syntax.exec", 17),
        ("touch made; exec id", "command.not-allowed", 17),
        ("touch made; cd /etc && ls", "cd.outside", 15),
        ("touch made; find . -exec id \\;", "command.not-allowed", 25),
        ("touch made; LD_PRELOAD=x ls", "env.dangerous", 12),
        ("touch made; if true; then", "syntax.error", 25),
        ("touch made; echo $[1+1]", "syntax.arithmetic", 17),
        ("touch made; IFS=: ls", "env.dangerous", 12),
        // A shell variable may hold a name --env refuses; exporting it,
        // or one the run's environment already holds, is refused.
        ("touch made; CC=x; export CC", "env.dangerous", 25),
        ("touch made; CC=x make", "env.dangerous", 12),
        ("touch made; PAGER=x", "env.dangerous", 12),
        ("touch made; PATH=/x", "env.dangerous", 12),
    ];
    // `source FILE` and `eval` are not here: the file is read, and eval's
    // text made, when they run, and their commands are checked then
    // (scripts.rs).
    for (script, rule, offset) in cases {
        let (v, code) = s.run(script);
        assert_eq!(code, 126, "{script}: {v:#}");
        assert_eq!(v["status"], "denied", "{script}");
        assert_eq!(v["denial"]["rule"], *rule, "{script}: {v:#}");
        assert_eq!(v["denial"]["offset"], *offset, "{script}: {v:#}");
        assert!(
            v["denial"]["hint"].as_str().is_some_and(|h| !h.is_empty()),
            "{script}"
        );
        assert!(v.get("commands").is_none(), "nothing ran: {script}");
    }
    assert!(
        s.files().is_empty(),
        "a refused script wrote {:?}",
        s.files()
    );
    assert!(!Path::new("/etc/agent-rsh-test").exists());
}

/// A bare assignment sets a shell variable no program sees: configure
/// scripts' `CC=${CC:-cc}` runs, and `$CC` is a word the rules judge.
#[test]
fn a_shell_variable_may_have_a_name_the_environment_refuses() {
    let s = setup("");
    let (v, code) = s.run("CC=${CC:-cc}; : ${CFLAGS:=-O2}; echo \"$CC $CFLAGS\"");
    assert_eq!(code, 0, "{v:#}");
    assert_eq!(v["stdout"], "cc -O2\n");
}

#[test]
fn commands_built_by_expansions_are_checked_before_exec() {
    let s = setup("");
    // The command name comes from a variable: checked at run time; the
    // script stops there with 126, after what ran before it.
    let (v, code) = s.run("echo before; p=id; $p; echo after");
    assert_eq!(code, 126, "{v:#}");
    assert_eq!(v["status"], "denied");
    assert_eq!(v["denial"]["rule"], "command.not-allowed");
    assert_eq!(v["denial"]["offset"], 19);
    assert!(
        v["denial"]["reason"]
            .as_str()
            .unwrap()
            .contains("after expansion")
    );
    assert_eq!(v["stdout"], "before\n");
    assert_eq!(v["commands"].as_array().unwrap().len(), 1);
    // Arguments from expansions meet the argument rules too.
    let (v, code) = s.run("x=-exec; find . $x id \\;");
    assert_eq!(code, 126, "{v:#}");
    assert_eq!(v["denial"]["rule"], "command.not-allowed");
    // A redirection target from a variable is checked when it is opened.
    let (v, code) = s.run("t=/etc/agent-rsh-x; echo x > $t");
    assert_eq!(code, 126, "{v:#}");
    assert_eq!(v["denial"]["rule"], "redirect.outside");
    // In a pipeline stage, the whole script stops.
    let (v, code) = s.run("p=id; echo a | $p; echo after");
    assert_eq!(code, 126, "{v:#}");
    assert!(!v["stdout"].as_str().unwrap().contains("after"));
}

#[test]
fn globs_are_matched_by_the_confined_process() {
    let s = setup("");
    for f in ["b.rs", "a.rs", ".hidden.rs", "c.txt"] {
        std::fs::write(s.ws.join(f), "").unwrap();
    }
    assert_eq!(s.ok("echo *.rs"), "a.rs b.rs\n");
    assert_eq!(s.ok("echo .*.rs"), ".hidden.rs\n");
    assert_eq!(s.ok("echo *.none"), "*.none\n");
    assert_eq!(s.ok("echo '*.rs' \\*.rs"), "*.rs *.rs\n");
}

/// A glob of every entry of a directory (`./*`, `*`, `"$PWD"/*`) is
/// judged as that directory, before the script runs when the words are
/// known and after expansion when they are not: each entry alone looks
/// harmless, together they empty the directory.
#[test]
fn a_glob_that_empties_a_directory_is_judged_as_the_directory() {
    let s = setup("");
    let populate = || {
        std::fs::create_dir_all(s.ws.join("src")).unwrap();
        std::fs::create_dir_all(s.ws.join(".git")).unwrap();
        for f in ["a.o", "b.o", "main.c", "src/lib.c", "src/x.o", ".git/HEAD"] {
            std::fs::write(s.ws.join(f), "x").unwrap();
        }
    };
    populate();
    let before = s.files();
    let cases: &[(&str, &str)] = &[
        ("rm -rf ./*", "guard.fs.rm-root"),
        ("rm -rf *", "guard.fs.rm-root"),
        ("rm -rf */", "guard.fs.rm-root"),
        ("rm -rf ./*/", "guard.fs.rm-root"),
        ("rm -r -f -- *", "guard.fs.rm-root"),
        ("cd src && rm -rf ../*", "guard.fs.rm-root"),
        ("rm -rf .git/*", "guard.fs.rm-git"),
        // Known only after expansion: judged again before exec.
        ("d=.; rm -rf $d/*", "guard.fs.rm-root"),
        ("rm -rf \"$PWD\"/*", "guard.fs.rm-root"),
        (
            "for d in src .; do rm -rf \"$d\"/*; done",
            "guard.fs.rm-root",
        ),
    ];
    for (script, rule) in cases {
        let (v, code) = s.run(script);
        assert_eq!(code, 126, "{script}: {v:#}");
        assert_eq!(v["status"], "denied", "{script}");
        assert_eq!(v["denial"]["rule"], *rule, "{script}: {v:#}");
        let reason = v["denial"]["reason"].as_str().unwrap();
        assert!(
            reason.contains("a glob of every entry of a directory is judged as the directory"),
            "{script}: {reason}"
        );
        assert!(
            v["denial"]["hint"].as_str().is_some_and(|h| !h.is_empty()),
            "{script}"
        );
        assert_eq!(s.files(), before, "{script} removed something");
        assert!(s.ws.join(".git/HEAD").exists(), "{script}");
    }
    // The loop emptied src before it reached `.`: the first word is
    // judged as `src`, which may be emptied.
    assert!(!s.ws.join("src/lib.c").exists());
    populate();
    // Narrow globs and a subdirectory's contents are fine.
    s.ok("rm -f ./*.o");
    assert!(!s.ws.join("a.o").exists() && s.ws.join("main.c").exists());
    s.ok("rm -rf src/*");
    assert!(s.ws.join("src").is_dir() && !s.ws.join("src/lib.c").exists());
    assert!(s.ws.join(".git/HEAD").exists());
    // `check` refuses it statically, nothing runs.
    for cmd in ["rm -rf /*", "rm -rf ./*", "rm -rf ../*"] {
        let out = Command::new(BIN)
            .args(["check", "--json", "--policy"])
            .arg(&s.policy)
            .arg(cmd)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(126), "{cmd}");
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["denial"]["rule"], "guard.fs.rm-root", "{cmd}: {v:#}");
    }
}

#[test]
fn simple_syntax_keeps_the_strict_contract() {
    let s = setup("syntax = \"simple\"");
    let (v, code) = s.run("echo a | cat");
    assert_eq!(code, 126);
    assert_eq!(v["denial"]["rule"], "lex.pipe");
    assert_eq!(v["denial"]["offset"], 7);
    let (v, code) = s.run("cd /tmp");
    assert_eq!(code, 126);
    assert_eq!(v["denial"]["rule"], "command.not-allowed");
}

#[test]
fn a_simple_command_keeps_its_fast_path() {
    let s = setup("");
    let (v, code) = s.run("echo 'a|b'");
    assert_eq!(code, 0);
    assert_eq!(v["argv"], serde_json::json!(["echo", "a|b"]));
    assert!(v.get("commands").is_none());
}

#[test]
fn check_json_returns_the_structure_and_each_verdict() {
    let s = setup("");
    let out = Command::new(BIN)
        .args(["check", "--json", "--policy"])
        .arg(&s.policy)
        .arg("cat f | id; cat $x")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(126));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["verdict"], "deny");
    assert_eq!(v["syntax"], "compound");
    assert_eq!(v["denial"]["rule"], "command.not-allowed");
    assert_eq!(v["denial"]["offset"], 8);
    assert_eq!(
        v["script"]["body"][0]["first"]["stages"][1]["command"]["type"],
        "simple"
    );
    let verdicts: Vec<&str> = v["stages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["verdict"].as_str().unwrap())
        .collect();
    assert_eq!(verdicts, vec!["allow", "deny", "atRunTime"]);
}

#[test]
fn the_interpreter_refuses_to_run_from_a_writable_place() {
    // agent-rsh copied into the workspace would be exec'd by the run.
    let s = setup("");
    let copy = s.ws.join("agent-rsh");
    std::fs::copy(BIN, &copy).unwrap();
    // Another test thread's fork may hold the copy's write descriptor for a
    // moment (until its child execs): ETXTBSY then, so try again.
    let mut tries = 0;
    let out = loop {
        match Command::new(&copy)
            .args(["run", "--json", "--policy"])
            .arg(&s.policy)
            .arg("--workspace")
            .arg(&s.ws)
            .arg("echo a | cat")
            .output()
        {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy && tries < 100 => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            r => break r.unwrap(),
        }
    };
    assert_eq!(out.status.code(), Some(125));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["error"].as_str().unwrap().contains("can write"), "{v:#}");
}

#[test]
fn echo_printf_and_ifs_are_bash_builtins() {
    let s = setup("");
    assert_eq!(
        s.ok("printf '%0.s-' 1 2 3; echo; echo -e 'a\\tb\\x41'; echo -n x; echo -E 'y\\n'"),
        "---\na\tbA\nxy\\n\n"
    );
    assert_eq!(
        s.ok("printf -v v '%03d|%5.2f|%x' 7 3.14159 255; echo \"$v\"; printf '%s=%s\\n' a 1 b"),
        "007| 3.14|ff\na=1\nb=\n"
    );
    assert_eq!(s.ok("printf '%q\\n' \"$IFS\" 'a b'"), "$' \\t\\n'\na\\ b\n");
    assert_eq!(
        s.ok("x='a:b::c'; IFS=:; printf '[%s]' $x; echo; unset IFS; y=' p  q '; printf '[%s]' $y"),
        "[a][b][][c]\n[p][q]"
    );
}

#[test]
fn test_and_conditionals() {
    let s = setup("");
    std::fs::write(s.ws.join("f.txt"), "x").unwrap();
    std::fs::create_dir(s.ws.join("d")).unwrap();
    assert_eq!(
        s.ok("[ -f f.txt ] && [ -d d ] && [ ! -e none ] && test -s f.txt && echo files"),
        "files\n"
    );
    assert_eq!(
        s.ok("[ 3 -lt 10 -a a = a ] && [ \\( x != y \\) -o -z '' ] && echo ok"),
        "ok\n"
    );
    let (v, code) = s.run("[ abc -eq 1 ]");
    assert_eq!(code, 2, "{v}");
    assert!(
        v["stderr"]
            .as_str()
            .unwrap()
            .contains("[: abc: integer expression expected"),
        "{v}"
    );
    assert_eq!(
        s.ok("x=f.txt; [[ $x == *.txt && -f $x ]] && echo glob; [[ \"$x\" == \"*.txt\" ]] || echo quoted"),
        "glob\nquoted\n"
    );
    assert_eq!(
        s.ok("[[ v12 =~ ^v([0-9]+)$ ]] && echo \"$BASH_REMATCH\"; [[ ! -d f.txt || -z x ]] && echo or"),
        "v12\nor\n"
    );
}

#[test]
fn arithmetic() {
    let s = setup("");
    assert_eq!(
        s.ok("n=5; echo $((n * 2 + 1)) $(( 2 ** 10 )) $(( -7 / 2 )) $(( 0x1f + 010 + 2#101 ))"),
        "11 1024 -3 44\n"
    );
    assert_eq!(
        s.ok("i=0; while (( i < 3 )); do echo $i; (( i++ )); done; let j=i*2; echo $j"),
        "0\n1\n2\n6\n"
    );
    // An arithmetic error abandons its line, as in bash.
    let (v, code) = s.run("echo $((1/0)); echo same line\necho next $?");
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["stdout"], "next 1\n");
    assert!(
        v["stderr"]
            .as_str()
            .unwrap()
            .contains("1/0: division by 0 (error token is \"0\")"),
        "{v}"
    );
}

#[test]
fn read_command_v_and_type() {
    let s = setup("");
    std::fs::write(s.ws.join("in.txt"), "one two three\na:b\nlast").unwrap();
    assert_eq!(
        s.ok("while read -r a b; do echo \"[$a][$b]\"; done < in.txt"),
        "[one][two three]\n[a:b][]\n"
    );
    assert_eq!(
        s.ok("IFS=: read -r x y <<< 'p:q:r'; echo \"$y\"; read -n 2 z <<< abc; echo $z; read q < /dev/null; echo $?"),
        "q:r\nab\n1\n"
    );
    let (v, code) = s.run("command -v cat; command -v echo; command -v python9 || echo none; type -t if; type echo; type -t cat");
    assert_eq!(code, 0, "{v}");
    let cat = std::fs::canonicalize("/usr/bin/cat")
        .or_else(|_| std::fs::canonicalize("/bin/cat"))
        .unwrap();
    assert_eq!(
        v["stdout"].as_str().unwrap(),
        format!(
            "{}\necho\nnone\nkeyword\necho is a shell builtin\nfile\n",
            cat.display()
        )
    );
    // A program the policy refuses is not found.
    let (v, code) = s.run("command -v id || echo refused-is-missing");
    assert_eq!(
        (code, v["stdout"].as_str().unwrap()),
        (0, "refused-is-missing\n")
    );
    assert_eq!(
        s.ok("read -a arr <<< 'a  b'; echo ${#arr[@]} ${arr[1]}"),
        "2 b\n"
    );
    let (v, code) = s.run("read -t 1 x <<< a");
    assert_eq!(code, 126, "{v}");
    assert!(v["denial"]["hint"].as_str().unwrap().contains("-t"), "{v}");
}

#[test]
fn arrays_and_the_newer_expansions() {
    let s = setup("");
    std::fs::write(s.ws.join("a.py"), "").unwrap();
    std::fs::write(s.ws.join("b.py"), "").unwrap();
    std::fs::write(s.ws.join("list.txt"), "one\ntwo words\nthree\n").unwrap();
    let cases: &[(&str, &str)] = &[
        (
            "a=(x \"y z\" *.py); a+=(w); printf '<%s>' \"${a[@]}\"; echo; echo ${#a[@]} ${a[-1]} ${!a[@]}",
            "<x><y z><a.py><b.py><w>\n5 w 0 1 2 3 4\n",
        ),
        (
            "mapfile -t lines < list.txt; echo ${#lines[@]}; for l in \"${lines[@]}\"; do echo \"[$l]\"; done",
            "3\n[one]\n[two words]\n[three]\n",
        ),
        (
            "declare -A m=([k]=v); m[x]=1; (( m[x] += 2 )); echo ${m[k]} ${m[x]} ${#m[@]}",
            "v 3 2\n",
        ),
        (
            "[[ v1.22 =~ v([0-9]+)\\.([0-9]+) ]] && echo ${BASH_REMATCH[1]} ${BASH_REMATCH[2]}",
            "1 22\n",
        ),
        (
            "x=src/main.rs; echo ${x/main/lib} ${x//[sm]/_} ${x^^} ${x:4:4} ${x: -2}",
            "src/lib.rs _rc/_ain.r_ SRC/MAIN.RS main rs\n",
        ),
        (
            "for ((i = 0; i < 3; i++)); do echo -n $i; done; echo; a=(3 4); for ((j=0; j<${#a[@]}; j++)); do echo ${a[j]}; done",
            "012\n3\n4\n",
        ),
        (
            "pushd . > /dev/null; mkdir -p d; pushd d >/dev/null; popd >/dev/null; dirs | wc -w",
            "2\n",
        ),
    ];
    for (script, want) in cases {
        assert_eq!(s.ok(script), *want, "{script}");
    }
}

#[test]
fn array_words_are_judged_after_expansion() {
    let s = setup("");
    // The command's words come from an array: judged when they are known.
    let (v, code) = s.run("cmd=(id -u); \"${cmd[@]}\"");
    assert_eq!(code, 126, "{v}");
    assert_eq!(v["denial"]["rule"], "command.not-allowed", "{v}");
    assert!(
        v["denial"]["reason"]
            .as_str()
            .unwrap()
            .contains("after expansion: `id -u`"),
        "{v}"
    );
    // An argument from an array meets the guards as one typed out.
    let (v, code) = s.run("touch keep; args=(-rf /); rm \"${args[@]}\"");
    assert_eq!(code, 126, "{v}");
    assert!(
        v["denial"]["rule"].as_str().unwrap().starts_with("guard."),
        "{v}"
    );
    // Commands inside array literals, subscripts and arithmetic loops are
    // checked before anything runs.
    for script in [
        "touch made; a=($(id))",
        "touch made; a[$(id)]=1",
        "touch made; echo ${a[$(id -u)]}",
        "touch made; declare -a a=(\"$(id)\")",
        "touch made; for ((i=0; i<$(id -u); i++)); do :; done",
        "touch made; time id",
    ] {
        let (v, code) = s.run(script);
        assert_eq!(code, 126, "{script}: {v}");
        assert_eq!(v["denial"]["rule"], "command.not-allowed", "{script}: {v}");
        assert!(!s.ws.join("made").exists(), "{script} ran");
    }
}

#[test]
fn hostile_subscripts_are_errors_not_crashes() {
    let s = setup("");
    let (v, code) = s.run(
        "a[9223372036854775807]=x; echo ${#a[@]} ${!a[@]}; echo \"[${a[-9223372036854775807]}]\"; echo ${a[-1]}",
    );
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["stdout"], "1 9223372036854775807\n[]\nx\n", "{v}");
    // A negative index before the first element: bash's message, and the
    // line is abandoned with status 1.
    let (v, code) = s.run("a=(x); a[-5]=q; echo not-here\necho $?");
    assert_eq!((code, v["stdout"].as_str().unwrap()), (0, "1\n"), "{v}");
    assert!(
        v["stderr"]
            .as_str()
            .unwrap()
            .contains("bad array subscript"),
        "{v}"
    );
    // Arithmetic in a subscript, nested expansions, a huge count.
    let (v, code) = s.run("i=2; a=(p q r s); echo ${a[i*2-3]} ${a[${#a[@]}-1]} ${a[$(( i ))]}");
    assert_eq!((code, v["stdout"].as_str().unwrap()), (0, "q s r\n"), "{v}");
    let (v, code) = s.run("echo ${a[1/0]}\necho after");
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["stdout"], "after\n", "{v}");
    assert!(
        v["stderr"].as_str().unwrap().contains("division by 0"),
        "{v}"
    );
    // An array's size is bounded: doubling it stops with a message.
    let (v, code) =
        s.run("a=({1..100000}); for k in 1 2 3 4 5; do a+=(\"${a[@]}\"); done; echo ${#a[@]}");
    assert_eq!(code, 1, "{v}");
    assert!(v["stderr"].as_str().unwrap().contains("at most"), "{v}");
}
