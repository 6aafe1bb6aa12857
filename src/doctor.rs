//! `agent-rsh doctor`: what this kernel supports and what a run under the
//! effective policy would enforce.

use crate::confine::{self, Confinement, probe};
use crate::policy::{ConfinementMode, Policy};
use crate::result::code;
use serde_json::json;
use std::time::Duration;

/// Prints the findings; exit 0 when a run would start, 125 when the policy
/// would fail closed on this kernel.
pub fn doctor(policy: &Policy, source: &str, as_json: bool) -> i32 {
    let k = probe::kernel();
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    // Without CAP_SYS_ADMIN a run creates its namespaces inside a new user
    // namespace: probe exactly that.
    let user_ns_needed = !confine::userns::has_cap_sys_admin();
    let user_ns_available = !k.simulated.contains(&"userns")
        && probe::try_namespaces((libc::CLONE_NEWUSER | libc::CLONE_NEWPID) as libc::c_ulong).0;
    let userns_flag = if user_ns_needed && user_ns_available {
        libc::CLONE_NEWUSER as libc::c_ulong
    } else {
        0
    };
    let pid_flags = libc::CLONE_NEWPID as libc::c_ulong | userns_flag;
    // The simulation seam takes the PID namespace away as a run sees it
    // (its clone then fails, and the run steps down to no namespace at
    // all: no network namespace, no mount view either).
    let pidns_simulated = k.simulated.contains(&"pidns");
    let pidns = !pidns_simulated && probe::try_namespaces(pid_flags).0;
    let (netns, netns_cost) = if k.netns && pidns {
        probe::try_namespaces(pid_flags | libc::CLONE_NEWNET as libc::c_ulong)
    } else {
        (false, Duration::ZERO)
    };
    let (_, plain_cost) = probe::try_namespaces(pid_flags);
    let cgroup_hierarchy = if k.simulated.contains(&"cgroup") {
        Err(format!("simulated by {}", probe::SIMULATE_ENV))
    } else {
        confine::cgroup::probe().map_err(|e| e.to_string())
    };
    // A run keeps its mount view only together with its PID namespace.
    let mountns = pidns
        && !k.simulated.contains(&"mountns")
        && probe::try_namespaces(pid_flags | libc::CLONE_NEWNS as libc::c_ulong).0;

    // A run of agent-rsh itself in a scratch directory stands in for any
    // command: the layers do not depend on which program runs.
    let program = std::env::current_exe().unwrap_or_else(|_| "/proc/self/exe".into());
    // Not /tmp itself: a workspace that is /tmp has no private /tmp.
    let scratch_dir = tempfile::tempdir().ok();
    let scratch = scratch_dir
        .as_ref()
        .and_then(|d| d.path().canonicalize().ok())
        .unwrap_or_else(std::env::temp_dir);
    let mut prepared = Confinement::prepare_for(
        policy,
        &program,
        Duration::from_millis(policy.limits.timeout_ms),
        false,
        &scratch,
        None,
        true,
        None,
    );
    let off = policy.confinement == ConfinementMode::Off;
    // A run gives up the network namespace the kernel refuses; with
    // network = "loopback" that fails closed under "required".
    if let Ok(c) = prepared.as_mut()
        && c.extra_clone_flags() != 0
        && !netns
        && let Err(e) = c.give_up_extra_namespaces("the kernel refuses a network namespace here")
    {
        prepared = Err(e);
    }
    if let Ok(c) = prepared.as_mut() {
        if !pidns {
            c.give_up_view("a run without a PID namespace has no mount view either");
        } else if !mountns {
            c.give_up_view("this kernel or account refuses a mount namespace here");
        }
        if !pidns && !off {
            c.note_no_pid_namespace(&if pidns_simulated {
                format!("simulated by {}", probe::SIMULATE_ENV)
            } else if user_ns_needed {
                format!(
                    "agent-rsh runs without CAP_SYS_ADMIN and {}",
                    confine::userns::blocker(k.simulated.contains(&"userns"))
                )
            } else {
                "the kernel refuses it".to_string()
            });
        }
        c.record_setup(!off && pidns);
    }
    let (would, problem) = match &prepared {
        Ok(c) => {
            let mut r = serde_json::to_value(c.report()).unwrap_or_default();
            r["pidNamespace"] = json!(!off && pidns);
            r["userNamespace"] = json!(!off && pidns && c.needs_user_namespace());
            r["networkNamespace"] = json!(c.extra_clone_flags() != 0 && netns);
            if let Some(l) = r.get_mut("landlock") {
                // The scratch stand-ins say nothing about a real run.
                for key in ["execute", "read", "write"] {
                    l.as_object_mut().map(|o| o.remove(key));
                }
            }
            // Nor do the directories of the doctor's own (removed) cgroup.
            if let Some(c) = r.pointer_mut("/resources") {
                c.as_object_mut().map(|o| o.remove("paths"));
            }
            (Some(r), None::<String>)
        }
        Err(e) => (None, Some(e.to_string())),
    };
    let warnings: Vec<String> = prepared
        .as_ref()
        .map(|c| c.warnings().to_vec())
        .unwrap_or_default();

    if as_json {
        let v = json!({
            "schema": "agent-rsh.doctor/1",
            "kernel": {
                "release": release,
                "landlockAbi": k.real_landlock_abi,
                "seccompFilter": k.seccomp || k.simulated.contains(&"seccomp"),
                "pidNamespace": pidns,
                "capSysAdmin": !user_ns_needed,
                "userNamespace": user_ns_available,
                "networkNamespace": netns,
                "mountNamespace": mountns,
                "cgroup": cgroup_hierarchy.as_ref().ok().map(|m| m.describe()),
                "cgroupProblem": cgroup_hierarchy.as_ref().err(),
                "nprocBindsCaller": !confine::nproc_exempt(),
                "networkNamespaceCostUs": netns.then(|| netns_cost.saturating_sub(plain_cost).as_micros() as u64),
            },
            "simulatedMissing": k.simulated,
            "policy": {
                "source": source,
                "confinement": policy.confinement,
                "network": policy.network,
                "networkNamespace": policy.network_namespace,
            },
            "wouldEnforce": would,
            "warnings": warnings,
            "ok": problem.is_none(),
            "problem": problem,
        });
        println!("{v}");
    } else {
        let yes = |b: bool| if b { "yes" } else { "no" };
        println!("kernel {release}");
        println!(
            "  landlock:          {}",
            match k.real_landlock_abi {
                0 => "not available".to_string(),
                n => format!(
                    "ABI {n} (filesystem{}{}{})",
                    if n >= 4 { ", TCP" } else { "" },
                    if n >= 6 {
                        ", abstract sockets, signals"
                    } else {
                        ""
                    },
                    if n >= 9 {
                        ", pathname UNIX sockets"
                    } else {
                        ""
                    }
                ),
            }
        );
        println!(
            "  seccomp filter:    {}",
            yes(k.seccomp || k.simulated.contains(&"seccomp"))
        );
        println!(
            "  user namespace:    {}",
            if user_ns_available { "yes" } else { "no" }
        );
        println!(
            "  pid namespace:     {}{}",
            yes(pidns),
            if user_ns_needed {
                " (no CAP_SYS_ADMIN: inside a user namespace)"
            } else {
                ""
            }
        );
        println!("  mount namespace:   {}", yes(mountns));
        println!(
            "  cgroup:            {}",
            match &cgroup_hierarchy {
                Ok(m) => m.to_string(),
                Err(e) => format!("no ({e})"),
            }
        );
        println!(
            "  network namespace: {}{}",
            yes(netns),
            if netns {
                format!(
                    " (about {} us per run)",
                    netns_cost.saturating_sub(plain_cost).as_micros()
                )
            } else {
                String::new()
            }
        );
        if !k.simulated.is_empty() {
            println!(
                "  simulated missing: {} ({})",
                k.simulated.join(", "),
                probe::SIMULATE_ENV
            );
        }
        println!(
            "policy {source}: confinement = {:?}, network = {:?}",
            policy.confinement, policy.network.level
        );
        if let Ok(c) = prepared.as_ref() {
            let r = c.report();
            println!("a run would enforce:");
            println!(
                "  landlock:          {}",
                if r.landlock.enforced {
                    format!(
                        "ABI {}: {}",
                        r.landlock.abi,
                        r.landlock.restricts.join(", ")
                    )
                } else {
                    format!("no ({})", r.landlock.reason.as_deref().unwrap_or(""))
                }
            );
            println!(
                "  seccomp:           {}",
                if r.seccomp.enforced {
                    format!("yes, sockets: {}", r.seccomp.socket_families.join(", "))
                } else {
                    format!("no ({})", r.seccomp.reason.as_deref().unwrap_or(""))
                }
            );
            println!("  pid namespace:     {}", yes(!off && pidns));
            println!(
                "  user namespace:    {}",
                if !off && pidns && c.needs_user_namespace() {
                    "yes (caller's uid and gid mapped 1:1, no capabilities)"
                } else {
                    "no"
                }
            );
            println!(
                "  network namespace: {}",
                yes(c.extra_clone_flags() != 0 && netns)
            );
            println!(
                "  mount view:        {}",
                if r.mount_view {
                    let tmp = if r.private_tmp.is_some() {
                        ", /tmp private to the workspace"
                    } else {
                        ""
                    };
                    match r.workspace_bytes {
                        Some(b) => format!("yes (fresh workspace: a tmpfs of {b} B{tmp})"),
                        None if tmp.is_empty() => "yes".to_string(),
                        None => format!("yes ({})", &tmp[2..]),
                    }
                } else {
                    "no".to_string()
                }
            );
            println!("  no_new_privs:      {}", yes(r.no_new_privs));
            println!(
                "  capabilities:      {}",
                if r.capabilities_dropped {
                    "dropped"
                } else {
                    "kept"
                }
            );
            let res = &r.resources;
            println!(
                "  resources:         {}",
                match res.reason {
                    None => format!(
                        "the run's own {} (memory {}, tasks {})",
                        res.mechanism,
                        res.memory_bytes
                            .map_or("unbounded".to_string(), |b| format!("{b} B")),
                        res.processes
                            .map_or("unbounded".to_string(), |p| p.to_string())
                    ),
                    Some(_) => format!(
                        "{} (no cgroup of its own: {})",
                        res.mechanism,
                        res.reason.as_deref().unwrap_or("")
                    ),
                }
            );
            let l = &r.limits;
            println!(
                "  limits:            cpu {} s, files {} B, open files {}, processes {}, address space {}",
                l.cpu_seconds,
                l.file_size_bytes,
                l.open_files,
                l.processes,
                l.address_space_bytes
                    .map_or("unlimited".to_string(), |b| format!("{b} B"))
            );
        }
        if let Ok(c) = prepared.as_ref() {
            let g = &c.report().guarantees;
            println!("guarantees and what holds them:");
            println!("  only allowed programs execute:      {}", g.exec);
            println!("  nothing outside the scopes changes: {}", g.files);
            println!("  modes, owners, times, xattrs:       {}", g.metadata);
            println!("  no socket outside the scopes:       {}", g.sockets);
            println!("  no network beyond the policy's:     {}", g.network);
            println!("  no descendant outlives the run:     {}", g.tree);
            println!("  one run cannot take the host:       {}", g.resources);
            println!("  no IPC object of the host:          {}", g.ipc);
            println!(
                "  no process outside is touched:      {}",
                g.other_processes
            );
            println!("  each process reads its /proc/self:  {}", g.proc_self);
            println!("  nested shells (/bin/sh):            {}", g.shells);
            // The stand-in is a fresh workspace: say what both kinds get.
            let tmp = if c.report().private_tmp.is_some() {
                "private to the workspace (mount view): `tmp` in a --workspace's state directory, kept between its runs; a tmpfs of its own for a fresh workspace's run; the host's /tmp is not reachable"
            } else {
                g.tmp.as_str()
            };
            println!("  /tmp:                               {tmp}");
        }
        for w in &warnings {
            println!("warning: {w}");
        }
        match &problem {
            None => println!("verdict: runs can start"),
            Some(p) => println!("verdict: runs fail closed: {p}"),
        }
    }
    if problem.is_some() { code::FAILED } else { 0 }
}
