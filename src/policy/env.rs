//! Which variable names are dangerous, and which are pinned: what
//! `[env]` may pass is checked against them when the policy loads, and
//! what a call asks for (`--env`, an assignment, `export`, `env NAME=v`,
//! the MCP `env` argument) when it is checked.

/// Variables that point into the workspace at run time (see `Plan::envp`).
/// The policy may set them explicitly; a call may not, whatever the face
/// (`dangerous` refuses every one of them).
pub const PINNED: &[&str] = &[
    "PATH",
    "HOME",
    "TMPDIR",
    "XDG_CACHE_HOME",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "XDG_STATE_HOME",
    "CARGO_HOME",
    "npm_config_cache",
];

/// Names that let a variable run code or load a library in the child,
/// the pinned ones first. Returns why, or None when the name is harmless.
pub fn dangerous(name: &str) -> Option<&'static str> {
    if name == "PATH" {
        return Some(
            "it is pinned to the policy's search path (commands.search_path), which decides \
             the program a name runs",
        );
    }
    if PINNED.contains(&name) {
        return Some(
            "it is pinned into the run's workspace: programs read their configuration, caches \
             and state there, and configuration can name programs to run (a git alias), so a \
             call cannot point it elsewhere; a tool's files for this run go where it already \
             points",
        );
    }
    const EXACT: &[&str] = &[
        "BASH_ENV",
        "ENV",
        "SHELLOPTS",
        "BASHOPTS",
        "PS4",
        "PROMPT_COMMAND",
        "IFS",
        "CDPATH",
        "GLOBIGNORE",
        "NODE_OPTIONS",
        "NODE_PATH",
        "PYTHONPATH",
        "PYTHONSTARTUP",
        "PYTHONHOME",
        "PYTHONINSPECT",
        "PYTHONBREAKPOINT",
        "PERL5OPT",
        "PERL5LIB",
        "PERLLIB",
        "PERL5DB",
        "RUBYOPT",
        "RUBYLIB",
        "LESSOPEN",
        "LESSCLOSE",
        "LESSKEY",
        "LESSSECURE",
        "EDITOR",
        "VISUAL",
        "PAGER",
        "MANPAGER",
        "BROWSER",
        "SSH_ASKPASS",
        "SUDO_ASKPASS",
        "JAVA_TOOL_OPTIONS",
        "_JAVA_OPTIONS",
        "JDK_JAVA_OPTIONS",
        "RUSTC_WRAPPER",
        "RUSTC_WORKSPACE_WRAPPER",
        "RUSTC",
        "GCONV_PATH",
        "LOCPATH",
        "NLSPATH",
        "HOSTALIASES",
        "RESOLV_HOST_CONF",
        "GETCONF_DIR",
        "MALLOC_CHECK_",
        "npm_config_script_shell",
        "NPM_CONFIG_SCRIPT_SHELL",
    ];
    // Options and programs a tool reads from its environment, out of the
    // argument rules' sight: `TAR_OPTIONS=--to-command=id tar xf a.tar`,
    // `MAKEFLAGS=--eval=...`, a compiler or linker named by a build.
    const OPTIONS: &[&str] = &[
        "TAR_OPTIONS",
        "MAKEFLAGS",
        "MFLAGS",
        "GNUMAKEFLAGS",
        "MAKEFILES",
        "SHELL",
        "RSYNC_RSH",
        "RSYNC_CONNECT_PROG",
        "GOFLAGS",
        "CC",
        "CXX",
        "CPP",
        "LD",
        "CFLAGS",
        "CXXFLAGS",
        "CPPFLAGS",
        "LDFLAGS",
        "RUSTFLAGS",
        "RUSTDOCFLAGS",
        "WGETRC",
        "CURL_HOME",
        "AWKPATH",
        "AWKLIBPATH",
        "ZIPOPT",
        "UNZIP",
        "GREP_OPTIONS",
    ];
    const PREFIXES: &[&str] = &["LD_", "DYLD_", "BASH_FUNC_", "GIT_CONFIG", "GLIBC_TUNABLES"];
    if EXACT.contains(&name) {
        return Some("it can make the child run or load another program, or escape the workspace");
    }
    if OPTIONS.contains(&name) {
        return Some(
            "it hands options or a program to a tool (tar, make, rsync, a compiler) where the argument rules cannot see them",
        );
    }
    // npm reads every `npm_config_*` as a setting, whatever its case
    // (`npm_config_git`, `npm_config_shell` name programs it runs).
    if name
        .get(..11)
        .is_some_and(|p| p.eq_ignore_ascii_case("npm_config_"))
    {
        return Some("npm reads it as a setting, some of which name programs it runs");
    }
    if PREFIXES.iter().any(|p| name.starts_with(p)) {
        return Some("it can make the child load code or change its configuration");
    }
    if name.starts_with("GIT_")
        && [
            "COMMAND",
            "SSH",
            "EXEC",
            "PAGER",
            "EDITOR",
            "ASKPASS",
            "PROXY",
            "EXTERNAL",
            "TEMPLATE",
            "DIR",
            "WORK_TREE",
        ]
        .iter()
        .any(|w| name.contains(w))
    {
        return Some("git runs programs or reads repositories named by it");
    }
    if name.starts_with("CARGO_")
        && (name.ends_with("_RUNNER")
            || name.ends_with("_LINKER")
            || name.contains("WRAPPER")
            || name.contains("RUSTC")
            || name.contains("RUSTFLAGS"))
    {
        return Some("cargo runs the program it names");
    }
    None
}
