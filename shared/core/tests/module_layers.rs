//! The core crate's top-level modules form no cycle, and no Rust file of the workspace is longer
//! than a reader can hold ([`MAX_FILE_LINES`]), nor any function outside tests
//! ([`MAX_FN_LINES`]).
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

/// Every `.rs` file under `root`, build output, installed tools and hidden directories
/// (`target/`, `.emulators/`, `.git/`) left out, and with `skip_package_tests` also every
/// package's `tests/` directory.
fn workspace_rust_files(root: &Path, skip_package_tests: bool) -> Vec<PathBuf> {
    let is_package = |dir: &Path| {
        std::fs::read_to_string(dir.join("Cargo.toml")).is_ok_and(|t| t.contains("[package]"))
    };
    let mut out = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    // Bounded by the tree: each directory is visited once.
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy();
            if path.is_dir() {
                let skipped = name.starts_with('.')
                    || name == "target"
                    || name == "node_modules"
                    || (skip_package_tests && name == "tests" && is_package(&dir));
                if !skipped {
                    dirs.push(path);
                }
            } else if name.ends_with(".rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// `path` as the findings name it: relative to `root`.
fn shown(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .display()
        .to_string()
}

/// Every `.rs` file under `root` longer than [`MAX_FILE_LINES`], with its length.
fn long_files(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for path in workspace_rust_files(root, false) {
        let lines = std::fs::read_to_string(&path).unwrap().lines().count();
        if lines > MAX_FILE_LINES {
            out.push(format!("{} ({lines} lines)", shown(root, &path)));
        }
    }
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

/// The longest a function may be outside tests (from its `fn` line to its closing brace): past
/// it, a function holds several steps a reader has to keep apart in their head, and each
/// deserves a name. Tests are left out (a case reads best as one story), as is anything under a
/// package's `tests/` directory, in a `tests.rs` file, or after a file's `#[cfg(test)]`.
const MAX_FN_LINES: usize = 150;

/// The name of the function a line declares, with the line's indentation, if it declares one
/// (`pub`, `pub(..)`, `const`, `async`, `unsafe` and `extern "C"` in front allowed).
fn fn_header(line: &str) -> Option<(&str, &str)> {
    let rest = line.trim_start();
    let indent = &line[..line.len() - rest.len()];
    let mut rest = rest;
    // Bounded: each pass strips one qualifier, and a header has at most a handful.
    loop {
        if let Some(r) = rest.strip_prefix("pub(") {
            rest = r.split_once(") ")?.1;
        } else if let Some(r) = ["pub ", "const ", "async ", "unsafe ", "extern \"C\" "]
            .iter()
            .find_map(|q| rest.strip_prefix(q))
        {
            rest = r;
        } else {
            break;
        }
    }
    let name = rest.strip_prefix("fn ")?;
    let end = name
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(name.len());
    (end > 0).then(|| (indent, &name[..end]))
}

/// The functions of one file's text longer than [`MAX_FN_LINES`], as `(name, first line,
/// lines)`. Relies on rustfmt's layout (which the test command checks): a body ends at the
/// first line that is its header's indentation and a lone `}`.
fn long_functions_in(text: &str) -> Vec<(String, usize, usize)> {
    let mut lines: Vec<&str> = text.lines().collect();
    if let Some(at) = lines.iter().position(|l| l.trim() == "#[cfg(test)]") {
        lines.truncate(at);
    }
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some((indent, name)) = fn_header(line) else {
            continue;
        };
        let is_test = lines[..i]
            .iter()
            .rev()
            .take_while(|l| {
                let t = l.trim_start();
                t.starts_with("#[") || t.starts_with("//")
            })
            .any(|l| {
                let t = l.trim_start();
                t.starts_with("#[test]") || t.starts_with("#[tokio::test")
            });
        // Where the signature ends: a body opens (`{`), or a declaration ends (`;`).
        let Some(open) = (i..lines.len()).find(|&j| {
            let t = lines[j].trim_end();
            t.ends_with('{') || t.ends_with(';') || (j == i && t.ends_with('}'))
        }) else {
            continue;
        };
        if is_test || !lines[open].trim_end().ends_with('{') {
            continue;
        }
        let closing = format!("{indent}}}");
        let Some(end) = (open + 1..lines.len()).find(|&j| lines[j].trim_end() == closing) else {
            continue;
        };
        let length = end - i + 1;
        if length > MAX_FN_LINES {
            out.push((name.to_owned(), i + 1, length));
        }
    }
    out
}

/// Every function over [`MAX_FN_LINES`] outside tests in the `.rs` files under `root`, as
/// `path:line name (n lines)`.
fn long_functions(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for path in workspace_rust_files(root, true) {
        if path.file_name().is_some_and(|n| n == "tests.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        for (f, line, n) in long_functions_in(&text) {
            out.push(format!("{}:{line} {f} ({n} lines)", shown(root, &path)));
        }
    }
    out
}

#[test]
fn no_function_outside_tests_is_over_150_lines() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let long = long_functions(&root);
    assert!(
        long.is_empty(),
        "functions over {MAX_FN_LINES} lines (split them into named steps):\n{}",
        long.join("\n")
    );
}

#[test]
fn the_function_check_finds_a_planted_long_function() {
    let body = |name: &str, lines: usize| {
        format!("fn {name}() {{\n{}}}\n", "    step();\n".repeat(lines - 2))
    };
    let dir = std::env::temp_dir().join(format!("fn-lengths-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::create_dir_all(dir.join("tests")).unwrap();
    std::fs::write(dir.join("Cargo.toml"), "[package]\nname = \"planted\"\n").unwrap();
    let src = [
        // A declaration without a body, then a function one line too long.
        "trait T {\n    fn declared(&self);\n}\n".to_owned(),
        format!("pub(crate) async {}", body("too_long", MAX_FN_LINES + 1)),
        body("just_fits", MAX_FN_LINES),
        format!("#[test]\n{}", body("a_long_test", MAX_FN_LINES * 2)),
        format!(
            "#[cfg(test)]\nmod tests {{\n{}}}\n",
            body("long_in_tests", MAX_FN_LINES * 2)
        ),
    ]
    .concat();
    std::fs::write(dir.join("src/lib.rs"), src).unwrap();
    std::fs::write(dir.join("src/tests.rs"), body("long_in_tests_rs", 300)).unwrap();
    std::fs::write(dir.join("tests/case.rs"), body("long_integration", 300)).unwrap();
    let found = long_functions(&dir);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(
        found,
        vec![format!(
            "src/lib.rs:4 too_long ({} lines)",
            MAX_FN_LINES + 1
        )]
    );
}
