//! The documentation, held to the repository: the README stays a front door,
//! every relative link and anchor resolves, every make target is listed by
//! `make help` and on docs/operations.md, and every redis-cli transcript can
//! be pasted as it is. (The error and config tables are checked against the
//! code by unit tests in `src/errors.rs` and `src/config.rs`; the README's
//! Rust start compiles as a doctest of the client crate.)

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The pages this test holds: the README, every page under docs/, and the
/// Rust client's README.
fn pages() -> Vec<PathBuf> {
    let mut pages = vec![root().join("README.md"), root().join("client/README.md")];
    let mut docs: Vec<PathBuf> = fs::read_dir(root().join("docs"))
        .expect("docs/")
        .map(|e| e.expect("docs/ entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
}

/// The lines of `text` outside fenced code blocks.
fn prose(text: &str) -> Vec<&str> {
    let mut inside = false;
    text.lines()
        .filter(|line| {
            if line.trim_start().starts_with("```") {
                inside = !inside;
                return false;
            }
            !inside
        })
        .collect()
}

/// The fenced code blocks of `text`, each as its lines.
fn code_blocks(text: &str) -> Vec<Vec<&str>> {
    let mut blocks = Vec::new();
    let mut current: Option<Vec<&str>> = None;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            match current.take() {
                Some(block) => blocks.push(block),
                None => current = Some(Vec::new()),
            }
        } else if let Some(block) = current.as_mut() {
            block.push(line);
        }
    }
    blocks
}

/// GitHub's anchor for a heading: lower case, punctuation dropped (but `-`
/// and `_`), spaces to `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

fn anchors(text: &str) -> BTreeSet<String> {
    prose(text)
        .into_iter()
        .filter_map(|line| line.strip_prefix('#'))
        .map(|rest| slug(rest.trim_start_matches('#')))
        .collect()
}

/// Every `](target)` of the prose, without external ones.
fn links(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for line in prose(text) {
        let mut rest = line;
        while let Some(at) = rest.find("](") {
            rest = &rest[at + 2..];
            if let Some(end) = rest.find(')') {
                let target = &rest[..end];
                if !target.contains("://") && !target.starts_with("mailto:") {
                    found.push(target.to_string());
                }
                rest = &rest[end..];
            }
        }
    }
    found
}

#[test]
fn the_readme_is_a_front_door() {
    let readme = read(&root().join("README.md"));
    let lines = readme.lines().count();
    assert!(
        lines <= 300,
        "README.md has {lines} lines: move detail to docs/"
    );
    // The first screen says what it is and what each object is.
    let first_screen: String = readme.lines().take(40).collect::<Vec<_>>().join("\n");
    for object in [
        "RLock",
        "RFencedLock",
        "RReadWriteLock",
        "RSemaphore",
        "RPermitExpirableSemaphore",
        "RCountDownLatch",
    ] {
        assert!(
            first_screen.contains(object),
            "the README's first screen does not name {object}"
        );
    }
    assert!(readme.contains("loadmodule "), "how to load it");
}

#[test]
fn every_relative_link_and_anchor_resolves() {
    let mut broken = Vec::new();
    for page in pages() {
        let text = read(&page);
        let dir = page.parent().expect("a page's directory");
        for target in links(&text) {
            let (file, anchor) = match target.split_once('#') {
                Some((file, anchor)) => (file, Some(anchor)),
                None => (target.as_str(), None),
            };
            let linked = if file.is_empty() {
                page.clone()
            } else {
                dir.join(file)
            };
            if !linked.exists() {
                broken.push(format!("{}: {target} (no such file)", page.display()));
                continue;
            }
            if let Some(anchor) = anchor {
                if linked.extension().is_some_and(|x| x == "md")
                    && !anchors(&read(&linked)).contains(anchor)
                {
                    broken.push(format!("{}: {target} (no such heading)", page.display()));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// The targets the Makefile declares `.PHONY`.
fn make_targets(makefile: &str) -> BTreeSet<String> {
    makefile
        .lines()
        .filter_map(|line| line.strip_prefix(".PHONY:"))
        .flat_map(|names| names.split_whitespace())
        .map(str::to_string)
        .collect()
}

#[test]
fn make_help_and_the_operations_page_list_every_target() {
    let makefile = read(&root().join("Makefile"));
    let help: String = makefile
        .lines()
        .skip_while(|line| !line.starts_with("help:"))
        .skip(1)
        .take_while(|line| line.starts_with('\t'))
        .collect::<Vec<_>>()
        .join("\n");
    let operations = read(&root().join("docs/operations.md"));
    let targets = make_targets(&makefile);
    assert!(targets.contains("run") && targets.contains("test-chaos"));
    for target in &targets {
        assert!(
            help.contains(&format!("make {target} ")),
            "make help does not list {target}"
        );
        assert!(
            operations.contains(&format!("| `make {target}` |")),
            "docs/operations.md (\"Make targets\") does not list {target}"
        );
    }
}

/// redis-cli has no comments: a `# ...` pasted after a command is sent as
/// arguments. Transcripts show commands and replies only, as redis-cli
/// prints them.
#[test]
fn redis_cli_transcripts_paste_as_they_are() {
    let mut bad = Vec::new();
    for page in pages() {
        let text = read(&page);
        for block in code_blocks(&text) {
            if !block
                .iter()
                .any(|line| line.starts_with("127.0.0.1:6379> "))
            {
                continue;
            }
            for line in block {
                if line.contains("  #") || line.contains("\t#") {
                    bad.push(format!("{}: {line}", page.display()));
                }
            }
        }
    }
    assert!(
        bad.is_empty(),
        "comments in redis-cli transcripts:\n{}",
        bad.join("\n")
    );
}
