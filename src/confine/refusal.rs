//! The warning for a run that failed the way a kernel refusal looks: which
//! layer most likely refused, and what it refused (the path or program
//! named on the line of stderr that carries the error), so the caller can
//! change the command or ask for the policy key that widens that layer.

use super::Report;
use super::landlock::LandlockReport;
use crate::policy::Network;
use std::path::Path;

/// The error texts of EACCES, ENOENT and EPERM: strerror's (C tools,
/// shells, Python) and Node's (`EACCES: permission denied, open '...'`).
const EACCES: &[&str] = &["Permission denied", "permission denied", "EACCES"];
const ENOENT: &[&str] = &["No such file or directory", "no such file or directory"];
const EPERM: &[&str] = &[
    "Operation not permitted",
    "operation not permitted",
    "EPERM",
];

/// A warning for a run that failed the way a kernel refusal looks, naming
/// the layer that most likely refused and what it refused; None when the
/// run does not look so.
pub fn refusal_hint(report: &Report, exit_code: Option<i32>, stderr: &str) -> Option<String> {
    if exit_code == Some(0) {
        return None;
    }
    let eacces = seen(stderr, EACCES);
    let enoent = seen(stderr, ENOENT);
    let eperm = seen(stderr, EPERM);
    let net = stderr.contains("Network is unreachable")
        || stderr.contains("Address family not supported")
        || stderr.contains("Cannot assign requested address");
    let mut hints = Vec::new();
    if eacces && report.landlock.enforced {
        hints.push(landlock_hint(
            &report.landlock,
            subject(stderr, EACCES).as_deref(),
        ));
    }
    if enoent && report.mount_view {
        match subject(stderr, ENOENT) {
            // Relative to the working directory, inside the workspace
            // (which the view holds), or absent on the host too: a real
            // "no such file", nothing the view did.
            Some(s) if !s.starts_with('/') || !Path::new(&s).exists() => {}
            named => hints.push(format!(
                "\"No such file or directory\"{} may be the run's private mount view: only the read, write and exec scopes, the workspace and the allowed programs exist inside it (and Landlock refuses what the view shows beyond the scopes); {} in the policy if the command really needs it",
                named.as_deref().map(|s| format!(" for {s}")).unwrap_or_default(),
                named.as_deref().map_or_else(
                    || "widen scopes.read or scopes.write".to_string(),
                    |s| format!("add {s} to scopes.read (or scopes.write to change it)")
                ),
            )),
        }
    }
    // An inet socket refused by the policy's network setting is said by
    // the engine's "network is off by the policy" warning instead.
    if eperm && report.seccomp.enforced && !inet_socket_refused(report, stderr) {
        hints.push(format!(
            "\"Operation not permitted\"{} inside the run is most likely the seccomp filter (refused: {}; sockets: {} only) or dropped capabilities",
            subject(stderr, EPERM)
                .map(|s| format!(" for {s}"))
                .unwrap_or_default(),
            report.seccomp.denied.join("; "),
            report.seccomp.socket_families.join(", ")
        ));
    }
    if report.mount_view && stderr.contains("Read-only file system") {
        hints.push(format!(
            "\"Read-only file system\"{} inside the run is the mount view: outside the workspace and the write scopes everything is mounted read-only; write in the workspace or the run's TMPDIR, or add the directory to scopes.write in the policy",
            subject(stderr, &["Read-only file system"])
                .map(|s| format!(" for {s}"))
                .unwrap_or_default()
        ));
    }
    // The loader refused to map a shared object executable: Landlock's
    // execute right covers mmap of code (a C extension pip built, a
    // plugin), so the file's directory needs the exec grant.
    if stderr.contains("failed to map segment from shared object") {
        hints.push(
            "\"failed to map segment from shared object\": a library may be mapped as code only where the run may execute; a project's own build (a C extension, a plugin) needs commands.workspace = true, a library elsewhere its directory in scopes.exec".to_string(),
        );
    }
    // A compiler that cannot find a header: the include directory is not
    // readable in the run.
    if let Some(h) = stderr.lines().find_map(missing_header) {
        hints.push(format!(
            "the compiler found no header {h}: its include directory (usually /usr/include) must be in scopes.read; `agent-rsh policy init --profile coding` writes the directories of the compilers it finds"
        ));
    }
    // gcc could not start cc1, as or collect2: the helper's directory is
    // not in the run (or not executable).
    if let Some(line) = stderr
        .lines()
        .find(|l| l.contains("fatal error: cannot execute"))
    {
        hints.push(format!(
            "{}: the compiler starts its helpers (cc1, as, collect2, ld) itself, so their directories must be in scopes.read and scopes.exec and as and ld allowed; `agent-rsh policy init --profile coding` writes what the compilers it finds need",
            line.trim()
        ));
    }
    if net && (report.network_namespace || report.seccomp.enforced) {
        hints.push(match report.network {
            Network::Loopback => "the run reaches only 127.0.0.1 and ::1 (network = \"loopback\" in the policy): its network namespace has no interface but loopback".to_string(),
            Network::Allow => "the host's network did not answer (network = \"allow\")".to_string(),
            Network::None => "the run has no network (network = \"none\" in the policy): no interfaces, only UNIX sockets".to_string(),
            Network::Domains => "the run reaches only the policy's network.allow hosts, through agent-rsh's proxy (HTTPS_PROXY); its network namespace has no other way out".to_string(),
        });
    }
    (!hints.is_empty()).then(|| hints.join("; "))
}

/// gcc's and clang's `fatal error: stdio.h: No such file or directory` /
/// `fatal error: 'stdio.h' file not found`: the header named.
fn missing_header(line: &str) -> Option<&str> {
    let rest = &line[line.find("fatal error: ")? + "fatal error: ".len()..];
    let h = rest
        .strip_suffix(": No such file or directory")
        .or_else(|| rest.strip_suffix(" file not found"))?
        .trim_matches('\'');
    h.ends_with(".h").then_some(h)
}

/// Whether stderr shows an inet socket refused by the seccomp filter (the
/// policy's network is off): "Operation not permitted" (or Node's EPERM)
/// from a socket call.
pub fn inet_socket_refused(report: &Report, stderr: &str) -> bool {
    report.seccomp.enforced
        && !report.seccomp.socket_families.contains(&"inet")
        && seen(stderr, EPERM)
        && (stderr.contains("socket") || stderr.contains("connect EPERM"))
}

/// The Landlock warning, for what `subject` names where a line says so.
fn landlock_hint(landlock: &LandlockReport, subject: Option<&str>) -> String {
    let tcp = if landlock.restricts.contains(&"tcp-bind-connect") {
        "; TCP bind and connect are refused (network = \"none\")"
    } else {
        ""
    };
    let Some(s) = subject else {
        return format!(
            "\"Permission denied\" inside the run is most likely Landlock: only the allowlisted programs and scopes.exec may be executed, files may be read only under the read scopes, the workspace and those programs, and written only in the workspace, the write scopes and /dev/null{tcp} (widen scopes.read, scopes.write or scopes.exec in the policy if the command really needs more)"
        );
    };
    if s.starts_with("./") || s.starts_with("../") {
        // What a shell or make names when it starts one of the project's
        // own files: executing it is a grant, not a read scope.
        return format!(
            "\"Permission denied\" for {s}: a file of the project's own executes only when it has the execute bit (chmod +x) and the policy sets commands.workspace = true (the coding and ci profiles do); scopes.read does not make it executable"
        );
    }
    if executable(s) {
        let name = s.rsplit('/').next().unwrap_or(s);
        return format!(
            "\"Permission denied\" for {s} inside the run is most likely Landlock: only the allowlisted programs and scopes.exec may be executed (allow `{name}` in commands.allow, or add {} to scopes.exec, in the policy if the command really needs to run it)",
            if s.contains('/') { s } else { "its path" }
        );
    }
    format!(
        "\"Permission denied\" for {s} inside the run is most likely Landlock: files may be read only under the read scopes, the workspace and the allowed programs, and written only in the workspace, the write scopes and /dev/null{tcp} (add {s} to scopes.read, or to scopes.write to change it, in the policy if the command really needs it)"
    )
}

/// A bare name (what a shell or a spawn names when an exec is refused) or
/// the path of an executable file.
fn executable(s: &str) -> bool {
    use std::os::unix::fs::PermissionsExt;
    !s.contains('/')
        || std::fs::metadata(s).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

fn seen(stderr: &str, texts: &[&str]) -> bool {
    texts.iter().any(|t| stderr.contains(t))
}

/// The path or program named by the first line of stderr that carries
/// one of `texts` and names one.
fn subject(stderr: &str, texts: &[&str]) -> Option<String> {
    stderr.lines().find_map(|line| {
        texts.iter().find_map(|t| {
            let at = line.find(t)?;
            named(&line[..at], &line[at + t.len()..])
        })
    })
}

/// What a line names around its error text (`before` it, `after` it):
/// - Python's and Node's message after it: `[Errno 13] Permission denied:
///   '/usr/bin'`, `EACCES: permission denied, open '/x'`;
/// - a spawn: `Error: spawn sh EACCES`;
/// - the colon-separated field before it, quotes taken off:
///   `sh: 1: id: Permission denied`, `cat: /etc/x: Permission denied`,
///   `ls: cannot open directory '/root': Permission denied`.
fn named(before: &str, after: &str) -> Option<String> {
    if let Some(rest) = after
        .strip_prefix(": ")
        .or_else(|| after.strip_prefix(", "))
        && let Some(q) = quoted(rest, false)
    {
        return Some(q);
    }
    let before = before.trim_end();
    let before = before.strip_suffix(':').unwrap_or(before);
    let fields: Vec<&str> = before.split(": ").collect();
    // The first field is the program that reports; what it names follows.
    for (i, field) in fields.iter().enumerate().rev().take(3) {
        let field = field.trim();
        if let Some(rest) = field
            .strip_prefix("spawn ")
            .or_else(|| field.find(" spawn ").map(|j| &field[j + 7..]))
            && let Some(word) = rest.split_whitespace().next()
        {
            return Some(word.to_string());
        }
        if i == 0 {
            break;
        }
        if let Some(q) = quoted(field, true) {
            return Some(q);
        }
        let plain = !field.is_empty()
            && !field.contains(char::is_whitespace)
            && !field.bytes().all(|b| b.is_ascii_digit())
            && !field.starts_with('[');
        if plain {
            return Some(field.to_string());
        }
    }
    None
}

/// The text between quotes ('...', "...", `...' or ‘...’) in `s`: the first
/// quoted span, or the last with `last` (a field such as `can't open file
/// '/x'` has a quote of its own before the path).
fn quoted(s: &str, last: bool) -> Option<String> {
    const PAIRS: [(char, char); 4] = [('\'', '\''), ('"', '"'), ('`', '\''), ('‘', '’')];
    let span = |(open, close): (char, char)| -> Option<(usize, &str)> {
        if last {
            let end = s.rfind(close)?;
            let start = s[..end].rfind(open)?;
            Some((start, &s[start + open.len_utf8()..end]))
        } else {
            let start = s.find(open)?;
            let rest = &s[start + open.len_utf8()..];
            Some((start, &rest[..rest.find(close)?]))
        }
    };
    let spans = PAIRS
        .into_iter()
        .filter_map(span)
        .filter(|(_, text)| !text.is_empty());
    let best = if last {
        spans.max_by_key(|(at, _)| *at)
    } else {
        spans.min_by_key(|(at, _)| *at)
    };
    best.map(|(_, text)| text.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_project_file_refused_execution_is_sent_to_the_grant_not_a_read_scope() {
        let landlock = LandlockReport::default();
        for stderr in [
            "sh: 1: ./a.out: Permission denied\n",
            "make: ./configure: Permission denied\n",
            "bash: line 1: ../bin/tool: Permission denied\n",
        ] {
            let hint = landlock_hint(&landlock, subject(stderr, EACCES).as_deref());
            assert!(hint.contains("commands.workspace = true"), "{hint}");
            assert!(hint.contains("chmod +x"), "{hint}");
            assert!(!hint.contains("to scopes.read"), "{hint}");
        }
        // A file outside the workspace keeps the read-scope hint.
        let hint = landlock_hint(&landlock, Some("/etc/shadow"));
        assert!(hint.contains("add /etc/shadow to scopes.read"), "{hint}");
    }

    #[test]
    fn a_missing_header_is_named_as_gcc_and_clang_say_it() {
        for (line, want) in [
            (
                "hello.c:1:10: fatal error: stdio.h: No such file or directory",
                Some("stdio.h"),
            ),
            (
                "x.c:2:10: fatal error: 'Python.h' file not found",
                Some("Python.h"),
            ),
            ("cc1: fatal error: x.c: No such file or directory", None),
            ("ls: cannot access 'x.h': No such file or directory", None),
        ] {
            assert_eq!(missing_header(line), want, "{line}");
        }
    }

    #[test]
    fn the_subject_is_the_path_or_program_the_line_names() {
        for (line, want) in [
            ("sh: 1: id: Permission denied", Some("id")),
            (
                "bash: line 1: /usr/bin/id: Permission denied",
                Some("/usr/bin/id"),
            ),
            ("agent-rsh: id: Permission denied", Some("id")),
            ("env: 'id': Permission denied", Some("id")),
            ("cat: /etc/shadow: Permission denied", Some("/etc/shadow")),
            ("find: '/root': Permission denied", Some("/root")),
            (
                "ls: cannot open directory '/root': Permission denied",
                Some("/root"),
            ),
            (
                "touch: cannot touch ‘/etc/x’: Permission denied",
                Some("/etc/x"),
            ),
            (
                "PermissionError: [Errno 13] Permission denied: '/usr/bin'",
                Some("/usr/bin"),
            ),
            (
                "python3: can't open file '/x/y.py': [Errno 13] Permission denied",
                Some("/x/y.py"),
            ),
            (
                "Error: EACCES: permission denied, open '/etc/npmrc'",
                Some("/etc/npmrc"),
            ),
            ("npm error Error: spawn sh EACCES", Some("sh")),
            ("Error: spawn /bin/sh EACCES", Some("/bin/sh")),
            ("npm error code EACCES", None),
            ("PermissionError: [Errno 1] Operation not permitted", None),
            ("Permission denied", None),
        ] {
            let texts = if line.contains("Operation") {
                EPERM
            } else {
                EACCES
            };
            assert_eq!(subject(line, texts).as_deref(), want, "{line}");
        }
        // The first line that names something.
        let npm =
            "npm error code EACCES\nnpm error syscall spawn\nnpm error Error: spawn sh EACCES\n";
        assert_eq!(subject(npm, EACCES).as_deref(), Some("sh"));
    }
}
