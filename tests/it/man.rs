//! The man page and the completion scripts come from the CLI itself.
//!
//! `man/agent-rsh.1` is `man/agent-rsh.1.in` (the prose) with its SYNOPSIS
//! and OPTIONS generated from the clap definition by clap_mangen. The test
//! regenerates the page and fails when the committed one differs;
//! `AGENT_RSH_UPDATE_MAN=1 cargo test --release man_page` rewrites it.

use clap::Command;
use std::path::Path;
use std::process::Command as Process;

const BIN: &str = env!("CARGO_BIN_EXE_agent-rsh");
const DIR: &str = env!("CARGO_MANIFEST_DIR");

/// Every visible subcommand with its full name, nested ones included
/// (`agent-rsh policy show`), but not a group itself (`agent-rsh policy`).
fn subcommands() -> Vec<(String, Command)> {
    fn walk(prefix: &str, cmd: &Command, out: &mut Vec<(String, Command)>) {
        for sub in cmd.get_subcommands().filter(|c| !c.is_hide_set()) {
            let name = format!("{prefix} {}", sub.get_name());
            if sub.has_subcommands() {
                walk(&name, sub, out);
            } else {
                out.push((name, sub.clone()));
            }
        }
    }
    let mut out = Vec::new();
    walk("agent-rsh", &agent_rsh::cli::command(), &mut out);
    out
}

/// One section as clap_mangen renders it, without its `.SH` heading and
/// the string definitions it repeats before each section.
fn section(cmd: Command, render: fn(&clap_mangen::Man, &mut dyn std::io::Write)) -> String {
    let mut out = Vec::new();
    render(&clap_mangen::Man::new(cmd), &mut out);
    String::from_utf8(out)
        .expect("roff is UTF-8")
        .lines()
        .filter(|l| !l.starts_with(".SH ") && !l.starts_with(".ie ") && !l.starts_with(".el "))
        .map(|l| format!("{}\n", l.trim_end()))
        .collect()
}

fn synopsis(m: &clap_mangen::Man, w: &mut dyn std::io::Write) {
    m.render_synopsis_section(w).unwrap();
}

fn options(m: &clap_mangen::Man, w: &mut dyn std::io::Write) {
    m.render_options_section(w).unwrap();
}

/// The page: the template with the generated sections in place.
fn generate() -> String {
    let template = std::fs::read_to_string(Path::new(DIR).join("man/agent-rsh.1.in")).unwrap();
    let subs = subcommands();
    let mut syn = String::new();
    let mut opts = String::new();
    // The global options (--policy, --help, --version) once.
    opts.push_str(".SS \"Every subcommand\"\n");
    opts.push_str(&section(agent_rsh::cli::command(), options));
    for (name, cmd) in subs {
        // Each subcommand's own flags (the global ones are above).
        let cmd = cmd.bin_name(&name).disable_help_flag(true);
        syn.push_str(&section(cmd.clone(), synopsis));
        syn.push_str(".br\n");
        opts.push_str(&format!(".SS \"{name}\"\n"));
        opts.push_str(&section(cmd, options));
    }
    let mut page = String::new();
    for line in template.lines() {
        if line.starts_with(".TH ") {
            page.push_str(line);
            page.push_str(
                "\n.\\\" Generated from man/agent-rsh.1.in and the CLI's doc comments: edit\n\
                 .\\\" those, then run AGENT_RSH_UPDATE_MAN=1 cargo test --release man_page.\n\
                 .ie \\n(.g .ds Aq \\(aq\n\
                 .el .ds Aq '\n",
            );
        } else if line.starts_with(".\\\" @SYNOPSIS@") {
            page.push_str(&syn);
        } else if line.starts_with(".\\\" @OPTIONS@") {
            page.push_str(&opts);
        } else {
            page.push_str(line);
            page.push('\n');
        }
    }
    page
}

#[test]
fn man_page_is_generated_from_the_cli() {
    let page = generate();
    let path = Path::new(DIR).join("man/agent-rsh.1");
    if std::env::var_os("AGENT_RSH_UPDATE_MAN").is_some() {
        std::fs::write(&path, &page).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap();
    assert!(
        committed == page,
        "man/agent-rsh.1 is not what man/agent-rsh.1.in and the CLI generate; \
         run AGENT_RSH_UPDATE_MAN=1 cargo test --release man_page and commit the result"
    );
}

/// The long flags a help text shows (`--policy`, `--max-output`, ...).
fn long_flags(help: &str) -> Vec<String> {
    let mut flags = Vec::new();
    for (i, _) in help.match_indices("--") {
        let before = help[..i].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '-') {
            continue;
        }
        let name: String = help[i + 2..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
            .collect();
        if !name.is_empty() && !flags.contains(&name) {
            flags.push(name);
        }
    }
    flags
}

#[test]
fn every_long_flag_help_shows_is_in_the_man_page() {
    // What the page is generated as (the test above keeps the committed
    // page equal to it).
    let page = generate();
    let mut seen = 0;
    let mut missing = Vec::new();
    let mut names = vec![String::from("agent-rsh")];
    names.extend(subcommands().into_iter().map(|(n, _)| n));
    for name in names {
        let out = Process::new(BIN)
            .args(name.split(' ').skip(1))
            .arg("--help")
            .output()
            .unwrap();
        assert!(out.status.success(), "{name} --help: {out:?}");
        for flag in long_flags(&String::from_utf8_lossy(&out.stdout)) {
            seen += 1;
            let roff = format!("\\-\\-{}", flag.replace('-', "\\-"));
            if !page.contains(&roff) {
                missing.push(format!("{name}: --{flag}"));
            }
        }
    }
    assert!(seen > 40, "only {seen} flags found in the help texts");
    assert!(missing.is_empty(), "not in the man page: {missing:?}");
}

#[test]
fn completions_are_generated_for_bash_zsh_and_fish() {
    for (shell, marker) in [
        ("bash", "complete -F _agent__rsh"),
        ("zsh", "#compdef agent-rsh"),
        ("fish", "complete -c agent-rsh"),
    ] {
        let out = Process::new(BIN)
            .args(["completions", shell])
            .output()
            .unwrap();
        assert!(out.status.success(), "{shell}: {out:?}");
        let script = String::from_utf8(out.stdout).unwrap();
        assert!(script.contains(marker), "{shell}: {script}");
        // Subcommands and flags, including the flattened job commands and
        // the global --policy; never the internal supervisor entry.
        for word in ["spawn", "completions", "policy", "max-output"] {
            assert!(script.contains(word), "{shell} lacks {word}");
        }
        assert!(!script.contains("__supervise"), "{shell}");
    }
    // The bash script is valid bash.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("agent-rsh.bash");
    let out = Process::new(BIN)
        .args(["completions", "bash"])
        .output()
        .unwrap();
    std::fs::write(&file, out.stdout).unwrap();
    let check = Process::new("bash").arg("-n").arg(&file).output().unwrap();
    assert!(check.status.success(), "{check:?}");
    // An unknown shell is a usage error.
    let out = Process::new(BIN)
        .args(["completions", "tcsh"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}
