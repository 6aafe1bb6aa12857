//! Policy parser: nothing panics; a TOML error with a span becomes a policy
//! error with a line and column inside the text; an accepted policy renders
//! (`policy show`) to TOML that parses back to the same policy.
#![no_main]

use agent_rsh::policy::{Policy, Source};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match Policy::parse(text, Source::Embedded) {
        Ok(p) => {
            let shown = p.to_toml();
            let again = Policy::parse(&shown, Source::Embedded)
                .unwrap_or_else(|e| panic!("`policy show` output does not parse: {e}\n{shown}"));
            assert_eq!(again.to_toml(), shown, "round trip changed the policy");
        }
        Err(e) => {
            let _ = e.to_string();
            assert!(!e.problem.to_string().is_empty());
            if let Err(t) = toml::from_str::<toml::Table>(text) {
                if t.span().is_some() {
                    assert!(
                        e.position.is_some(),
                        "TOML gave a position, the error lost it: {e}"
                    );
                }
            }
            if let Some((line, col)) = e.position {
                let lines = text.split('\n').count();
                assert!(
                    line >= 1 && col >= 1 && line <= lines,
                    "{line}:{col} of {lines} lines"
                );
            }
        }
    }
});
