//! Converts the embedded packs (`packs/*.toml`) to JSON at build time.
//!
//! Every agent-rsh process needs the packs for its first check, and parsing
//! 1,400 lines of TOML cost about 2.5 ms per process; the same data as JSON
//! parses several times faster. The TOML files stay the source (readable,
//! commented); a pack that does not parse fails the build.
//!
//! It also lists the built-in rule ids (`rule_ids.txt`), so the policy can
//! check `[packs]` switches when it loads without parsing the packs.

use std::path::Path;

const PACKS: &[&str] = &["grammars", "wrappers", "tools", "guards"];

fn main() {
    let out = std::env::var("OUT_DIR").expect("cargo sets OUT_DIR");
    println!("cargo:rerun-if-changed=packs");
    let mut ids = String::new();
    for name in PACKS {
        let src = format!("packs/{name}.toml");
        println!("cargo:rerun-if-changed={src}");
        let text = std::fs::read_to_string(&src).unwrap_or_else(|e| panic!("{src}: {e}"));
        let value: toml::Value = toml::from_str(&text).unwrap_or_else(|e| panic!("{src}: {e}"));
        for rule in value
            .get("rule")
            .and_then(toml::Value::as_array)
            .into_iter()
            .flatten()
        {
            let id = rule.get("id").and_then(toml::Value::as_str);
            ids.push_str(id.unwrap_or_else(|| panic!("{src}: a [[rule]] without an id")));
            ids.push('\n');
        }
        let json = serde_json::to_string(&value).expect("TOML values serialize as JSON");
        std::fs::write(Path::new(&out).join(format!("{name}.json")), json)
            .unwrap_or_else(|e| panic!("write {name}.json: {e}"));
    }
    std::fs::write(Path::new(&out).join("rule_ids.txt"), ids)
        .unwrap_or_else(|e| panic!("write rule_ids.txt: {e}"));
}
