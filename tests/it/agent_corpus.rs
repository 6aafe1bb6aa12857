//! The shell inside the run, measured: `tests/agent_corpus.txt` holds
//! commands as a coding agent types them in a terminal while it builds,
//! tests, debugs and explores a project. Each is checked (`check --json`,
//! nothing runs) by the real binary under the coding profile as `policy
//! init --profile coding` writes it, with every program the corpus names
//! added to `commands.allow`, and a workspace. A refusal for the shell's
//! syntax, the command's length, a redirection into /tmp or running a
//! script or program of the project's own is a refusal of the coding loop
//! itself: the target is at most 1% of the corpus; until it is reached the
//! test holds the share measured (`MEASURED_PER_MILLE`). Refusals by
//! guards and argument rules are listed, not counted.

use crate::common::{self, BIN};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

/// Entries of the corpus file: a line each, or the lines between `{{{`
/// and `}}}`; `# ` comments and blank lines skipped; `@WS@` is the
/// workspace.
fn entries(ws: &Path) -> Vec<String> {
    let text = include_str!("../agent_corpus.txt");
    let mut out = Vec::new();
    let mut block: Option<Vec<&str>> = None;
    for line in text.lines() {
        match (&mut block, line) {
            (None, "{{{") => block = Some(Vec::new()),
            (Some(b), "}}}") => {
                out.push(b.join("\n"));
                block = None;
            }
            (Some(b), l) => b.push(l),
            (None, l) if l.is_empty() || l == "#" || l.starts_with("# ") => {}
            (None, l) => out.push(l.to_string()),
        }
    }
    assert!(block.is_none(), "unclosed {{{{{{ block");
    let ws = ws.to_str().unwrap();
    let mut out: Vec<String> = out.into_iter().map(|e| e.replace("@WS@", ws)).collect();
    out.extend(large_heredocs());
    out
}

/// Here-documents over 8,192 bytes, as an agent writes a fixture, a data
/// file or a long program in one command.
fn large_heredocs() -> Vec<String> {
    let mut py = String::from("cat > test_fixtures.py <<'EOF'\nimport pytest\n\nCASES = [\n");
    for i in 0..400 {
        py.push_str(&format!("    ({i}, {}, \"case-{i:04}\"),\n", i * i));
    }
    py.push_str("]\n\n@pytest.mark.parametrize(\"n,sq,name\", CASES)\ndef test_square(n, sq, name):\n    assert n * n == sq\nEOF\npytest -q test_fixtures.py");

    let mut script = String::from("python3 - <<'EOF'\nimport json\nrows = []\n");
    for i in 0..300 {
        script.push_str(&format!(
            "rows.append({{\"id\": {i}, \"name\": \"item{i}\", \"price\": {}.{:02}}})\n",
            i % 97,
            i % 100
        ));
    }
    script.push_str("print(json.dumps(rows)[:200])\nEOF");

    let mut data = String::from("cat > data/users.csv <<EOF\nid,name,email,created\n");
    for i in 0..350 {
        data.push_str(&format!(
            "{i},user{i},user{i}@example.com,2024-01-{:02}\n",
            i % 28 + 1
        ));
    }
    data.push_str("EOF\nwc -l data/users.csv");

    let mut c = String::from(
        "cat > src/table.c <<'EOF'\n#include <stdio.h>\n\nstatic const int table[] = {\n",
    );
    for i in 0..1200 {
        c.push_str(&format!("    {},\n", (i * 2654435761u64) % 65521));
    }
    c.push_str("};\n\nint main(void) {\n    long s = 0;\n    for (unsigned i = 0; i < sizeof table / sizeof *table; i++) s += table[i];\n    printf(\"%ld\\n\", s);\n    return 0;\n}\nEOF\ngcc -O2 -o table src/table.c && ./table");

    let all = vec![py, script, data, c];
    for e in &all {
        assert!(e.len() > 8192, "a large here-document is {} bytes", e.len());
    }
    all
}

fn check(policy: &Path, ws: &Path, cmd: &str) -> Value {
    let out = Command::new(BIN)
        .env_remove("AGENT_RSH_POLICY")
        .args(["check", "--json", "--policy"])
        .arg(policy)
        .arg("--workspace")
        .arg(ws)
        .arg("--")
        .arg(cmd)
        .output()
        .unwrap();
    common::json(&out.stdout)
}

/// Every entry checked, in order, on a few threads.
fn check_all(policy: &Path, ws: &Path, corpus: &[String]) -> Vec<Value> {
    let chunk = corpus.len().div_ceil(8);
    std::thread::scope(|s| {
        let parts: Vec<_> = corpus
            .chunks(chunk)
            .map(|part| {
                s.spawn(move || {
                    part.iter()
                        .map(|c| check(policy, ws, c))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        parts.into_iter().flat_map(|h| h.join().unwrap()).collect()
    })
}

/// Program names of a verdict: the first word of every simple command
/// that is a program (not a builtin, a function or a path), from the
/// verdict's stages and from the parsed script (where a command's other
/// words come from expansions, its stage has no argv).
fn programs(v: &Value, names: &mut BTreeSet<String>) {
    let mut add = |n: &str| {
        let plain = n
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._+-".contains(&b));
        if plain && n.as_bytes()[0].is_ascii_alphanumeric() {
            names.insert(n.to_string());
        }
    };
    if let Some(stages) = v["stages"].as_array() {
        for s in stages {
            if s["kind"] != "builtin"
                && s["kind"] != "function"
                && let Some(n) = s["argv"].get(0).and_then(Value::as_str)
            {
                add(n);
            }
        }
    } else if let Some(n) = v["argv"].get(0).and_then(Value::as_str) {
        add(n);
    }
    let mut todo = vec![&v["script"]];
    while let Some(node) = todo.pop() {
        match node {
            Value::Array(xs) => todo.extend(xs),
            Value::Object(m) => {
                if m.get("type").and_then(Value::as_str) == Some("simple") {
                    let parts = &m["words"][0]["parts"];
                    if parts.as_array().map(Vec::len) == Some(1) && parts[0]["type"] == "lit" {
                        add(parts[0]["value"].as_str().unwrap_or(""));
                    }
                }
                todo.extend(m.values());
            }
            _ => {}
        }
    }
}

/// Where a refusal counts: syntax, length, /tmp, script, or other.
fn category(rule: &str, reason: &str) -> &'static str {
    let tmp = reason.contains("/tmp");
    if rule == "lex.too-long" || rule.starts_with("limits.") || reason.contains("max_command_bytes")
    {
        "length"
    } else if rule.starts_with("syntax.") || rule.starts_with("lex.") {
        "syntax"
    } else if tmp
        && (rule.starts_with("redirect.") || rule.starts_with("cd.") || rule.starts_with("path"))
    {
        "tmp"
    } else if rule == "command.path" || rule.starts_with("script.") || rule == "command.workspace" {
        "script"
    } else {
        "other"
    }
}

const COUNTED: [&str; 4] = ["syntax", "length", "tmp", "script"];

/// The share of the corpus refused for syntax, length, /tmp or script
/// reasons as last measured (per mille); at 10 or below the test holds the
/// 1% bar itself. 2 of 671 (0.30%) since the interpreter runs process
/// substitution (`diff <(...) <(...)`, `done < <(...)`) and `alias`, after
/// the run's private /tmp took the 7 refusals of `/tmp` and the
/// interpreter took `eval`, `history`, `help`, `ulimit`, `umask` and
/// `shopt -s globstar`: both for syntax agent-rsh does not run (`select`,
/// `export -f`).
const MEASURED_PER_MILLE: usize = 3;

#[test]
fn agent_corpus_refusals_for_the_coding_loop_do_not_grow_past_the_measured_share() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("project");
    for d in [
        "src",
        "tests/fixtures",
        "build",
        "data",
        "scripts",
        ".venv/bin",
        "frontend",
        "backend",
    ] {
        std::fs::create_dir_all(ws.join(d)).unwrap();
    }
    let ws = ws.canonicalize().unwrap();
    let base = dir.path().join("coding.toml");
    let st = Command::new(BIN)
        .env_remove("AGENT_RSH_POLICY")
        .args(["policy", "init", "--profile", "coding"])
        .arg(&base)
        .status()
        .unwrap();
    assert!(st.success());
    let corpus = entries(&ws);
    assert!(corpus.len() >= 400, "corpus has {} entries", corpus.len());
    let distinct: BTreeSet<&String> = corpus.iter().collect();
    assert_eq!(distinct.len(), corpus.len(), "the corpus repeats an entry");

    // Every program the corpus names, added to the allowlist.
    let mut names = BTreeSet::new();
    for v in check_all(&base, &ws, &corpus) {
        programs(&v, &mut names);
    }
    let text = std::fs::read_to_string(&base).unwrap();
    let missing: Vec<String> = names
        .iter()
        .filter(|n| !text.contains(&format!("\"{n}\"")))
        .map(|n| format!("\"{n}\""))
        .collect();
    let at = text.find("[commands]").unwrap();
    let at = at + text[at..].find("allow = [\n").unwrap() + "allow = [\n".len();
    let text = format!(
        "{}  # named by the corpus\n  {},\n{}",
        &text[..at],
        missing.join(", "),
        &text[at..]
    );
    let policy = dir.path().join("corpus.toml");
    std::fs::write(&policy, &text).unwrap();
    let st = Command::new(BIN)
        .args(["policy", "check"])
        .arg(&policy)
        .status()
        .unwrap();
    assert!(st.success(), "the widened policy is valid");

    // (category, rule) -> entries with their reason
    let mut refused: BTreeMap<(&str, String), Vec<(String, String)>> = BTreeMap::new();
    // kind of stage -> entries allowed with a stage left to the run
    let mut deferred: BTreeMap<String, usize> = BTreeMap::new();
    let mut entries_deferred = 0;
    for (cmd, v) in corpus.iter().zip(check_all(&policy, &ws, &corpus)) {
        if v["verdict"] != "deny" {
            let kinds: BTreeSet<String> = v["stages"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|s| s["verdict"] == "atRunTime")
                .map(|s| s["kind"].as_str().unwrap_or("?").to_string())
                .collect();
            entries_deferred += usize::from(!kinds.is_empty());
            for k in kinds {
                *deferred.entry(k).or_default() += 1;
            }
        }
        if v["verdict"] == "deny" {
            let rule = v["denial"]["rule"].as_str().unwrap_or("?").to_string();
            let reason = v["denial"]["reason"].as_str().unwrap_or("").to_string();
            let cat = category(&rule, &reason);
            refused
                .entry((cat, rule))
                .or_default()
                .push((cmd.clone(), reason));
        }
    }

    let n = corpus.len();
    let mut per_cat: BTreeMap<&str, usize> = BTreeMap::new();
    for ((cat, _), es) in &refused {
        *per_cat.entry(cat).or_default() += es.len();
    }
    let short = |s: &str| {
        let one = s.replace('\n', "⏎");
        if one.chars().count() > 110 {
            format!("{}…", one.chars().take(110).collect::<String>())
        } else {
            one
        }
    };
    eprintln!(
        "\nagent corpus: {n} commands, {} programs named and allowed",
        names.len()
    );
    eprintln!("{:<8} {:>5} {:>7}", "category", "count", "share");
    for cat in COUNTED.iter().chain(&["other"]) {
        let c = per_cat.get(cat).copied().unwrap_or(0);
        eprintln!("{cat:<8} {c:>5} {:>6.2}%", 100.0 * c as f64 / n as f64);
    }
    for ((cat, rule), es) in &refused {
        eprintln!("\n[{cat}] {rule}: {} refused", es.len());
        for (cmd, reason) in es {
            eprintln!("    {}\n        {}", short(cmd), short(reason));
        }
    }
    eprintln!(
        "\nallowed with a command judged only when it runs (a script, a name \
         from an expansion, a name the workspace may provide): {entries_deferred} \
         entries; by kind of command: {deferred:?}"
    );
    let counted: usize = COUNTED
        .iter()
        .map(|c| per_cat.get(c).copied().unwrap_or(0))
        .sum();
    let per_mille = (counted * 1000).div_ceil(n);
    eprintln!(
        "\nrefused for syntax, length, /tmp or script reasons: {counted} of {n} ({:.2}%)",
        100.0 * counted as f64 / n as f64
    );
    if MEASURED_PER_MILLE > 10 {
        // Not there yet: hold the line at the figure measured.
        assert!(
            per_mille <= MEASURED_PER_MILLE,
            "{per_mille}‰ refused, was {MEASURED_PER_MILLE}‰"
        );
    } else {
        assert!(
            counted * 100 <= n,
            "{counted} of {n} refused for the coding loop"
        );
    }
}
