//! Embeds the git commit the module is built from, for the line it logs at
//! load (`LOCK_GIT_COMMIT`, read by `src/lib.rs`).
//!
//! * `REDIS_LOCK_COMMIT` in the environment wins: a build from a source
//!   tarball (no `.git`) can still name its commit, and so can a Docker
//!   build (the Dockerfile's build argument of that name).
//! * Otherwise `git rev-parse` in this package's directory, but only when
//!   that directory is the top of its own checkout: a tarball unpacked
//!   inside some other repository must not take that repository's commit.
//! * Otherwise `unknown`: no git, no `.git`, nothing breaks.
//!
//! Cargo reruns this script when HEAD moves (a commit, a checkout): it
//! watches HEAD, HEAD's reflog and the branch's ref, those that exist (a
//! path that does not exist would make Cargo rerun it on every build).

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=REDIS_LOCK_COMMIT");
    let commit = std::env::var("REDIS_LOCK_COMMIT")
        .ok()
        .filter(|commit| !commit.trim().is_empty())
        .or_else(git_commit)
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=LOCK_GIT_COMMIT={}", commit.trim());
}

/// Runs git in this package's directory; its trimmed output on success.
fn git(args: &[&str]) -> Option<String> {
    let dir = std::env::var_os("CARGO_MANIFEST_DIR")?;
    let output = Command::new("git")
        .args(args)
        .current_dir(&dir)
        .output()
        .ok()?;
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).trim().to_string())
}

fn git_commit() -> Option<String> {
    let manifest_dir = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR")?);
    let top = PathBuf::from(git(&["rev-parse", "--show-toplevel"])?);
    if !same_dir(&top, &manifest_dir) {
        return None;
    }
    let commit = git(&["rev-parse", "--short=12", "HEAD"])?;
    let mut watched = vec!["HEAD".to_string(), "logs/HEAD".to_string()];
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watched.push(branch);
    }
    for name in watched {
        if let Some(path) = git(&["rev-parse", "--git-path", &name]) {
            let path = manifest_dir.join(path);
            if path.exists() {
                println!("cargo:rerun-if-changed={}", path.display());
            }
        }
    }
    Some(commit)
}

fn same_dir(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}
