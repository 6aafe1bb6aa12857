//! The child's environment: built from empty, never inherited wholesale.

use super::Denial;
use crate::policy::Policy;
pub use crate::policy::env::{PINNED, dangerous};
use std::ffi::OsString;

/// Non-interactive defaults agents need; the policy's `env.set` overrides them.
pub const DEFAULTS: &[(&str, &str)] = &[
    ("PAGER", "cat"),
    ("GIT_PAGER", "cat"),
    ("MANPAGER", "cat"),
    ("GIT_TERMINAL_PROMPT", "0"),
    ("GIT_EDITOR", "true"),
    ("LESSSECURE", "1"),
    ("NO_COLOR", "1"),
];

/// Set when the policy gives no network (`network` other than `allow`),
/// before `env.pass` and `env.set` (which override them): each tool's
/// documented offline switch, so it fails at once with a message that
/// says offline instead of retrying a host it cannot reach.
pub const OFFLINE: &[(&str, &str)] = &[
    // npm: `offline` config, no network requests (ENOTCACHED otherwise).
    ("npm_config_offline", "true"),
    // pip: `--no-index`, packages from --find-links or the cache only.
    ("PIP_NO_INDEX", "1"),
    // uv: `--offline`.
    ("UV_OFFLINE", "1"),
    // cargo: `net.offline`.
    ("CARGO_NET_OFFLINE", "true"),
    // git: only the file transport; a network remote fails at once with
    // "transport 'https' not allowed".
    ("GIT_ALLOW_PROTOCOL", "file"),
    // go: no module proxy.
    ("GOPROXY", "off"),
];

/// Builds the environment from: defaults, `env.pass` taken from `inherited`,
/// the policy's `env.set`, then the call's `NAME=VALUE` list. Pinned
/// variables are added by the plan when the workspace exists.
pub fn build(
    policy: &Policy,
    call: &[String],
    inherited: &mut dyn FnMut(&str) -> Option<OsString>,
) -> Result<Vec<(String, String)>, Denial> {
    let offline: &[(&str, &str)] = match policy.network.level {
        crate::policy::Network::Allow | crate::policy::Network::Domains => &[],
        _ => OFFLINE,
    };
    let mut env: Vec<(String, String)> = DEFAULTS
        .iter()
        .chain(offline)
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    // Look up only the passed names: copying agent-rsh's whole environment
    // was most of the cost of a check.
    for k in &policy.env.pass {
        if PINNED.contains(&k.as_str()) {
            continue;
        }
        if let Some(v) = inherited(k).as_deref().and_then(|v| v.to_str()) {
            upsert(&mut env, k, v);
        }
    }
    // After env.pass, so a host's own proxy settings cannot point the run
    // at a proxy it has no route to; env.set may still change them.
    if policy.network.level == crate::policy::Network::Domains {
        for (k, v) in proxy_variables() {
            upsert(&mut env, k, &v);
        }
    }
    for (k, v) in &policy.env.set {
        upsert(&mut env, k, v);
    }
    for assignment in call {
        let Some((k, v)) = assignment.split_once('=') else {
            return Err(Denial::new(
                "env.syntax",
                format!("--env {assignment:?} is not NAME=VALUE"),
                "write --env NAME=VALUE",
            ));
        };
        if !crate::lex::is_identifier(k) {
            return Err(Denial::new(
                "env.name",
                format!("--env name {k:?} is not a valid variable name"),
                "use letters, digits and underscores, not starting with a digit",
            ));
        }
        if let Some((rule, what)) = v.chars().find_map(crate::lex::forbidden_char) {
            return Err(Denial::new(
                rule,
                format!("--env {k} contains a {what}"),
                "remove it from the value",
            ));
        }
        let why = match value_verdict(policy, None, k, v) {
            ValueVerdict::Safe => None,
            ValueVerdict::Refused(why) => Some(why),
            ValueVerdict::ByName => dangerous(k).map(String::from),
        };
        if let Some(why) = why {
            return Err(Denial {
                arg_index: None,
                ..Denial::new(
                    "env.dangerous",
                    format!("--env {k} is refused: {why}"),
                    "leave it out; if the program really needs it, an administrator can set a fixed value in the policy's env.set",
                )
            });
        }
        upsert(&mut env, k, v);
    }
    Ok(env)
}

/// With `network = { allow = [...] }`: every variable the common clients
/// read for their proxy (both cases: curl reads only the lower-case
/// `http_proxy`), pointing at agent-rsh's proxy in the run's namespace.
/// Loopback goes direct (a server the run started itself). Nothing depends
/// on them for safety: a program that ignores them has no route out.
pub fn proxy_variables() -> Vec<(&'static str, String)> {
    let url = format!("http://127.0.0.1:{}", crate::policy::PROXY_PORT);
    let direct = "localhost,127.0.0.1,::1".to_string();
    let mut v = Vec::new();
    for k in [
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
        // npm's own names for the same settings.
        "npm_config_proxy",
        "npm_config_https_proxy",
        // cargo reads http.proxy (libcurl's form) only from its config.
        "CARGO_HTTP_PROXY",
    ] {
        v.push((k, url.clone()));
    }
    v.push(("NO_PROXY", direct.clone()));
    v.push(("no_proxy", direct));
    v
}

fn upsert(env: &mut Vec<(String, String)>, k: &str, v: &str) {
    match env.iter_mut().find(|(name, _)| name == k) {
        Some(slot) => slot.1 = v.to_string(),
        None => env.push((k.to_string(), v.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build_with(
        policy: &Policy,
        call: &[&str],
        inherited: &[(&str, &str)],
    ) -> Result<Vec<(String, String)>, Denial> {
        let call: Vec<String> = call.iter().map(|s| s.to_string()).collect();
        let mut lookup = |name: &str| {
            inherited
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| OsString::from(v))
        };
        build(policy, &call, &mut lookup)
    }

    fn get<'a>(env: &'a [(String, String)], k: &str) -> Option<&'a str> {
        env.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str())
    }

    #[test]
    fn only_passed_variables_are_inherited() {
        let env = build_with(
            &Policy::default(),
            &[],
            &[("LANG", "C.UTF-8"), ("SECRET", "x"), ("PATH", "/evil")],
        )
        .unwrap();
        assert_eq!(get(&env, "LANG"), Some("C.UTF-8"));
        assert_eq!(get(&env, "SECRET"), None);
        assert_eq!(
            get(&env, "PATH"),
            None,
            "PATH comes from the policy at run time"
        );
        assert_eq!(get(&env, "PAGER"), Some("cat"));
    }

    #[test]
    fn dangerous_names_are_refused_per_call() {
        for bad in [
            "LD_PRELOAD=x",
            "BASH_ENV=x",
            "GIT_SSH_COMMAND=sh",
            "PATH=/tmp",
            "HOME=/",
            "PYTHONPATH=.",
            "GIT_CONFIG_COUNT=1",
            "NODE_OPTIONS=--require=x",
            // Options handed to a tool out of the argument rules' sight.
            "TAR_OPTIONS=--to-command=id",
            "MAKEFLAGS=--eval=x:;@id",
            "MAKEFLAGS=SHELL=/bin/bash",
            "RSYNC_RSH=sh",
            "RSYNC_CONNECT_PROG=id",
            "GOFLAGS=-toolexec=id",
            "CC=id",
            "CFLAGS=-wrapper,id",
            "WGETRC=/tmp/x",
            "AWKLIBPATH=/tmp",
            "npm_config_git=id",
            "NPM_CONFIG_SHELL=id",
            "RUSTFLAGS=-Clinker=id",
            "CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER=id",
            "CARGO_BUILD_RUSTC=id",
        ] {
            let d = build_with(&Policy::default(), &[bad], &[]).unwrap_err();
            assert_eq!(d.rule, "env.dangerous", "{bad}");
        }
        for good in [
            "RUST_LOG=debug",
            "LANG=C.UTF-8",
            "CI=true",
            "TARGET=x",
            "CCACHE_DIR=x",
        ] {
            assert!(
                build_with(&Policy::default(), &[good], &[]).is_ok(),
                "{good}"
            );
        }
    }

    #[test]
    fn call_env_syntax_is_checked() {
        assert_eq!(
            build_with(&Policy::default(), &["NOEQ"], &[])
                .unwrap_err()
                .rule,
            "env.syntax"
        );
        assert_eq!(
            build_with(&Policy::default(), &["1X=y"], &[])
                .unwrap_err()
                .rule,
            "env.name"
        );
        assert_eq!(
            build_with(&Policy::default(), &["X=a\nb"], &[])
                .unwrap_err()
                .rule,
            "lex.newline"
        );
    }

    #[test]
    fn policy_set_overrides_defaults_and_call_overrides_policy() {
        let mut p = Policy::default();
        p.env.set.insert("PAGER".into(), "less".into());
        p.env.set.insert("MODE".into(), "a".into());
        let env = build_with(&p, &["MODE=b"], &[]).unwrap();
        assert_eq!(get(&env, "PAGER"), Some("less"));
        assert_eq!(get(&env, "MODE"), Some("b"));
    }
}

/// What a value of a variable that `dangerous` names may be, for the few
/// a coding loop sets every day: build flags (`CFLAGS=-O2 make`) and
/// module search paths (`PYTHONPATH=src pytest`). Their names are refused
/// because a value can hand a tool a program to run or code to load; the
/// value is read instead, and only those words are refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ValueVerdict {
    /// Not a variable read by value: `dangerous` decides by name.
    ByName,
    Safe,
    /// Why this value is refused.
    Refused(String),
}

/// Flags a compiler or linker reads from CFLAGS and the like.
const FLAG_VARIABLES: &[&str] = &["CFLAGS", "CXXFLAGS", "CPPFLAGS", "LDFLAGS", "FFLAGS"];

/// Module search paths, with the interpreter whose modules they find: the
/// path gives nothing the interpreter itself would not run, so it is
/// read only where the policy allows that interpreter by name.
const PATH_VARIABLES: &[(&str, &[&str])] = &[
    ("PYTHONPATH", &["python3", "python"]),
    ("NODE_PATH", &["node"]),
];

/// Whether `name` is one whose value is checked (`value_verdict`) rather
/// than refused by name; an assignment or export of it is allowed, and
/// its value checked when a program would get it.
pub fn read_by_value(name: &str) -> bool {
    FLAG_VARIABLES.contains(&name) || PATH_VARIABLES.iter().any(|(n, _)| *n == name)
}

/// The verdict on `name=value` reaching a program. `workspace`, when known,
/// is where absolute entries of a search path may point.
pub fn value_verdict(
    policy: &Policy,
    workspace: Option<&std::path::Path>,
    name: &str,
    value: &str,
) -> ValueVerdict {
    if policy.env.set.get(name).is_some_and(|v| v == value) {
        return ValueVerdict::Safe;
    }
    if FLAG_VARIABLES.contains(&name) {
        return match value.split_whitespace().find(|w| runs_something(w)) {
            None => ValueVerdict::Safe,
            Some(w) => ValueVerdict::Refused(format!(
                "{name} holds `{w}`, which makes the compiler or linker run or load another program"
            )),
        };
    }
    let Some((_, interpreters)) = PATH_VARIABLES.iter().find(|(n, _)| *n == name) else {
        return ValueVerdict::ByName;
    };
    if !interpreters
        .iter()
        .any(|i| super::resolve(policy, i).is_ok())
    {
        return ValueVerdict::Refused(format!(
            "{name} makes a program load modules from where it says, and the policy does not allow {} itself",
            interpreters[0]
        ));
    }
    for entry in value.split(':') {
        let p = std::path::Path::new(entry);
        let climbs = p
            .components()
            .any(|c| matches!(c, std::path::Component::ParentDir));
        let outside = p.is_absolute() && !workspace.is_some_and(|w| p.starts_with(w));
        if climbs || outside {
            return ValueVerdict::Refused(format!(
                "{name} entry `{entry}` is outside the workspace; its entries must be directories of the workspace (`src`, `.`, `$PWD/lib`)"
            ));
        }
    }
    ValueVerdict::Safe
}

/// A compiler or linker flag that runs or loads a program: a directory
/// to find the compiler's own programs in (`-B`), a wrapper, a plugin,
/// a specs file (which can name programs), a linker by path, a response
/// file (`@FILE`, any flags at all), or options handed on unread.
fn runs_something(word: &str) -> bool {
    const PREFIXES: &[&str] = &[
        "@",
        "-B",
        "-wrapper",
        "-fplugin",
        "-iplugindir",
        "-specs",
        "--specs",
        "-Xlinker",
        "-Xassembler",
        "-Xpreprocessor",
        "-plugin",
        "--plugin",
        "-fuse-ld=/",
        "-fuse-ld=.",
        "--ld-path",
    ];
    PREFIXES.iter().any(|p| word.starts_with(p))
        || (word.starts_with("-Wl,") && word.contains("plugin"))
        || (word.starts_with("-fuse-ld=") && word.contains('/'))
}

#[cfg(test)]
mod value_tests {
    use super::*;

    #[test]
    fn build_flags_and_search_paths_are_read_by_value() {
        let mut p = Policy::default();
        p.commands.allow = vec!["python3".into()];
        let ws = std::path::Path::new("/home/a/repo");
        let v = |n: &str, val: &str| value_verdict(&p, Some(ws), n, val);
        for (n, val) in [
            (
                "CFLAGS",
                "-O2 -g -Wall -Wextra -std=c11 -fPIC -DNDEBUG -Iinclude",
            ),
            (
                "LDFLAGS",
                "-L/usr/local/lib -lm -pthread -Wl,-rpath,/opt/x/lib -Wl,--as-needed",
            ),
            ("CXXFLAGS", "-O3 -march=native -fno-exceptions"),
            ("PYTHONPATH", "src"),
            ("PYTHONPATH", ".:src:tests"),
            ("PYTHONPATH", "/home/a/repo/lib"),
            ("PYTHONPATH", ""),
        ] {
            assert_eq!(v(n, val), ValueVerdict::Safe, "{n}={val}");
        }
        for (n, val) in [
            ("CFLAGS", "-O2 -B./tools"),
            ("CFLAGS", "-wrapper ./w"),
            ("CFLAGS", "-fplugin=./p.so"),
            ("CFLAGS", "@flags.txt"),
            ("CFLAGS", "-specs=x.specs"),
            ("LDFLAGS", "-fuse-ld=/tmp/ld"),
            ("LDFLAGS", "-Wl,-plugin,./lto.so"),
            ("LDFLAGS", "-Xlinker -plugin"),
            ("PYTHONPATH", "../other"),
            ("PYTHONPATH", "/usr/lib/evil"),
            ("PYTHONPATH", "src:/etc"),
            // node is not allowed: NODE_PATH gives the project's modules
            // to a program that is not the interpreter.
            ("NODE_PATH", "lib"),
        ] {
            assert!(
                matches!(v(n, val), ValueVerdict::Refused(_)),
                "{n}={val}: {:?}",
                v(n, val)
            );
        }
        assert_eq!(v("LD_PRELOAD", "x.so"), ValueVerdict::ByName);
        assert_eq!(v("CC", "gcc"), ValueVerdict::ByName);
        // The policy's own value holds whatever it says.
        p.env.set.insert("CFLAGS".into(), "-B/opt/gcc".into());
        assert_eq!(
            value_verdict(&p, Some(ws), "CFLAGS", "-B/opt/gcc"),
            ValueVerdict::Safe
        );
    }
}
