//! The crate's floor plan (src/lib.rs) held against its imports: no two
//! top-level modules import each other, directly or around a circle; no
//! module below the faces imports a face; and a failure is a typed error,
//! never a bare `Result<_, String>`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The faces: what users and clients call. Everything else stands below
/// them and must not reach up.
const FACES: &[&str] = &["main", "cli", "shell", "jobs", "mcp", "doctor"];

fn sources() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).expect("read src") {
            let path = entry.expect("dir entry").path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    walk(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), &mut out);
    out.sort();
    out
}

/// The top-level module a source file belongs to (`src/script/interp.rs`
/// is `script`, `src/plan.rs` is `plan`).
fn module_of(path: &Path) -> String {
    let rel = path
        .strip_prefix(Path::new(env!("CARGO_MANIFEST_DIR")).join("src"))
        .expect("under src");
    let first = rel.components().next().expect("a component");
    first
        .as_os_str()
        .to_string_lossy()
        .trim_end_matches(".rs")
        .to_string()
}

/// Every top-level module a source text names as `crate::X` or inside
/// `crate::{X, Y::z}`.
fn imports(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    for (i, _) in text.match_indices("crate::") {
        let rest = &text[i + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for item in group[..end].split(',') {
                let name = ident(item.trim());
                if !name.is_empty() && name != "self" {
                    out.insert(name);
                }
            }
        } else {
            let name = ident(rest);
            if !name.is_empty() {
                out.insert(name);
            }
        }
    }
    out
}

/// module -> (module it imports -> the files that do).
fn arrows() -> BTreeMap<String, BTreeMap<String, BTreeSet<String>>> {
    let mut edges: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for path in sources() {
        let from = module_of(&path);
        let text = std::fs::read_to_string(&path).expect("read source");
        let entry = edges.entry(from.clone()).or_default();
        for to in imports(&text) {
            if to != from {
                entry
                    .entry(to)
                    .or_default()
                    .insert(path.display().to_string());
            }
        }
    }
    edges
}

#[test]
fn no_two_top_level_modules_import_each_other() {
    let edges = arrows();
    // A path from `to` back to `from` closes a circle with the arrow
    // from -> to.
    let reaches = |start: &str, goal: &str| -> Option<Vec<String>> {
        let mut seen = BTreeSet::new();
        let mut stack = vec![vec![start.to_string()]];
        while let Some(trail) = stack.pop() {
            let last = trail.last().expect("non-empty trail").clone();
            for next in edges.get(&last).map(|m| m.keys()).into_iter().flatten() {
                let mut t = trail.clone();
                t.push(next.clone());
                if next == goal {
                    return Some(t);
                }
                if seen.insert(next.clone()) {
                    stack.push(t);
                }
            }
        }
        None
    };
    let mut circles = Vec::new();
    for (from, tos) in &edges {
        for (to, files) in tos {
            if let Some(back) = reaches(to, from) {
                circles.push(format!(
                    "{from} -> {} (from -> {to} in {files:?})",
                    back.join(" -> ")
                ));
            }
        }
    }
    assert!(
        circles.is_empty(),
        "import circles:\n{}",
        circles.join("\n")
    );
}

#[test]
fn no_module_below_the_faces_imports_a_face() {
    let up: Vec<String> = arrows()
        .into_iter()
        .filter(|(from, _)| !FACES.contains(&from.as_str()))
        .flat_map(|(from, tos)| {
            tos.into_iter()
                .filter(|(to, _)| FACES.contains(&to.as_str()))
                .map(move |(to, files)| format!("{from} -> {to} in {files:?}"))
        })
        .collect();
    assert!(up.is_empty(), "arrows up to a face:\n{}", up.join("\n"));
}

/// The error type of every `Result<..>` in a text: its last generic
/// argument, brackets balanced.
fn error_types(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (i, _) in text.match_indices("Result<") {
        let args = &text[i + "Result<".len()..];
        let (mut depth, mut last_comma, mut end) = (0i32, None, None);
        for (j, c) in args.char_indices() {
            match c {
                '<' | '(' | '[' => depth += 1,
                '>' | ')' | ']' if depth == 0 => {
                    end = Some(j);
                    break;
                }
                '>' | ')' | ']' => depth -= 1,
                ',' if depth == 0 => last_comma = Some(j),
                _ => {}
            }
        }
        if let (Some(c), Some(e)) = (last_comma, end) {
            out.push(args[c + 1..e].trim().to_string());
        }
    }
    out
}

#[test]
fn no_result_carries_a_bare_string_as_its_error() {
    assert_eq!(
        error_types("fn f() -> Result<Vec<(u8, String)>, String> {}"),
        ["String"]
    );
    let mut bare = Vec::new();
    for path in sources() {
        let text = std::fs::read_to_string(&path).expect("read source");
        for (n, line) in text.lines().enumerate() {
            if error_types(line).iter().any(|t| t == "String") {
                bare.push(format!("{}:{}: {}", path.display(), n + 1, line.trim()));
            }
        }
    }
    assert!(
        bare.is_empty(),
        "Result<_, String> (give the failure a type):\n{}",
        bare.join("\n")
    );
}
