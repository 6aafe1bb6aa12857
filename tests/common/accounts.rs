//! Throwaway accounts and groups (the tests that use them run as root).

use super::{BIN, unique};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

pub fn chmod(p: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// Runs an account tool (needs root), retrying while another one holds
/// /etc's locks.
pub fn admin(tool: &str, args: &[&str]) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let out = Command::new(tool).args(args).output().unwrap();
        if out.status.success() {
            return;
        }
        // Another tool holding /etc's lock files is worth waiting for;
        // anything else (not root, a name in use) is not.
        let busy = String::from_utf8_lossy(&out.stderr).contains("lock");
        if !busy || Instant::now() > deadline {
            panic!(
                "{tool} {args:?}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A real account, removed (with its home, if it has one) on drop.
pub struct User {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
    /// The canonical home directory (`with_home` accounts).
    pub home: PathBuf,
    has_home: bool,
}

impl User {
    /// A login account with a home directory and /bin/sh, in `groups`.
    pub fn with_home(groups: &[&str]) -> User {
        let name = unique("arsh");
        let mut args = vec!["-m", "-s", "/bin/sh"];
        let joined = groups.join(",");
        if !groups.is_empty() {
            args.extend(["-G", joined.as_str()]);
        }
        args.push(&name);
        admin("useradd", &args);
        let home = PathBuf::from(format!("/home/{name}"))
            .canonicalize()
            .unwrap();
        User::named(name, home, true)
    }

    /// An account without a home or a login shell.
    pub fn without_home() -> User {
        let name = unique("arshu");
        admin("useradd", &["-M", "-s", "/usr/sbin/nologin", &name]);
        User::named(name, PathBuf::new(), false)
    }

    /// An account whose password-database home is `home`, which is never
    /// created nor removed (`/` or a system directory: drop runs `userdel`
    /// without `-r`).
    pub fn with_foreign_home(home: &Path) -> User {
        let name = unique("arshf");
        let dir = home.to_str().unwrap();
        admin("useradd", &["-M", "-d", dir, "-s", "/bin/sh", &name]);
        User::named(name, home.to_path_buf(), false)
    }

    fn named(name: String, home: PathBuf, has_home: bool) -> User {
        let id = |flag: &str| -> u32 {
            let out = Command::new("id").args([flag, &name]).output().unwrap();
            String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
        };
        let (uid, gid) = (id("-u"), id("-g"));
        User {
            name,
            uid,
            gid,
            home,
            has_home,
        }
    }

    /// agent-rsh as this account: real, effective and saved ids changed, no
    /// supplementary groups, no capabilities.
    pub fn agent(&self) -> Command {
        let mut c = Command::new("setpriv");
        c.arg(format!("--reuid={}", self.uid))
            .arg(format!("--regid={}", self.gid))
            .args(["--clear-groups", "--", BIN]);
        c.env_remove("AGENT_RSH_POLICY")
            .env_remove(agent_rsh::confine::probe::SIMULATE_ENV);
        c
    }
}

impl Drop for User {
    fn drop(&mut self) {
        // Processes of the account would make userdel refuse.
        let _ = Command::new("pkill")
            .args(["-KILL", "-u", &self.name])
            .status();
        let mut userdel = Command::new("userdel");
        if self.has_home {
            userdel.arg("-r");
        }
        let _ = userdel.arg(&self.name).output();
    }
}

/// A group removed on drop.
pub struct Group(pub String);

impl Group {
    pub fn new() -> Group {
        let g = Group(unique("arshg"));
        admin("groupadd", &[&g.0]);
        g
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        let _ = Command::new("groupdel").arg(&self.0).output();
    }
}
