//! `agent-rsh mcp` driven by a real MCP client the project did not write:
//! the official Python SDK (`mcp` on PyPI: `$AGENT_RSH_TEST_PYTHON`, else a
//! venv the test makes under target/tmp), through both the 2025-11-25
//! handshake and 2026-07-28 discovery.

use crate::common;
use crate::common::BIN;
use std::process::Command;

#[test]
fn official_python_sdk_lists_runs_and_is_refused() {
    let py = match common::python_with_mcp() {
        Ok(p) => p,
        Err(why) => {
            common::unavailable("official_python_sdk_lists_runs_and_is_refused", &why);
            return;
        }
    };
    let probe = Command::new(&py)
        .args([
            "-c",
            "import mcp, importlib.metadata as m; print(m.version('mcp'))",
        ])
        .output()
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", py.display()));
    assert!(
        probe.status.success(),
        "the MCP Python SDK is not importable with {}: {}\n\
         unset AGENT_RSH_TEST_PYTHON (the test then makes a venv) or point it \
         at an interpreter that has {}",
        py.display(),
        String::from_utf8_lossy(&probe.stderr),
        common::MCP_PYTHON_SDK
    );

    let dir = tempfile::tempdir().unwrap();
    let policy = dir.path().join("policy.toml");
    // The SDK starts the server with a reduced environment, so the jobs'
    // state dir is set in the policy, private to this test.
    std::fs::write(
        &policy,
        format!(
            "[commands]\nallow = [\"bash\", \"sleep\", \"echo\"]\n[jobs]\nstate_dir = \"{}\"\n",
            dir.path().join("jobs").display()
        ),
    )
    .unwrap();
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mcp_client.py");
    let out = Command::new(&py)
        .arg(script)
        .arg(BIN)
        .arg(&policy)
        .env_remove("AGENT_RSH_POLICY")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "client failed (SDK {}):\n{stdout}\n{}",
        String::from_utf8_lossy(&probe.stdout).trim(),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("ok: legacy 2025-11-25"), "{stdout}");
    assert!(stdout.contains("ok: auto 2026-07-28"), "{stdout}");
}
