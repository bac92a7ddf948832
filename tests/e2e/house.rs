//! The house's own rules, as ARCHITECTURE.md states them: outside tests,
//! no source file over 1,000 lines and no function over 150 lines.
//!
//! Functions are found by their `fn` line and measured to the brace that
//! closes their body, with strings, characters and comments skipped; test
//! code (files under `tests/` or `benches/`, `tests.rs`, `src/tests/`, and
//! a file's `#[cfg(test)] mod` at its end) is not counted.

use std::path::{Path, PathBuf};

const MAX_FILE_LINES: usize = 1_000;
const MAX_FUNCTION_LINES: usize = 150;

/// The crates whose sources the rules cover.
const ROOTS: [&str; 3] = ["mqs-abi", "dll", "host"];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

fn is_test_path(path: &Path) -> bool {
    path.components().any(|c| {
        let c = c.as_os_str();
        c == "tests" || c == "benches" || c == "target"
    }) || path.file_name().is_some_and(|n| n == "tests.rs")
}

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if is_test_path(&path) {
            continue;
        }
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The source without its trailing test module.
fn product_lines(text: &str) -> Vec<&str> {
    let lines: Vec<&str> = text.lines().collect();
    let end = lines
        .windows(2)
        .position(|w| w[0].trim() == "#[cfg(test)]" && w[1].trim_start().starts_with("mod "))
        .unwrap_or(lines.len());
    lines[..end].to_vec()
}

/// Braces of one line that are code: strings, character literals and
/// comments are skipped. `in_string` carries a string across lines (a
/// raw string's hashes, or None for a plain one).
fn braces(line: &str, in_string: &mut Option<Option<usize>>) -> i64 {
    let b = line.as_bytes();
    let mut depth = 0;
    let mut i = 0;
    while i < b.len() {
        if let Some(raw) = *in_string {
            match raw {
                None if b[i] == b'\\' => i += 1,
                None if b[i] == b'"' => *in_string = None,
                Some(hashes)
                    if b[i] == b'"'
                        && b[i + 1..].iter().take_while(|&&c| c == b'#').count() >= hashes =>
                {
                    *in_string = None;
                    i += hashes;
                }
                _ => {}
            }
            i += 1;
            continue;
        }
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => break,
            b'"' => *in_string = Some(None),
            b'r' if matches!(b.get(i + 1), Some(b'"' | b'#'))
                && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_')) =>
            {
                let hashes = b[i + 1..].iter().take_while(|&&c| c == b'#').count();
                if b.get(i + 1 + hashes) == Some(&b'"') {
                    *in_string = Some(Some(hashes));
                    i += 1 + hashes;
                }
            }
            b'\'' => {
                // A character literal ('x', '\n', '\u{..}'); else a lifetime.
                if b.get(i + 1) == Some(&b'\\') {
                    if let Some(close) = b[i + 2..].iter().position(|&c| c == b'\'') {
                        i += 2 + close;
                    }
                } else if b.get(i + 2) == Some(&b'\'') {
                    i += 2;
                }
            }
            b'{' => depth += 1,
            b'}' => depth -= 1,
            _ => {}
        }
        i += 1;
    }
    depth
}

fn is_fn_line(line: &str) -> Option<&str> {
    let t = line.trim_start();
    let t = t.strip_prefix("pub ").or_else(|| {
        t.strip_prefix("pub(")
            .and_then(|r| r.split_once(") ").map(|(_, rest)| rest))
    });
    let t = t.unwrap_or(line.trim_start());
    let t = ["const ", "async ", "unsafe ", "extern \"C\" "]
        .iter()
        .fold(t, |t, p| t.strip_prefix(p).unwrap_or(t));
    let name = t.strip_prefix("fn ")?;
    Some(name.split(['(', '<']).next().unwrap_or(name))
}

/// Functions longer than the limit: (lines, name, first line).
fn long_functions(lines: &[&str]) -> Vec<(usize, String, usize)> {
    let mut found = Vec::new();
    for (start, line) in lines.iter().enumerate() {
        let Some(name) = is_fn_line(line) else {
            continue;
        };
        let (mut depth, mut opened, mut string) = (0i64, false, None);
        for (offset, l) in lines[start..].iter().enumerate() {
            let d = braces(l, &mut string);
            opened |= d > 0 || l.contains('{');
            depth += d;
            if !opened && l.trim_end().ends_with(';') {
                break;
            }
            if opened && depth <= 0 {
                if offset + 1 > MAX_FUNCTION_LINES {
                    found.push((offset + 1, name.to_string(), start + 1));
                }
                break;
            }
        }
    }
    found
}

#[test]
fn no_file_over_1000_lines_and_no_function_over_150_outside_tests() {
    let root = repo();
    let mut files = Vec::new();
    for dir in ROOTS {
        sources(&root.join(dir), &mut files);
    }
    assert!(
        files.len() > 100,
        "the sources were not found under {}",
        root.display()
    );
    let mut broken = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("a source file");
        let lines = product_lines(&text);
        let name = file
            .strip_prefix(&root)
            .unwrap_or(file)
            .display()
            .to_string();
        if lines.len() > MAX_FILE_LINES {
            broken.push(format!("{name}: {} lines", lines.len()));
        }
        for (length, function, at) in long_functions(&lines) {
            broken.push(format!("{name}:{at}: fn {function} is {length} lines"));
        }
    }
    assert!(
        broken.is_empty(),
        "over the house's limits (split them, or change the rule in ARCHITECTURE.md):\n{}",
        broken.join("\n")
    );
}

#[test]
fn the_measure_sees_braces_in_strings_and_characters_as_text() {
    let code = [
        "fn short() {",
        "    let a = \"{ not a brace\";",
        "    let b = '{';",
        "    let c = r#\"} nor \"this\" {\"#;",
        "    // { a comment",
        "}",
    ];
    let mut string = None;
    let depth: i64 = code.iter().map(|l| braces(l, &mut string)).sum();
    assert_eq!(depth, 0);
    let mut long = vec!["pub(crate) fn long<'a>(x: &'a str) {"];
    long.extend(std::iter::repeat_n("    x.len();", MAX_FUNCTION_LINES));
    long.push("}");
    assert_eq!(
        long_functions(&long),
        [(MAX_FUNCTION_LINES + 2, "long".to_string(), 1)]
    );
}
