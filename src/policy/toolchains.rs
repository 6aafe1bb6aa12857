//! The compilers `policy init --profile coding|ci` finds on this machine,
//! and what each needs from the run: its programs on the allowlist, its
//! directories readable (headers, a Rust sysroot, a JDK) and the helper
//! programs it starts itself executable (gcc's cc1 and collect2, rustc's
//! linker wrapper, the JDK's launcher). Found by asking each tool where it
//! lives (`cc -print-prog-name=cc1`, `rustc --print sysroot`), so versioned
//! paths are right for this host; nothing is added for a tool that is
//! absent. The written profile lists every path, so an administrator reads
//! what is granted rather than trusting a detection at run time.

use std::path::{Path, PathBuf};
use std::process::Command;

/// What the found toolchains add to a profile.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Toolchains {
    /// One entry per toolchain found: a comment line and its programs.
    pub allow: Vec<(String, Vec<String>)>,
    /// Directories searched before the default search path.
    pub search_path: Vec<PathBuf>,
    pub read: Vec<PathBuf>,
    pub exec: Vec<PathBuf>,
}

/// The default search path: where the profile looks for programs.
const SEARCH: &[&str] = &["/usr/local/bin", "/usr/bin", "/bin"];

/// C and C++: the compiler drivers, the assembler and linker they run by
/// name, and the archive tools makefiles call.
const C_PROGRAMS: &[&str] = &[
    "cc",
    "gcc",
    "c++",
    "g++",
    "cpp",
    "clang",
    "clang++",
    "as",
    "ld",
    "ar",
    "ranlib",
    "nm",
    "strip",
    "pkg-config",
];

pub fn detect() -> Toolchains {
    let mut t = Toolchains::default();
    c(&mut t);
    rust(&mut t);
    java(&mut t);
    t
}

fn on_path(name: &str) -> Option<PathBuf> {
    SEARCH
        .iter()
        .map(|d| Path::new(d).join(name))
        .find(|p| p.is_file())
}

/// A tool's answer to a question about itself, first line trimmed.
fn ask(program: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new(program).args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let line = String::from_utf8(out.stdout).ok()?;
    let line = line.lines().next()?.trim().to_string();
    (!line.is_empty()).then_some(line)
}

/// A path fit to write into the policy text as a TOML basic string.
fn writable(p: &Path) -> bool {
    p.to_str()
        .is_some_and(|s| !s.contains(['"', '\\']) && !s.chars().any(char::is_control))
}

fn add(list: &mut Vec<PathBuf>, p: PathBuf) {
    if p.exists() && writable(&p) && !list.contains(&p) {
        list.push(p);
    }
}

fn c(t: &mut Toolchains) {
    let Some(driver) = ["cc", "gcc", "clang"].iter().find_map(|n| on_path(n)) else {
        return;
    };
    let programs: Vec<String> = C_PROGRAMS
        .iter()
        .filter(|n| on_path(n).is_some())
        .map(|n| n.to_string())
        .collect();
    t.allow.push(("C and C++".into(), programs));
    // Headers; the `cc` -> /etc/alternatives/cc links Debian uses; gcc's
    // own directory (crt files, libgcc, its plugins).
    for d in [
        "/usr/include",
        "/usr/local/include",
        "/etc/alternatives",
        "/usr/lib/gcc",
        "/usr/libexec/gcc",
        "/usr/lib/bfd-plugins",
    ] {
        add(&mut t.read, PathBuf::from(d));
    }
    // The compiler proper and collect2 are started by path, not by name.
    for helper in ["cc1", "collect2"] {
        let Some(p) = ask(&driver, &[&format!("-print-prog-name={helper}")]) else {
            continue;
        };
        let p = Path::new(&p);
        if let Some(dir) = p
            .is_absolute()
            .then(|| p.canonicalize().ok())
            .flatten()
            .and_then(|p| p.parent().map(Path::to_path_buf))
        {
            add(&mut t.read, dir.clone());
            add(&mut t.exec, dir);
        }
    }
    // clang's headers and runtime live under its resource directory.
    if let Some(dir) = on_path("clang").and_then(|c| ask(&c, &["-print-resource-dir"])) {
        add(&mut t.read, PathBuf::from(dir));
    }
}

/// The Rust toolchain's sysroot, found through `rustc` on the search path
/// or rustup's proxies in `$CARGO_HOME/bin` (default `~/.cargo/bin`). The
/// sysroot's own bin goes first on the search path, so cargo and rustc run
/// without the rustup proxy, which would look for its toolchains in the
/// run's HOME.
fn rust(t: &mut Toolchains) {
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")));
    let rustc = on_path("rustc").or_else(|| {
        cargo_home
            .map(|h| h.join("bin/rustc"))
            .filter(|p| p.is_file())
    });
    let Some(sysroot) = rustc
        .and_then(|r| ask(&r, &["--print", "sysroot"]))
        .and_then(|s| PathBuf::from(s).canonicalize().ok())
    else {
        return;
    };
    let bin = sysroot.join("bin");
    if !bin.join("rustc").is_file() || !writable(&sysroot) {
        return;
    }
    let programs: Vec<String> = [
        "cargo",
        "rustc",
        "rustdoc",
        "rustfmt",
        "cargo-fmt",
        "cargo-clippy",
        "clippy-driver",
    ]
    .iter()
    .filter(|n| bin.join(n).is_file())
    .map(|n| n.to_string())
    .collect();
    t.allow.push(("Rust".into(), programs));
    if !SEARCH.iter().any(|d| Path::new(d) == bin) {
        t.search_path.push(bin.clone());
    }
    add(&mut t.read, sysroot.clone());
    // cargo runs rustc by name and its subcommands (cargo-clippy) from
    // here; rustc starts its own linker wrappers under lib/rustlib.
    add(&mut t.exec, bin);
    add(&mut t.exec, sysroot.join("libexec"));
    add(&mut t.exec, sysroot.join("lib/rustlib"));
}

/// A JDK: `java` on the search path resolved to its home (Debian's
/// /usr/bin/java -> /etc/alternatives/java -> /usr/lib/jvm/X/bin/java).
fn java(t: &mut Toolchains) {
    let Some(home) = on_path("java")
        .and_then(|j| j.canonicalize().ok())
        .and_then(|j| j.parent()?.parent().map(Path::to_path_buf))
    else {
        return;
    };
    if !home.join("bin/java").is_file() {
        return;
    }
    let programs: Vec<String> = ["java", "javac", "jar", "javadoc", "jshell"]
        .iter()
        .filter(|n| on_path(n).is_some())
        .map(|n| n.to_string())
        .collect();
    t.allow.push(("Java".into(), programs));
    add(&mut t.read, PathBuf::from("/etc/alternatives"));
    add(&mut t.read, home.clone());
    // The JDK's own configuration (Debian keeps it in /etc/java-N-openjdk).
    if let Ok(entries) = std::fs::read_dir("/etc") {
        let mut conf: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("java-"))
            })
            .collect();
        conf.sort();
        for c in conf {
            add(&mut t.read, c);
        }
    }
    // The launcher starts jspawnhelper from lib.
    add(&mut t.exec, home.join("bin"));
    add(&mut t.exec, home.join("lib"));
}

fn quoted(paths: &[PathBuf]) -> Vec<String> {
    paths
        .iter()
        .map(|p| format!("\"{}\"", p.display()))
        .collect()
}

/// Fills a profile's toolchain placeholders: `@TOOLCHAIN_ALLOW@` (lines in
/// `commands.allow`), `@SEARCH_PATH@` (a `search_path` line, only when a
/// toolchain adds a directory), `@SCOPES_READ@` (a `read` line: the
/// default scopes and the toolchains', only when they add one) and
/// `@TOOLCHAIN_EXEC@` (entries at the head of `scopes.exec`).
pub fn fill(text: &str, t: &Toolchains, default_read: &[PathBuf]) -> String {
    let allow: String = t
        .allow
        .iter()
        .filter(|(_, p)| !p.is_empty())
        .map(|(what, programs)| {
            let names: Vec<String> = programs.iter().map(|p| format!("\"{p}\"")).collect();
            format!(
                "  # {what} (found on this machine)\n  {},\n",
                names.join(", ")
            )
        })
        .collect();
    let search = if t.search_path.is_empty() {
        String::new()
    } else {
        let mut all = t.search_path.clone();
        all.extend(SEARCH.iter().map(PathBuf::from));
        format!(
            "# The toolchains' own directories first (found on this machine).\nsearch_path = [{}]\n",
            quoted(&all).join(", ")
        )
    };
    let extra: Vec<PathBuf> = t
        .read
        .iter()
        .filter(|p| !default_read.contains(p))
        .cloned()
        .collect();
    let read = if extra.is_empty() {
        String::new()
    } else {
        format!(
            "# The default read scopes, then the toolchains' headers, libraries and\n\
             # configuration (found on this machine).\nread = [\n{}\n]\n",
            quoted(default_read)
                .into_iter()
                .chain(quoted(&extra))
                .map(|p| format!("  {p},"))
                .collect::<Vec<_>>()
                .join("\n")
        )
    };
    let exec: String = quoted(&t.exec)
        .into_iter()
        .map(|p| format!("{p}, "))
        .collect();
    text.replace("@TOOLCHAIN_ALLOW@\n", &allow)
        .replace("@SEARCH_PATH@\n", &search)
        .replace("@SCOPES_READ@\n", &read)
        .replace("@TOOLCHAIN_EXEC@", &exec)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{Policy, Source};

    fn sample() -> Toolchains {
        Toolchains {
            allow: vec![("C and C++".into(), vec!["cc".into(), "as".into()])],
            search_path: vec![PathBuf::from("/opt/rust/bin")],
            read: vec![PathBuf::from("/usr/share"), PathBuf::from("/usr/include")],
            exec: vec![PathBuf::from("/usr/lib/gcc/x/12")],
        }
    }

    #[test]
    fn filled_text_is_a_policy_with_what_was_found() {
        let template = "[commands]\n@SEARCH_PATH@\nallow = [\n  \"ls\",\n@TOOLCHAIN_ALLOW@\n]\n\
                        [scopes]\n@SCOPES_READ@\nexec = [@TOOLCHAIN_EXEC@\"/bin/sh\"]\n";
        let defaults = vec![PathBuf::from("/usr/share")];
        let text = fill(template, &sample(), &defaults);
        let p = Policy::parse(&text, Source::Embedded).unwrap();
        assert_eq!(p.commands.allow, ["ls", "cc", "as"]);
        assert_eq!(p.commands.search_path[0], Path::new("/opt/rust/bin"));
        assert_eq!(p.commands.search_path.len(), 4);
        // The defaults are kept, each path once.
        assert_eq!(
            p.scopes.read,
            [Path::new("/usr/share"), Path::new("/usr/include")]
        );
        assert_eq!(
            p.scopes.exec,
            [Path::new("/usr/lib/gcc/x/12"), Path::new("/bin/sh")]
        );
    }

    #[test]
    fn nothing_found_leaves_the_defaults() {
        let template = "[commands]\n@SEARCH_PATH@\nallow = [\n  \"ls\",\n@TOOLCHAIN_ALLOW@\n]\n\
                        [scopes]\n@SCOPES_READ@\nexec = [@TOOLCHAIN_EXEC@\"/bin/sh\"]\n";
        let text = fill(template, &Toolchains::default(), &[]);
        assert!(!text.contains('@'), "{text}");
        let p = Policy::parse(&text, Source::Embedded).unwrap();
        assert_eq!(p.scopes.read, crate::policy::Scopes::default().read);
        assert_eq!(
            p.commands.search_path,
            crate::policy::Commands::default().search_path
        );
    }

    #[test]
    fn this_machine_is_read_without_panicking() {
        // Whatever is installed, each found path exists and may be written.
        let t = detect();
        for p in t.read.iter().chain(&t.exec).chain(&t.search_path) {
            assert!(p.exists() && writable(p), "{}", p.display());
        }
    }
}
