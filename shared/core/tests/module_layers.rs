//! The core crate's top-level modules form no cycle, and no Rust file of the workspace is longer
//! than a reader can hold ([`MAX_FILE_LINES`]).
//!
//! The core crate's top-level modules form no cycle: each names only modules below it, so a
//! reader can learn them bottom-up (domain and config first, ports on them, services on ports,
//! handlers and adapters at the edge) and a change low down cannot depend on one above it.
//!
//! Read from the source text: every `crate::<module>` a file of another top-level module names
//! (in `use` lines, paths and doc links alike, since a doc link that points up is a cycle for a
//! reader too) is an edge. Written by hand because no tool in the workspace's dependencies
//! reports module cycles inside one crate, and this one is 60 lines.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a source file belongs to (`lib` for lib.rs itself).
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap();
    let first = rel
        .components()
        .next()
        .unwrap()
        .as_os_str()
        .to_string_lossy();
    first.trim_end_matches(".rs").to_owned()
}

/// Edges `from -> to` between top-level modules, with one place each is seen.
fn edges(src: &Path) -> BTreeMap<(String, String), String> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let modules: BTreeSet<String> = files.iter().map(|f| module_of(src, f)).collect();
    let mut found = BTreeMap::new();
    for file in &files {
        let from = module_of(src, file);
        if from == "lib" {
            continue;
        }
        let text = std::fs::read_to_string(file).unwrap();
        for (n, line) in text.lines().enumerate() {
            for (i, _) in line.match_indices("crate::") {
                let rest = &line[i + "crate::".len()..];
                let to: String = rest
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect();
                if to != from && modules.contains(&to) {
                    found
                        .entry((from.clone(), to))
                        .or_insert_with(|| format!("{}:{}", file.display(), n + 1));
                }
            }
        }
    }
    found
}

/// A cycle through `start`, if any, as the modules along it.
fn cycle(edges: &BTreeMap<(String, String), String>, start: &str) -> Option<Vec<String>> {
    let mut stack = vec![(start.to_owned(), vec![start.to_owned()])];
    let mut seen = BTreeSet::new();
    while let Some((at, path)) = stack.pop() {
        for (from, to) in edges.keys() {
            if *from != at {
                continue;
            }
            if to == start {
                let mut p = path.clone();
                p.push(to.clone());
                return Some(p);
            }
            if seen.insert(to.clone()) {
                let mut p = path.clone();
                p.push(to.clone());
                stack.push((to.clone(), p));
            }
        }
    }
    None
}

fn cycles_in(src: &Path) -> Vec<String> {
    let edges = edges(src);
    let modules: BTreeSet<&String> = edges.keys().map(|(f, _)| f).collect();
    let mut out = Vec::new();
    for m in modules {
        if let Some(c) = cycle(&edges, m) {
            let places: Vec<String> = c
                .windows(2)
                .map(|w| {
                    format!(
                        "{} -> {} ({})",
                        w[0],
                        w[1],
                        edges[&(w[0].clone(), w[1].clone())]
                    )
                })
                .collect();
            out.push(places.join("; "));
        }
    }
    out
}

#[test]
fn the_core_modules_form_no_cycle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let cycles = cycles_in(&src);
    assert!(cycles.is_empty(), "module cycles:\n{}", cycles.join("\n"));
}

#[test]
fn the_check_finds_a_planted_cycle() {
    let dir = std::env::temp_dir().join(format!("module-layers-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("service")).unwrap();
    std::fs::write(dir.join("lib.rs"), "pub mod domain; pub mod service;").unwrap();
    std::fs::write(dir.join("domain.rs"), "use crate::service::Thing;").unwrap();
    std::fs::write(dir.join("service/mod.rs"), "use crate::domain::Other;").unwrap();
    let found = cycles_in(&dir);
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(
        found
            .iter()
            .any(|c| c.contains("domain -> service") && c.contains("service -> domain")),
        "{found:?}"
    );
}

/// The longest a `.rs` file of the workspace may be, tests and benches included: past it, a file
/// holds more than one subject, and a reader looking for one of them reads them all.
const MAX_FILE_LINES: usize = 800;

/// Every `.rs` file under `root` longer than [`MAX_FILE_LINES`], with its length; build output,
/// installed tools and hidden directories (`target/`, `.emulators/`, `.git/`) left out.
fn long_files(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    // Bounded by the tree: each directory is visited once.
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy();
            if path.is_dir() {
                if !(name.starts_with('.') || name == "target" || name == "node_modules") {
                    dirs.push(path);
                }
            } else if name.ends_with(".rs") {
                let lines = std::fs::read_to_string(&path).unwrap().lines().count();
                if lines > MAX_FILE_LINES {
                    let rel = path.strip_prefix(root).unwrap_or(&path);
                    out.push(format!("{} ({lines} lines)", rel.display()));
                }
            }
        }
    }
    out.sort();
    out
}

#[test]
fn no_rust_file_of_the_workspace_is_over_800_lines() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let long = long_files(&root);
    assert!(
        long.is_empty(),
        "files over {MAX_FILE_LINES} lines (split them by subject):\n{}",
        long.join("\n")
    );
}

#[test]
fn the_length_check_finds_a_planted_long_file() {
    let dir = std::env::temp_dir().join(format!("file-lengths-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::create_dir_all(dir.join("target")).unwrap();
    let long = "fn f() {}\n".repeat(MAX_FILE_LINES + 1);
    std::fs::write(dir.join("src/long.rs"), &long).unwrap();
    std::fs::write(
        dir.join("src/short.rs"),
        "fn f() {}\n".repeat(MAX_FILE_LINES),
    )
    .unwrap();
    std::fs::write(dir.join("target/built.rs"), &long).unwrap();
    let found = long_files(&dir);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(
        found,
        vec![format!("src/long.rs ({} lines)", MAX_FILE_LINES + 1)]
    );
}
