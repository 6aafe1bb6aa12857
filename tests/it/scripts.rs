//! Scripts and nested shells on agent-rsh's interpreter: a script the run
//! executes (`./run.sh`, `sh run.sh`, `bash run.sh`, `source`), and the
//! `/bin/sh` that make, git and Python start, run command by command under
//! the run's policy; a refused command fails with 126 and names its file
//! and line, and the script goes on as bash would.

use crate::common::{self, agent, json, policy};
use crate::kernel_escapes::agent_as;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

const POLICY: &str = r#"
[commands]
allow = ["echo", "cat", "wc", "ls", "make", "find", "python3", "git"]
"#;

const RUN_SH: &str = "#!/bin/sh\necho \"start $# [$1]\"\nid\necho \"after $?\"\nid || echo \"or $?\"\nset -e\nid\necho never\n";

fn workspace(files: &[(&str, &str)]) -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    for (name, body) in files {
        let p = d.path().join(name);
        std::fs::write(&p, body).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    // The account runs below must be able to enter it.
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    d
}

fn run_json(policy: &Path, ws: &Path, cmd: &str) -> serde_json::Value {
    let out = agent()
        .args(["run", "--json", "--policy"])
        .arg(policy)
        .arg("--workspace")
        .arg(ws)
        .args(["--", cmd])
        .output()
        .unwrap();
    json(&out.stdout)
}

/// bash, reading no start-up file, running `script` in `dir`: what a
/// script is compared with.
pub(crate) fn bash_in(dir: &Path, script: &str) -> std::process::Output {
    std::process::Command::new("bash")
        .args(["--norc", "--noprofile", "-c", script])
        .current_dir(dir)
        .env_remove("IFS")
        .output()
        .unwrap()
}

#[test]
fn a_script_runs_every_allowed_command_and_refuses_the_rest_by_line() {
    let p = policy(POLICY);
    let ws = workspace(&[("run.sh", RUN_SH)]);
    for cmd in [
        "./run.sh a",
        "sh run.sh a",
        "bash run.sh a",
        "dash ./run.sh a",
        ". ./run.sh a",
    ] {
        let r = run_json(&p.path, ws.path(), cmd);
        assert_eq!(
            r["stdout"], "start 1 [a]\nafter 126\nor 126\n",
            "{cmd}: {r}"
        );
        // `set -e` stops at the refused command: its status is the run's.
        assert_eq!(r["exitCode"], 126, "{cmd}: {r}");
        let err = r["stderr"].as_str().unwrap();
        let file = if cmd.contains("./run.sh") {
            "./run.sh"
        } else {
            "run.sh"
        };
        for line in [3, 5, 7] {
            assert!(
                err.contains(&format!("{file}:{line}: command.not-allowed")),
                "{cmd}: line {line} in {err}"
            );
        }
        let refusals = r["refusals"].as_array().unwrap();
        let lines: Vec<u64> = refusals
            .iter()
            .map(|x| x["line"].as_u64().unwrap())
            .collect();
        assert_eq!(lines, [3, 5, 7], "{cmd}: {r}");
        assert!(
            refusals
                .iter()
                .all(|x| x["file"] == file && x["rule"] == "command.not-allowed")
        );
    }
}

#[test]
fn sh_c_takes_its_name_and_parameters_as_bash_does() {
    let p = policy(POLICY);
    let ws = workspace(&[]);
    let r = run_json(
        &p.path,
        ws.path(),
        r#"sh -c 'echo "$0|$1|$#|$*"; for a in "$@"; do echo "<$a>"; done' me "x y" z; bash -c 'exit 3'; echo $?"#,
    );
    assert_eq!(r["stdout"], "me|x y|2|x y z\n<x y>\n<z>\n3\n", "{r}");
    assert_eq!(r["exitCode"], 0);
}

#[test]
fn a_script_without_the_execute_bit_is_refused_as_bash_refuses_it() {
    let p = policy(POLICY);
    let ws = workspace(&[]);
    std::fs::write(ws.path().join("plain.sh"), "echo hi\n").unwrap();
    let r = run_json(&p.path, ws.path(), "./plain.sh; echo $?; sh plain.sh");
    assert_eq!(r["stdout"], "126\nhi\n", "{r}");
}

#[test]
fn an_interpreter_script_is_judged_as_that_interpreter_running_the_file() {
    let p = policy(POLICY);
    let ws = workspace(&[(
        "hello.py",
        "#!/usr/bin/env python3\nimport sys\nprint('py', sys.argv[1:])\n",
    )]);
    let r = run_json(&p.path, ws.path(), "./hello.py a b");
    assert_eq!(r["stdout"], "py ['a', 'b']\n", "{r}");
    let argv = &r["commands"][0]["argv"];
    assert_eq!(argv[0], "python3", "{r}");
    // An interpreter the policy does not allow is refused by name.
    std::fs::write(ws.path().join("x.pl"), "#!/usr/bin/env perl\nprint 1;\n").unwrap();
    std::fs::set_permissions(
        ws.path().join("x.pl"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    let r = run_json(&p.path, ws.path(), "./x.pl");
    assert_eq!(r["status"], "denied", "{r}");
    assert_eq!(r["denial"]["rule"], "command.not-allowed", "{r}");
}

#[test]
fn nested_shells_of_make_git_find_and_python_are_the_checked_interpreter() {
    let p = policy(POLICY);
    let ws = workspace(&[("Makefile", "all:\n\techo recipe; id; echo \"after $$?\"\n")]);
    let r = run_json(&p.path, ws.path(), "make -s");
    assert_eq!(r["stdout"], "recipe\nafter 126\n", "{r}");
    let err = r["stderr"].as_str().unwrap();
    assert!(
        err.contains("/bin/sh:1: command.not-allowed: `id`"),
        "{err}"
    );

    let r = run_json(
        &p.path,
        ws.path(),
        r#"python3 -c 'import os, subprocess; print(os.system("echo sys; id")); print(subprocess.run("id || echo sub $?", shell=True, capture_output=True, text=True).stdout)'"#,
    );
    assert_eq!(r["stdout"], "sys\n32256\nsub 126\n\n", "{r}");

    let r = run_json(
        &p.path,
        ws.path(),
        r#"find . -name Makefile -exec sh -c 'wc -l < "$1"; id' _ {} \;"#,
    );
    assert_eq!(r["stdout"], "2\n", "{r}");
    assert!(
        r["stderr"]
            .as_str()
            .unwrap()
            .contains("command.not-allowed: `id`"),
        "{r}"
    );

    // A git alias that runs a shell command.
    let git = |args: &[&str]| {
        let ok = std::process::Command::new("git")
            .args(args)
            .current_dir(ws.path())
            .status()
            .unwrap()
            .success();
        assert!(ok, "git {args:?}");
    };
    git(&["init", "-q"]);
    git(&["config", "alias.who", "!echo alias; id"]);
    let r = run_json(&p.path, ws.path(), "git who");
    assert_eq!(r["stdout"], "alias\n", "{r}");
    assert!(
        r["stderr"]
            .as_str()
            .unwrap()
            .contains("command.not-allowed: `id`"),
        "{r}"
    );
}

#[test]
fn a_refused_program_is_reached_through_no_script_route_as_root_or_account() {
    let p = policy(POLICY);
    std::fs::set_permissions(p.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&p.path, std::fs::Permissions::from_mode(0o644)).unwrap();
    let attack = r#"import os, subprocess
def t(name, f):
    try:
        r = f()
        print(name, r)
    except OSError as e:
        print(name, "errno", e.errno)
t("system", lambda: os.system("/usr/bin/id >/dev/null 2>&1") >> 8)
t("path", lambda: os.system("PATH=/usr/bin:/bin; export PATH; id >/dev/null 2>&1") >> 8)
t("exec", lambda: os.system("exec id >/dev/null 2>&1") >> 8)
t("direct", lambda: subprocess.run(["/usr/bin/id"], capture_output=True).returncode)
t("job", lambda: open("/.agent-rsh/job.json", "w").write("{}"))
t("shell", lambda: open("/usr/bin/dash", "wb").write(b"x"))
t("unlink", lambda: os.unlink("/.agent-rsh/job.json"))
"#;
    let cmd = format!("cat > attack.py <<'EOF'\n{attack}EOF\npython3 attack.py");
    let uids: &[u32] = if common::root() { &[0, 65534] } else { &[] };
    if uids.is_empty() {
        common::cannot_run("runs the attack as root and as nobody");
        return;
    }
    for &uid in uids {
        let out = agent_as(uid)
            .env_remove("AGENT_RSH_POLICY")
            .args(["run", "--json", "--policy"])
            .arg(&p.path)
            .args(["--", &cmd])
            .output()
            .unwrap();
        let r = json(&out.stdout);
        let text = r["stdout"].as_str().unwrap();
        for want in [
            "system 126",
            "path 126",
            "exec 126",
            "job errno 30",
            "shell errno 30",
            "unlink errno 30",
        ] {
            assert!(text.contains(want), "uid {uid}: {want} in {r}");
        }
        // Landlock: EACCES from the exec, which Python raises.
        assert!(text.contains("direct errno 13"), "uid {uid}: {r}");
    }
}

/// Functions behave as bash's: parameters, `local`, `return`, `$#`,
/// redirections of the body, `unset -f`, in the command string and in a
/// sourced file. Compared with bash's own output on the same text.
#[test]
fn functions_run_as_in_bash() {
    let p = policy(POLICY);
    let lib = "greet() {\n  local who=${1:-nobody}\n  echo \"hi $who ($#)\"\n  return 4\n}\n";
    let cases = [
        "f() { echo \"$1-$2 $#\"; }; f a b; f; echo \"$0 ${1:-none}\"",
        "x=g; f() { local x=l; echo $x; }; f; echo $x",
        "f() { return 3; echo no; }; f; echo st=$?",
        "function g { echo in-g; } ; g && type -t g",
        "f() { echo body; } > out.txt; f; cat out.txt",
        "f() { echo once; }; f; unset -f f; type -t f || echo gone",
        "count() { if [ \"$1\" -gt 0 ]; then echo $1; count $(( $1 - 1 )); fi; }; count 3",
        ". ./lib.sh; greet; greet you; echo st=$?",
        "f() { [ -n \"${X:-}\" ] && echo set || echo unset; }; f; X=1 f; f",
        "f() { echo \"[$*]\"; shift; echo \"[$@]\"; }; f a b c",
    ];
    for cmd in cases {
        let ws = workspace(&[("lib.sh", lib)]);
        let bash = bash_in(ws.path(), cmd);
        let want = String::from_utf8_lossy(&bash.stdout).replace("bash", "agent-rsh");
        let ws = workspace(&[("lib.sh", lib)]);
        let r = run_json(&p.path, ws.path(), cmd);
        assert_eq!(r["stdout"].as_str().unwrap(), want, "{cmd}: {r}");
        assert_eq!(r["exitCode"], bash.status.code().unwrap(), "{cmd}: {r}");
    }
}

/// A function's body is checked like any command: a refused command in it
/// refuses the script before anything runs, and a command judged from the
/// directory of the call (`rm -rf *` called at the workspace root).
#[test]
fn a_functions_body_is_checked_where_it_stands_and_at_each_call() {
    let p = policy("[commands]\nallow = [\"echo\", \"rm\", \"touch\", \"mkdir\"]\n");
    let ws = workspace(&[]);
    std::fs::write(ws.path().join("keep"), "").unwrap();
    let r = run_json(&p.path, ws.path(), "touch made; f() { id; }; echo never");
    assert_eq!(r["status"], "denied", "{r}");
    assert_eq!(r["denial"]["rule"], "command.not-allowed", "{r}");
    assert!(!ws.path().join("made").exists());
    // Defined in a subdirectory, called at the root: judged at the call.
    let r = run_json(
        &p.path,
        ws.path(),
        "mkdir -p sub && cd sub && f() { rm -rf $1; }; f x; cd .. && f .",
    );
    assert_eq!(r["exitCode"], 126, "{r}");
    assert_eq!(r["denial"]["rule"], "guard.fs.rm-root", "{r}");
    let ran: Vec<&str> = r["commands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["argv"][0].as_str().unwrap())
        .collect();
    assert_eq!(ran, ["mkdir", "cd", "rm", "cd"], "{r}");
    assert!(ws.path().join("keep").exists(), "{r}");
    // A function may not lend its name to a program: calling it by a
    // path, or after `unset -f`, is the program's business.
    let r = run_json(
        &p.path,
        ws.path(),
        "id() { echo mine; }; id; unset -f id; id",
    );
    assert_eq!(r["stdout"], "mine\n", "{r}");
    assert_eq!(r["exitCode"], 126, "{r}");
}

/// The virtualenv loop an agent types: make a venv, activate it (a sourced
/// file that defines `deactivate`), use its pip and python by name, and
/// deactivate, under the coding profile as `policy init` writes it.
#[test]
fn a_virtualenv_is_made_activated_used_and_deactivated() {
    if !common::ready(
        "a_virtualenv_is_made_activated_used_and_deactivated",
        false,
        &["python3"],
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let coding = dir.path().join("coding.toml");
    let out = agent()
        .args(["policy", "init", "--profile", "coding"])
        .arg(&coding)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let ws = workspace(&[]);
    let r = run_json(
        &coding,
        ws.path(),
        "python3 -m venv .venv && . .venv/bin/activate && echo \"venv=$VIRTUAL_ENV\" \
         && pip --version && python -c 'import sys; print(sys.prefix)' \
         && type -t deactivate && deactivate && echo \"after=${VIRTUAL_ENV:-none}\"",
    );
    assert_eq!(r["exitCode"], 0, "{r}");
    let out = r["stdout"].as_str().unwrap();
    let venv = ws.path().canonicalize().unwrap().join(".venv");
    let venv = venv.display();
    assert!(out.contains(&format!("venv={venv}\n")), "{r}");
    assert!(
        out.contains(&format!("from {venv}/lib/")),
        "pip is the venv's: {r}"
    );
    assert!(
        out.contains(&format!("\n{venv}\n")),
        "python is the venv's: {r}"
    );
    assert!(out.contains("function\n"), "{r}");
    assert!(out.ends_with("after=none\n"), "{r}");
    assert!(r["refusals"].as_array().is_none_or(|a| a.is_empty()), "{r}");
}

/// `npx NAME` under the workspace grant runs the installed program from
/// the nearest node_modules/.bin (a shell script on the interpreter, a
/// node script as node running it); a program not installed, or npx's
/// download forms, are refused by npx's rule.
#[test]
fn npx_runs_an_installed_program_and_never_downloads() {
    let p = policy("[commands]\nworkspace = true\nallow = [\"echo\", \"node\", \"npx\"]\n");
    let ws = workspace(&[]);
    let bin = ws.path().join("node_modules/.bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::create_dir_all(ws.path().join("sub")).unwrap();
    let hello = bin.join("hello");
    std::fs::write(&hello, "#!/bin/sh\necho \"hello $1\"\nid\n").unwrap();
    std::fs::set_permissions(&hello, std::fs::Permissions::from_mode(0o755)).unwrap();
    for (cmd, out) in [
        ("npx hello a", "hello a\n"),
        ("npx --no-install hello b", "hello b\n"),
        ("cd sub && npx -y hello c", "hello c\n"),
    ] {
        let r = run_json(&p.path, ws.path(), cmd);
        assert_eq!(r["stdout"], out, "{cmd}: {r}");
        // The script runs on the interpreter: its `id` is refused by line.
        assert_eq!(r["exitCode"], 126, "{cmd}: {r}");
        assert!(
            r["stderr"]
                .as_str()
                .unwrap()
                .contains(":3: command.not-allowed"),
            "{cmd}: {r}"
        );
    }
    if common::ready(
        "npx_runs_an_installed_program_and_never_downloads",
        false,
        &["node"],
    ) {
        let pkg = ws.path().join("node_modules/greet");
        std::fs::create_dir_all(&pkg).unwrap();
        let cli = pkg.join("cli.js");
        std::fs::write(
            &cli,
            "#!/usr/bin/env node\nconsole.log('greet ' + process.argv.slice(2).join(' '))\n",
        )
        .unwrap();
        std::fs::set_permissions(&cli, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::os::unix::fs::symlink("../greet/cli.js", bin.join("greet")).unwrap();
        let r = run_json(&p.path, ws.path(), "npx greet x y");
        assert_eq!(r["stdout"], "greet x y\n", "{r}");
        assert_eq!(r["exitCode"], 0, "{r}");
    }
    for cmd in ["npx cowsay hi", "npx -p cowsay cowsay", "npx hello@1 a"] {
        let r = run_json(&p.path, ws.path(), cmd);
        assert_eq!(r["denial"]["rule"], "args.npm.exec", "{cmd}: {r}");
    }
}

/// getopts and `set -f` as bash runs them, compared with bash on the same
/// script: groups of letters, arguments attached and separate, `--`, an
/// unknown letter and a missing argument (loud and silent), OPTIND reset.
const GETOPTS_SH: &str = r#"f() {
  OPTIND=1
  while getopts "ab:c" opt "$@"; do
    echo "opt=$opt arg=${OPTARG-unset} ind=$OPTIND"
  done
  echo "end opt=$opt ind=$OPTIND"
  shift $((OPTIND - 1))
  echo "rest=$*"
}
f -a -b val -c file1
f -acb x y
f -ab
f -x -a -- -c
f plain -a
g() { OPTIND=1; while getopts ":ab:" o "$@"; do echo "o=$o a=${OPTARG-unset}"; done; }
g -z -b
set -f; echo *; set +f; echo g*
"#;

#[test]
fn getopts_and_noglob_run_as_in_bash() {
    if !common::ready("getopts_and_noglob_run_as_in_bash", false, &["bash"]) {
        return;
    }
    let p = policy(POLICY);
    let ws = workspace(&[("g.sh", GETOPTS_SH)]);
    let bash = std::process::Command::new("bash")
        .args(["--norc", "g.sh"])
        .current_dir(ws.path())
        .output()
        .unwrap();
    let r = run_json(&p.path, ws.path(), "sh g.sh");
    assert_eq!(
        r["stdout"].as_str().unwrap(),
        String::from_utf8_lossy(&bash.stdout),
        "{r}"
    );
    assert_eq!(
        r["stderr"].as_str().unwrap(),
        String::from_utf8_lossy(&bash.stderr),
        "{r}"
    );
    // debianutils' which, a /bin/sh script with getopts and set -f.
    if std::path::Path::new("/usr/bin/which").exists() {
        let p = policy("[commands]\nallow = [\"which\", \"cat\"]\n");
        let r = run_json(&p.path, ws.path(), "which cat nosuch; echo st=$?");
        let cat = ["/usr/local/bin", "/usr/bin", "/bin"]
            .iter()
            .map(|d| Path::new(d).join("cat"))
            .find(|p| p.exists())
            .unwrap();
        assert_eq!(r["stdout"], format!("{}\nst=1\n", cat.display()), "{r}");
        assert_eq!(r["stderr"], "", "{r}");
    }
}

/// `CMD &` runs inside the run: its commands are checked as they run (a
/// refused one fails with 126 and is listed), its output is the run's,
/// `$!` and `wait` work as in bash, and a job still running when the
/// script ends does not outlive the run, nor hold its result back.
#[test]
fn background_jobs_run_inside_the_run_and_end_with_it() {
    let p = policy("[commands]\nallow = [\"echo\", \"cat\", \"sleep\", \"kill\"]\n");
    let ws = workspace(&[]);
    let r = run_json(
        &p.path,
        ws.path(),
        "c=id; $c & wait $!; echo \"st=$?\"; (echo from-bg; exit 4) & wait $!; echo \"bg=$?\"",
    );
    assert_eq!(r["stdout"], "st=126\nfrom-bg\nbg=4\n", "{r}");
    assert_eq!(r["exitCode"], 0, "the script goes on: {r}");
    let refusals = r["refusals"].as_array().unwrap();
    assert_eq!(refusals.len(), 1, "{r}");
    assert_eq!(refusals[0]["rule"], "command.not-allowed", "{r}");
    assert_eq!(refusals[0]["file"], "<command>", "{r}");
    assert_eq!(refusals[0]["line"], 1, "{r}");

    // A background job the script leaves running: the run returns when
    // the script ends, and the job is gone with it.
    let m = common::marker(83);
    let started = std::time::Instant::now();
    let r = run_json(
        &p.path,
        ws.path(),
        &format!("sleep {m} & echo $! > bg.pid; (sleep {m}; echo never) & echo started"),
    );
    assert_eq!(r["stdout"], "started\n", "{r}");
    assert_eq!(r["exitCode"], 0, "{r}");
    assert!(
        started.elapsed() < common::PATIENCE,
        "the run waited for its background jobs: {r}"
    );
    let pid: i32 = std::fs::read_to_string(ws.path().join("bg.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(pid > 0);
    assert_eq!(common::wait_until_gone(&m), Vec::<String>::new());
    // `sleep` by itself is the job's process: `$!` is its pid (polled
    // until the job has exec'd it, a bounded wait).
    let p = policy("[commands]\nallow = [\"echo\", \"sleep\", \"kill\", \"tr\", \"seq\"]\n");
    let r = run_json(
        &p.path,
        ws.path(),
        &format!(
            "sleep {m} & for i in $(seq 600); do c=$(tr '\\0' ' ' < /proc/$!/cmdline); \
             case $c in sleep*) break;; esac; sleep 0.05; done; \
             echo \"[$c]\"; kill $!; wait $!; echo $?"
        ),
    );
    assert_eq!(r["stdout"], format!("[sleep {m} ]\n143\n"), "{r}");

    // A trap's commands built by expansions are checked when the trap
    // runs: the refused one fails with 126, named `trap` and its line.
    let r = run_json(
        &p.path,
        ws.path(),
        "t=id; trap \"echo bye; $t\" EXIT; echo hi",
    );
    assert_eq!(r["stdout"], "hi\nbye\n", "{r}");
    assert_eq!(r["exitCode"], 0, "{r}");
    assert_eq!(r["refusals"][0]["file"], "trap", "{r}");
    assert_eq!(r["refusals"][0]["rule"], "command.not-allowed", "{r}");
}

/// The shape agents write: a server in the background, a client that
/// polls it, then `kill $!`, all in one run under `network = "loopback"`.
#[test]
fn a_server_in_the_background_answers_a_client_in_the_same_run() {
    if !common::system_python3() {
        common::cannot_run("needs python3 in /usr/bin");
        return;
    }
    let p =
        policy("network = \"loopback\"\n[commands]\nallow = [\"python3\", \"kill\", \"echo\"]\n");
    let client = r#"import sys, time, urllib.request
deadline = time.monotonic() + 20
while True:
    try:
        with urllib.request.urlopen(sys.argv[1], timeout=2) as r:
            print("client:", r.status, r.read().decode().strip())
            break
    except OSError:
        if time.monotonic() > deadline:
            sys.exit("client: no answer in 20 s")
        time.sleep(0.05)
"#;
    let ws = workspace(&[("client.py", client), ("hello.txt", "hello\n")]);
    let r = run_json(
        &p.path,
        ws.path(),
        "python3 -m http.server 8123 --bind 127.0.0.1 & \
         python3 client.py http://127.0.0.1:8123/hello.txt; kill $!; wait $!; echo \"server: $?\"",
    );
    if r["status"] == "failed" {
        common::cannot_run(&format!("no network namespace here: {}", r["error"]));
        return;
    }
    assert_eq!(r["stdout"], "client: 200 hello\nserver: 143\n", "{r}");
    assert_eq!(r["exitCode"], 0, "{r}");
    assert!(
        r["stderr"]
            .as_str()
            .unwrap()
            .contains("\"GET /hello.txt HTTP/1.1\" 200"),
        "the server's log is the run's stderr: {r}"
    );
}

#[test]
fn eval_runs_its_text_in_this_shell_every_command_checked_as_it_runs() {
    let p = policy(POLICY);
    let ws = workspace(&[]);
    // eval's text is made at run time ($(...) here): each of its commands
    // is judged then; the refused one fails with 126 and names `eval:1`,
    // the allowed ones run, and what eval sets stays in this shell.
    let r = run_json(
        &p.path,
        ws.path(),
        "eval \"$(echo 'x=3; echo in $x')\"; echo after $x; eval 'id || echo refused $?'; f() { eval 'return 7'; echo never; }; f; echo ret $?",
    );
    assert_eq!(r["stdout"], "in 3\nafter 3\nrefused 126\nret 7\n", "{r}");
    assert!(
        r["stderr"]
            .as_str()
            .unwrap()
            .contains("eval:1: command.not-allowed"),
        "{r}"
    );
    assert_eq!(r["refusals"][0]["file"], "eval", "{r}");
    // Checked before running, eval's words are left to run time.
    let out = agent()
        .args(["check", "--json", "--policy"])
        .arg(&p.path)
        .args(["--", "eval id"])
        .output()
        .unwrap();
    let v = json(&out.stdout);
    assert_eq!(v["stages"][0]["verdict"], "atRunTime", "{v}");
}

#[test]
fn umask_ulimit_history_and_help_are_builtins_as_in_bash() {
    let p = policy(POLICY);
    let ws = workspace(&[]);
    let r = run_json(
        &p.path,
        ws.path(),
        "umask 027; umask; umask -S; echo x > f; ls -l f; ulimit -n 64 && ulimit -n; ulimit -S -n 65; echo $?; history; help cd",
    );
    let out = r["stdout"].as_str().unwrap();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[..2], ["0027", "u=rwx,g=rx,o="], "{r}");
    assert!(lines[2].starts_with("-rw-r----- "), "{r}");
    assert_eq!(lines[3], "64", "{r}");
    // Raising a limit past the hard one fails, and says why.
    assert_eq!(lines[4], "1", "{r}");
    assert!(
        r["stderr"]
            .as_str()
            .unwrap()
            .contains("ulimit: open files: cannot modify limit"),
        "{r}"
    );
    assert!(lines[5].starts_with("cd: a shell builtin"), "{r}");
    assert_eq!(r["exitCode"], 0, "{r}");
}

#[test]
fn shopt_globstar_matches_any_depth_as_bash_does() {
    let p = policy(POLICY);
    let ws = workspace(&[]);
    for f in [
        "a.py",
        "src/b.py",
        "src/pkg/c.py",
        "src/pkg/d.txt",
        ".hidden/e.py",
    ] {
        let path = ws.path().join(f);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, "").unwrap();
    }
    std::os::unix::fs::symlink("src", ws.path().join("link")).unwrap();
    let script = "echo **/*.py; shopt -s globstar; echo **/*.py; echo src/**; echo **/; shopt globstar; shopt -q globstar && echo on; shopt -u globstar; echo **/*.py";
    let r = run_json(&p.path, ws.path(), script);
    let bash = bash_in(ws.path(), script);
    assert_eq!(
        r["stdout"].as_str().unwrap(),
        String::from_utf8_lossy(&bash.stdout),
        "{r}"
    );
    assert!(
        r["stdout"].as_str().unwrap().contains("src/pkg/c.py"),
        "{r}"
    );
    // An option the interpreter does not have is refused, not ignored.
    let r = run_json(&p.path, ws.path(), "shopt -s nullglob; echo $?");
    assert_eq!(r["stdout"], "1\n", "{r}");
    assert!(
        r["stderr"]
            .as_str()
            .unwrap()
            .contains("has only the globstar option"),
        "{r}"
    );
}

const PROCSUB_POLICY: &str = r#"
[commands]
allow = ["echo", "cat", "wc", "ls", "tee", "comm", "paste", "sort", "diff", "printf", "seq", "head", "yes", "find"]

[[rules]]
id = "local.cat.no-number"
commands = ["cat"]
option = ["-n"]
reason = "cat -n is refused here"
hint = "number the lines otherwise"
"#;

/// Process substitution as bash runs it, compared with bash on the same
/// text in identical directories (stdout and exit status): `<(...)` read
/// by programs and by builtins, `>(...)` written by a program and by a
/// redirection, the paths bash gives (`/dev/fd/63` first), `$!` and
/// `wait` for the list, a sourced one.
#[test]
fn process_substitution_runs_as_in_bash() {
    if !common::ready("process_substitution_runs_as_in_bash", false, &["bash"]) {
        return;
    }
    let p = policy(PROCSUB_POLICY);
    let cases = [
        "diff <(printf 'a\\nb\\n') <(printf 'a\\nc\\n')",
        "while read -r l; do echo \"[$l]\"; done < <(printf '1\\n2\\n')",
        "comm -12 <(printf 'a\\nb\\nc\\n') <(printf 'b\\nc\\nd\\n'); paste <(seq 3) <(seq 4 6)",
        "read x < <(echo hi); echo \"$x\"; cat <(echo a) <(echo b) | sort -r",
        "diff <(echo same) <(echo same) && echo equal",
        "tee >(cat > out.txt) >/dev/null <<< y; wait $!; cat out.txt",
        "echo hi > >(cat > o2.txt); wait $!; cat o2.txt",
        "true <(exit 3); wait $!; echo $?",
        "echo a<(true)b <(true) >(true)",
        "head -1 <(yes); echo st=$?",
        "mapfile -t a < <(printf 'x\\ny\\n'); echo ${#a[@]} ${a[1]}; exec 3< <(echo e3); cat <&3",
        "source <(echo 'v=42'); echo $v",
        "f() { cat \"$1\"; }; f <(echo func); x=$(cat <(echo sub)); echo $x",
        "set -e; cat <(false; echo after); echo st=$?",
        "n=0; while read -r f; do n=$((n+1)); done < <(find . -name '*.txt'); echo $n",
    ];
    for cmd in cases {
        let ws = workspace(&[("a.txt", "1\n"), ("b.txt", "2\n")]);
        let bash = bash_in(ws.path(), cmd);
        let ws = workspace(&[("a.txt", "1\n"), ("b.txt", "2\n")]);
        let r = run_json(&p.path, ws.path(), cmd);
        assert_eq!(
            r["stdout"].as_str().unwrap(),
            String::from_utf8_lossy(&bash.stdout),
            "{cmd}: {r}"
        );
        assert_eq!(r["exitCode"], bash.status.code().unwrap(), "{cmd}: {r}");
    }
}

/// Under the embedded default policy (its confinement and mount view),
/// `/dev/fd/N` reaches the pipe from a program, a builtin's redirection
/// and a loop's; and as an account other than root.
#[test]
fn process_substitution_works_under_the_default_confinement() {
    let cmd = "diff <(printf 'a\\n') <(printf 'b\\n'); cat <(echo a); read x < <(echo hi); echo $x; \
               while read -r l; do echo \"[$l]\"; done < <(printf '1\\n2\\n'); echo end > >(cat)";
    let want = "1c1\n< a\n---\n> b\na\nhi\n[1]\n[2]\nend\n";
    let uids: &[u32] = if common::root() { &[0, 65534] } else { &[] };
    let out = agent().args(["run", "--json", "--", cmd]).output().unwrap();
    let r = json(&out.stdout);
    assert_eq!(r["stdout"], want, "{r}");
    assert_eq!(r["exitCode"], 0, "{r}");
    assert_eq!(r["confinement"]["landlock"]["enforced"], true, "{r}");
    for &uid in uids.iter().filter(|u| **u != 0) {
        let out = agent_as(uid)
            .env_remove("AGENT_RSH_POLICY")
            .args(["run", "--json", "--", cmd])
            .output()
            .unwrap();
        let r = json(&out.stdout);
        assert_eq!(r["stdout"], want, "uid {uid}: {r}");
        assert_eq!(r["exitCode"], 0, "uid {uid}: {r}");
    }
}

/// The list inside `<(...)` is checked as a command substitution's:
/// written out, before anything runs (the script is refused whole and
/// names the program); from expansions, when it runs (the script stops
/// with 126 once the command reading it ends; inside a script file the
/// list fails with 126 and the script goes on). The command that gets
/// the path is judged after expansion like any other.
#[test]
fn a_refused_program_inside_a_process_substitution_is_refused_by_name() {
    let p = policy(PROCSUB_POLICY);
    let ws = workspace(&[]);
    let r = run_json(&p.path, ws.path(), "echo hi > m.txt; diff <(id) m.txt");
    assert_eq!(r["status"], "denied", "{r}");
    assert_eq!(r["denial"]["rule"], "command.not-allowed", "{r}");
    assert!(
        r["denial"]["reason"].as_str().unwrap().contains("`id`"),
        "{r}"
    );
    assert_eq!(r["denial"]["offset"], 24, "{r}");
    assert!(!ws.path().join("m.txt").exists(), "nothing ran: {r}");

    let r = run_json(&p.path, ws.path(), "c=id; cat <($c); echo after");
    assert_eq!(r["status"], "denied", "{r}");
    assert_eq!(r["stdout"], "", "{r}");
    assert_eq!(r["denial"]["rule"], "command.not-allowed", "{r}");
    let reason = r["denial"]["reason"].as_str().unwrap();
    assert!(
        reason.contains("`id`") && reason.contains("after expansion"),
        "{r}"
    );

    let r = run_json(
        &p.path,
        ws.path(),
        "c=id; echo before; while read -r l; do echo \"$l\"; done < <($c); echo after",
    );
    assert_eq!(r["status"], "denied", "{r}");
    assert_eq!(r["stdout"], "before\n", "{r}");

    // The outer command: a refused program, and a refused argument of an
    // allowed one, with the path among its arguments.
    let r = run_json(&p.path, ws.path(), "echo x; id <(echo a)");
    assert_eq!(r["status"], "denied", "{r}");
    assert_eq!(r["stdout"], "", "{r}");
    assert!(
        r["denial"]["reason"].as_str().unwrap().contains("`id`"),
        "{r}"
    );
    let r = run_json(&p.path, ws.path(), "cat <(echo a) -n");
    assert_eq!(r["status"], "denied", "{r}");
    assert_eq!(r["denial"]["rule"], "local.cat.no-number", "{r}");
    assert_eq!(r["stdout"], "", "{r}");

    let ws = workspace(&[("s.sh", "c=id\ncat <($c)\necho \"after $?\"\n")]);
    let r = run_json(&p.path, ws.path(), "sh s.sh");
    assert_eq!(r["stdout"], "after 0\n", "{r}");
    assert_eq!(r["exitCode"], 0, "{r}");
    assert_eq!(r["refusals"][0]["file"], "s.sh", "{r}");
    assert_eq!(r["refusals"][0]["line"], 2, "{r}");
}

/// The shell's end of each pipe is open in the command that gets the
/// path (and the programs it starts) and nowhere else: not in the list
/// itself, not after the command. The lists are reaped as they end: a
/// loop of them leaves no fds and no processes behind.
#[test]
fn process_substitution_leaks_no_fd_and_no_process() {
    let p = policy(PROCSUB_POLICY);
    let ws = workspace(&[]);
    let r = run_json(
        &p.path,
        ws.path(),
        "ls /dev/fd | wc -l; f() { ls /dev/fd; }; f <(echo) >(cat) | wc -l; \
         cat <(ls /dev/fd) | wc -l; ls /dev/fd | wc -l; \
         for i in $(seq 300); do cat <(echo $i) > >(cat >/dev/null); done; ls /dev/fd | wc -l",
    );
    let counts: Vec<u64> = r["stdout"]
        .as_str()
        .unwrap()
        .lines()
        .map(|l| l.trim().parse().unwrap())
        .collect();
    let n = counts[0];
    assert_eq!(counts, [n, n + 2, n, n, n], "{r}");
    assert_eq!(r["exitCode"], 0, "{r}");
    // Where the run has a cgroup: 600 lists, never many at once.
    if let Some(peak) = r["confinement"]["resources"]["tasksPeak"].as_u64() {
        assert!(peak < 50, "{peak} tasks at once: {r}");
    }
}

/// Scripts run as files, sourced and through `bash -c`, and the builtins
/// they use, as bash runs them: each row is a difference the generated
/// scripts of `script_bash` found (stdout and status compared with bash).
#[test]
fn script_files_sourced_files_and_builtins_match_bash() {
    if !common::ready(
        "script_files_sourced_files_and_builtins_match_bash",
        false,
        &["bash"],
    ) {
        return;
    }
    let p = policy(POLICY);
    let files: &[(&str, &str)] = &[
        ("set.sh", "set -- x\n"),
        ("in.sh", "X=in\necho \"in $X\"\n"),
        ("u.sh", "set -u\necho $nope\necho never\n"),
    ];
    let cases = [
        // `for NAME;` walks the positional parameters.
        "set -- a 'b c'; for a; do echo \"<$a>\"; done; . ./in.sh; bash -c 'for a; do echo $a; done' nm p q",
        // `return` outside a function or sourced file: bash's status 2.
        "return 3; echo st=$?",
        // Prefix assignments hold for `source` and `eval` only, and are
        // exported for the call.
        "X=1; X=2 source ./in.sh; echo $X; X=3 eval 'echo $X'; echo $X",
        "f() { bash -c 'echo ${X-u}'; }; X=2 f; f",
        // `declare` and `typeset` in a function make locals (not `-g`); an
        // exported name stays exported.
        "X=out; f() { declare X=in; typeset Y=y; declare -g G=g; echo $X$Y; }; f; echo \"$X ${Y-u} $G\"",
        "export X=1; f() { declare X=2; bash -c 'echo $X'; }; f; echo $X",
        // `local NAME` again keeps the value; `local -x` exports.
        "f() { local X=1; local X; echo ${X-u}; local -x E=e; bash -c 'echo ${E-u}'; }; f",
        // A sourced file that sets the parameters with `set --` keeps them.
        "set -- a b; source ./set.sh p q; echo $# $1; set -- a b; . ./in.sh p; echo $# $1",
        // An arithmetic error in a new shell abandons its line, not the shell.
        "bash -c 'echo $((1/0)); echo same\necho next'; echo st=$?",
        // A new shell sets IFS and OPTIND itself.
        "IFS=:; OPTIND=3; bash -c 'printf \"%q\\n\" \"$IFS\"; echo $OPTIND'",
        // A subshell shows the shell's traps until it sets one. (Only EXIT
        // and USR1: a signal ignored when bash starts, as SIGINT in a
        // background job, cannot be trapped there and shows as ignored.)
        "trap 'echo x' EXIT; (trap -p EXIT); trap -p EXIT | cat; (trap 'echo y' USR1; trap -p USR1 EXIT)",
        // `x += ...` reads x before the right side changes it.
        "x=1; (( x += (x = 5) )); echo $x; y=2; (( y *= y++ )); echo $y",
        // `"$*"` joins with IFS's first character.
        "set -- a b; IFS=o; echo \"$*\"; IFS=; echo \"$*\"",
        // `set -u`: an unset array's `${a[@]}` is empty.
        "set -u; echo \"${arr[@]}\" \"${arr[*]}\" ok",
        // `${!n}` with n unset, under `set -u` too, abandons the line.
        "set -u; echo \"${!n}\" x; echo same\necho next $?",
        // A subshell's EXIT trap writes where its redirection points.
        "( trap 'echo sub' EXIT; true ) > out.txt; cat out.txt",
        // getopts past the last word leaves OPTIND one past it.
        "set -- -a; getopts a o; getopts a o; echo $OPTIND; set --; OPTIND=5; getopts a o; echo $OPTIND",
        // A fatal error ends a script file with 1, a `-c` string with 127.
        "bash u.sh; echo st=$?; bash -c 'set -u; echo $nope'; echo st=$?",
        // `set -u`: the length of an unset array abandons the line, as an
        // arithmetic error does (bash ends `${#a}`'s script).
        "set -u; echo \"${#arr[@]}\" x; echo same\necho next $?; echo ${#arr[1]}; echo same\necho end",
        // A negative index of an unset name or a scalar is a bad
        // subscript: a warning, and under `set -e` the end (with 1),
        // even on the left of `||`. Its length is 0, without a word.
        "echo ${u[-1]} ${#u[-1]}; echo st=$?; u=x; echo ${u[0]} ${u[1]}. ${u[-1]}",
        "set -e; echo \"${a[-1]}\" || echo or; echo unreachable",
        // Unquoted, `$*`, `$@` and `${a[*]}` join with IFS's first
        // character and split: `IFS=:` keeps an empty element.
        "set -- a '' b ''; IFS=:; printf '<%s>' $* $@ x$*y; a=(x:y '' z); printf '<%s>' ${a[*]}; echo",
        // `readonly`: an assignment abandons its line; a prefix
        // assignment is ignored and the command runs; a builtin that
        // would assign fails with 1; `unset`, `local`, `declare` fail.
        "readonly a=1\na=2; echo same\necho st=$?\na=2 true; echo st=$? $a\n(( a=3 )); echo st=$?\nfor a in x; do echo in; done; echo st=$?\nread a <<< x; echo st=$?\nunset a; echo st=$? $a\nexport a=5; echo st=$? $a\ndeclare a=6; echo st=$?\ndeclare -p a",
        "readonly -a r=(1 2); r[0]=5\necho st=$?; declare -p r; readonly u; echo ${u-unset}; echo ${u:=x}\nf() { local r=1; echo in $r; readonly L=2; }; f; echo st=$? $L; L=3; echo no\necho $L",
        "set -e; readonly X=1 Y; X=1 || echo or; echo after",
        // Under `set -e` such an assignment ends the shell, wherever it is.
        "set -e; readonly R=1\nf() { R=3; echo in; }\nf && echo and; echo same\necho next",
        "set -e; readonly R=1\n(R=3; echo in) || echo or\nif R=2; then echo t; fi\necho next",
        "set -e; readonly R=1\nunset R || echo or\ndeclare R=2 || echo or2\nexport R=3 || echo no\necho never",
        "set -e; readonly R=1\nif true; then read R <<< x || echo no; fi\necho never",
        "set -e; readonly R=1\n(( R++ )) || echo no\necho never",
        // ... but not in a sourced file called where `set -e` is ignored.
        "readonly R=1; printf 'set -e\\nR=2; echo no\\necho goes on\\n' > so.sh\n. ./so.sh || echo or\nif . ./so.sh; then echo t; fi\necho next",
    ];
    for cmd in cases {
        let ws = workspace(files);
        let bash = bash_in(ws.path(), cmd);
        let ws = workspace(files);
        let r = run_json(&p.path, ws.path(), cmd);
        let want = String::from_utf8_lossy(&bash.stdout);
        assert_eq!(r["stdout"].as_str().unwrap(), want, "{cmd}: {r}");
        assert_eq!(r["exitCode"], bash.status.code().unwrap(), "{cmd}: {r}");
    }
}

/// A shell's messages start as bash's do outside an interactive shell:
/// `NAME: line N: `, the command string's `$0` (agent-rsh), a script
/// file's name as given, a sourced file's, `-c`'s `$0`.
#[test]
fn messages_name_the_file_and_line_as_bash_does() {
    if !common::ready(
        "messages_name_the_file_and_line_as_bash_does",
        false,
        &["bash"],
    ) {
        return;
    }
    let p = policy(POLICY);
    let files = &[
        ("s.sh", "true\necho ${x?nox}\n"),
        ("t.sh", "f() {\n  echo ${y?}\n}\n"),
    ];
    for cmd in [
        "true\necho ${u:?}",
        "bash s.sh; echo st=$?",
        "bash ./s.sh; echo st=$?",
        ". ./t.sh; f; echo unreachable",
        "bash -c 'true\npushd nowhere\necho ${n?}' nm; echo st=$?",
        "set -u\nf() {\n  echo $((1/0))\n}\nf; a=(1); echo ${a[-3]} $zz",
        "readonly a=1\n(( a=3 ))\nlet a=4\nf() { local a; }; f\nunset a; a=5",
    ] {
        let ws = workspace(files);
        // Named agent-rsh: bash's `$0`, as agent-rsh's command string's.
        let bash = std::process::Command::new("bash")
            .args(["--norc", "--noprofile", "-c", cmd, "agent-rsh"])
            .current_dir(ws.path())
            .output()
            .unwrap();
        let ws = workspace(files);
        let r = run_json(&p.path, ws.path(), cmd);
        let want = String::from_utf8_lossy(&bash.stderr)
            // bash calls a function's place `environment` in a `-c` string.
            .replace("environment: ", "agent-rsh: ");
        assert_eq!(r["stderr"].as_str().unwrap(), want, "{cmd}: {r}");
        assert_eq!(r["exitCode"], bash.status.code().unwrap(), "{cmd}: {r}");
    }
}

/// `alias` and `unalias` as in a bash that is not interactive: aliases are
/// kept and printed, never expanded (the same script, compared with bash).
#[test]
fn alias_defines_and_prints_but_does_not_expand_as_in_bash() {
    let p = policy(POLICY);
    let ws = workspace(&[]);
    let script = "alias ll='ls -la' q=\"it's\"; alias; alias ll; alias nope; echo \"st $?\"; \
                  unalias ll; alias -p; unalias ll; echo \"st $?\"; unalias -a; alias; echo end";
    let r = run_json(&p.path, ws.path(), script);
    let bash = bash_in(ws.path(), script);
    assert_eq!(
        r["stdout"],
        String::from_utf8_lossy(&bash.stdout).as_ref(),
        "{r}"
    );
    assert_eq!(
        r["stdout"],
        "alias ll='ls -la'\nalias q='it'\\''s'\nalias ll='ls -la'\nst 1\nalias q='it'\\''s'\nst 1\nend\n",
        "{r}"
    );
    let err = r["stderr"].as_str().unwrap();
    assert!(err.contains("alias: nope: not found"), "{r}");
    assert!(err.contains("unalias: ll: not found"), "{r}");
    assert_eq!(r["exitCode"], 0, "{r}");
}
