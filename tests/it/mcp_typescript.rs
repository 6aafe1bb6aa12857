//! `agent-rsh mcp` driven by the official MCP TypeScript SDK clients
//! (`@modelcontextprotocol/sdk` 1.x and `@modelcontextprotocol/client`
//! 2.x, installed by the test with npm under target/tmp): list the tools,
//! call every tool with its error paths, every result checked against the
//! tool's outputSchema (tests/mcp-ts/client.mjs).

use crate::common;
use std::process::Command;

use crate::common::BIN;

#[test]
fn official_typescript_sdk_clients_validate_every_result() {
    let dir = match common::typescript_clients() {
        Ok(d) => d,
        Err(why) => {
            common::unavailable(
                "official_typescript_sdk_clients_validate_every_result",
                &why,
            );
            return;
        }
    };
    let tmp = tempfile::tempdir().unwrap();
    let policy = tmp.path().join("policy.toml");
    std::fs::write(
        &policy,
        format!(
            "[commands]\nallow = [\"bash\", \"sleep\", \"echo\"]\n[jobs]\nstate_dir = \"{}\"\n",
            tmp.path().join("jobs").display()
        ),
    )
    .unwrap();
    for flavor in ["v1", "v2"] {
        let out = Command::new("node")
            .arg(dir.join("client.mjs"))
            .args([flavor, BIN])
            .arg(&policy)
            .current_dir(&dir)
            .env_remove("AGENT_RSH_POLICY")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{flavor} client failed:\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(stdout.contains(&format!("ok: {flavor} legacy")), "{stdout}");
        if flavor == "v2" {
            assert!(stdout.contains("ok: v2 auto 2026-07-28"), "{stdout}");
        }
    }
}
