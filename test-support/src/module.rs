//! The module under test, never older than the sources it is tested as.
//!
//! A test binary is built from the test sources only: the module is a cdylib
//! it must not link (Cargo.toml), so nothing rebuilds `libredis_lock.so` when
//! `src/` changes. Loading whatever .so happened to be on disk made a plain
//! `cargo test` after an edit test the old code. So:
//!
//! * `LOCK_MODULE_PATH` unset: the first test that needs the module runs
//!   `cargo build --release --workspace --lib` (the cargo running the tests)
//!   once for the whole test binary and loads the artifact cargo reports.
//!   When nothing changed this costs one no-op cargo run, about 0.1 s per
//!   test binary; a failed build fails every test with cargo's output.
//! * `LOCK_MODULE_PATH` naming that same artifact (what `make test` exports):
//!   built the same way, so it is current by construction. (A comparison of
//!   dates would wrongly refuse it after an edit cargo rightly ignores: a
//!   comment in Cargo.toml, a file under src/ no `mod` names yet.)
//! * `LOCK_MODULE_PATH` naming another file inside the crate: refused if any
//!   file under src/, Cargo.toml or Cargo.lock is newer than it.
//! * `LOCK_MODULE_PATH` outside the crate (a frozen copy, e.g. under /tmp for
//!   stress runs): the same comparison only warns, on stderr, past the test
//!   harness's output capture.

use std::env::consts::{DLL_PREFIX, DLL_SUFFIX};
use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Instant, SystemTime};

/// The module's package directory: where `cargo build` runs and what "inside
/// the crate" means. This crate (`test-support/`) lives inside it, so it is
/// the nearest ancestor of this crate's own directory that holds the
/// module's sources (`src/lib.rs`), whichever package's tests (the module's,
/// the client's) use this crate.
fn crate_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let support = Path::new(env!("CARGO_MANIFEST_DIR"));
        support
            .ancestors()
            .skip(1)
            .find(|dir| dir.join("src/lib.rs").is_file() && dir.join("Cargo.toml").is_file())
            .unwrap_or(support)
            .to_path_buf()
    })
}

/// The module to load (see the module documentation). Built or checked once
/// per test binary; every later call answers the same path, or panics with
/// the same message.
pub fn module_path() -> PathBuf {
    static MODULE: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    match MODULE.get_or_init(locate) {
        Ok(path) => path.clone(),
        Err(why) => panic!("{why}"),
    }
}

fn locate() -> Result<PathBuf, String> {
    let Some(given) = std::env::var_os("LOCK_MODULE_PATH").map(PathBuf::from) else {
        return build();
    };
    let canonical = given.canonicalize().map_err(|e| {
        format!(
            "LOCK_MODULE_PATH={}: {e}; unset it to let the tests build the module",
            given.display()
        )
    })?;
    let inside_crate = crate_dir()
        .canonicalize()
        .is_ok_and(|dir| canonical.starts_with(dir));
    if inside_crate {
        let built = build()?;
        if built.canonicalize().ok().as_ref() == Some(&canonical) {
            return Ok(built);
        }
    }
    if let Some(stale) = staleness(&canonical)? {
        let why = format!(
            "LOCK_MODULE_PATH={} is older than the sources: {stale}",
            given.display()
        );
        if inside_crate {
            return Err(format!(
                "{why}.\nRefusing to test old code: rebuild it, or unset LOCK_MODULE_PATH \
                 and the tests build the module themselves."
            ));
        }
        warn(&format!(
            "warning: {why}; testing it anyway (it is outside the crate: a frozen copy?)"
        ));
    }
    // Absolute: a server resolves a relative path from its own --dir.
    Ok(canonical)
}

/// `cargo build --release --workspace --lib` (what `make build` runs): the
/// path of the module it built (or found up to date), or cargo's output when
/// the build failed. The whole workspace, not `-p redis-lock` alone: Cargo
/// resolves the features of shared dependencies (redis-module's `num-traits`,
/// `serde`'s derive's `syn`) over the packages it builds, the client's
/// redis-rs and tokio add some, and the test build has them all; a module
/// built for its own package alone would be compiled a second time, with
/// its dependencies, for every `cargo test`. The same sources either way.
fn build() -> Result<PathBuf, String> {
    // The cargo running the tests sets CARGO; a test binary run by hand falls
    // back to the cargo that compiled it.
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| OsString::from(env!("CARGO")));
    let started = Instant::now();
    let output = Command::new(&cargo)
        .args([
            "build",
            "--release",
            "--workspace",
            "--lib",
            "--manifest-path",
        ])
        .arg(crate_dir().join("Cargo.toml"))
        .arg("--message-format=json-render-diagnostics")
        .current_dir(crate_dir())
        .output()
        .map_err(|e| format!("cannot run {cargo:?} to build the module: {e}"))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        return Err(format!(
            "`cargo build --release --workspace --lib` failed ({}), so there is no module built from \
             the current sources to test:\n{stderr}",
            output.status
        ));
    }
    let file_name = format!("{DLL_PREFIX}redis_lock{DLL_SUFFIX}");
    let artifact = stdout
        .lines()
        .filter(|line| line.contains(r#""reason":"compiler-artifact""#))
        .find_map(|line| {
            let fresh = line.contains(r#""fresh":true"#);
            json_string_array(line, "filenames")
                .into_iter()
                .find(|f| Path::new(f).file_name().is_some_and(|n| n == &*file_name))
                .map(|f| (PathBuf::from(f), fresh))
        });
    let Some((path, fresh)) = artifact else {
        return Err(format!(
            "`cargo build --release --workspace --lib` succeeded but reported no {file_name}:\n{stdout}\n{stderr}"
        ));
    };
    if !fresh {
        warn(&format!(
            "note: the sources changed: rebuilt {} in {:.1?}",
            path.display(),
            started.elapsed()
        ));
    }
    Ok(path)
}

/// The strings of the array `"key":[...]` in one line of cargo's JSON
/// messages (enough JSON for file names: escapes, no nesting).
fn json_string_array(line: &str, key: &str) -> Vec<String> {
    let Some(start) = line.find(&format!("\"{key}\":[")) else {
        return Vec::new();
    };
    let mut chars = line[start + key.len() + 4..].chars();
    let mut out = Vec::new();
    loop {
        match chars.next() {
            Some('"') => {}
            Some(',') | Some(' ') => continue,
            _ => return out, // `]` or the end
        }
        let mut s = String::new();
        while let Some(c) = chars.next() {
            match c {
                '"' => break,
                '\\' => match chars.next() {
                    Some('n') => s.push('\n'),
                    Some('t') => s.push('\t'),
                    Some('u') => {
                        let hex: String = chars.by_ref().take(4).collect();
                        s.extend(u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32));
                    }
                    Some(other) => s.push(other), // \" \\ \/
                    None => break,
                },
                c => s.push(c),
            }
        }
        out.push(s);
    }
}

/// `None` when `module` is at least as new as every file under src/,
/// Cargo.toml and Cargo.lock; else which file is newer, and by how much.
fn staleness(module: &Path) -> Result<Option<String>, String> {
    let built = modified(module)?;
    let mut sources = vec![
        crate_dir().join("Cargo.toml"),
        crate_dir().join("Cargo.lock"),
    ];
    collect_files(&crate_dir().join("src"), &mut sources)?;
    let mut newest: Option<(SystemTime, PathBuf)> = None;
    for source in sources {
        let Ok(time) = modified(&source) else {
            continue; // removed meanwhile
        };
        if newest.as_ref().is_none_or(|(t, _)| time > *t) {
            newest = Some((time, source));
        }
    }
    Ok(newest.and_then(|(time, source)| {
        let by = time.duration_since(built).ok()?;
        Some(format!(
            "{} was modified {by:.1?} after it",
            source
                .strip_prefix(crate_dir())
                .unwrap_or(&source)
                .display()
        ))
    }))
}

fn modified(path: &Path) -> Result<SystemTime, String> {
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .map_err(|e| format!("modification time of {}: {e}", path.display()))
}

fn collect_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), String> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect_files(&path, out)?;
        } else {
            out.push(path);
        }
    }
    Ok(())
}

/// Straight to stderr: `eprintln!` in a test is captured, and shown only if
/// that test fails.
fn warn(message: &str) {
    let _ = writeln!(std::io::stderr(), "{message}");
}
