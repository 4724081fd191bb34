//! The examples run against throw-away servers, so CI keeps them working.

use std::path::PathBuf;
use std::process::Command;

use redis_lock_test_support::*;

/// Runs the example `name` with `args`: (success, stdout+stderr).
fn run_example(name: &str, args: &[String]) -> (bool, String) {
    let output = Command::new(example_executable(name))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run the example");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), text)
}

/// `cargo build --release --workspace --example <name>`: the executable
/// cargo reports, the one `cargo test` has just built (a no-op then). Not
/// `cargo run -p redis-lock-client`: Cargo resolves the features of shared
/// dependencies (libc's, from the module's redis-module) over the packages
/// it builds, so that would compile the client and the example a second
/// time, for the client's package alone, inside the test.
fn example_executable(name: &str) -> PathBuf {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let output = Command::new(cargo)
        .args(["build", "--release", "--workspace", "--example", name])
        .arg("--message-format=json-render-diagnostics")
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run cargo");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "cargo build --example {name} failed:\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
        .lines()
        .find_map(|line| {
            let start = line.find(r#""executable":""#)? + r#""executable":""#.len();
            let path = &line[start..];
            Some(PathBuf::from(&path[..path.find('"')?]))
        })
        .unwrap_or_else(|| panic!("cargo reported no executable for example {name}:\n{stdout}"))
}

#[test]
fn the_watchdog_example_keeps_its_lock_and_hears_of_the_force() {
    let server = Server::start();
    let (ok, out) = run_example("watchdog", &[server.url()]);
    assert!(ok, "{out}");
    assert!(out.contains("the watchdog kept it"), "{out}");
    assert!(out.contains("told after"), "{out}");
}

#[test]
fn the_redlock_example_locks_a_majority_of_three() {
    let mut servers: Vec<Server> = (0..3).map(|_| Server::start()).collect();
    servers[0].crash(); // a minority down changes nothing
    let urls: Vec<String> = servers.iter().map(|s| s.url()).collect();
    let (ok, out) = run_example("redlock", &urls);
    assert!(ok, "{out}");
    assert!(out.contains("quorum 2"), "{out}");
    assert!(out.contains("released on every master"), "{out}");
    for server in &servers[1..] {
        assert!(!exists(&mut server.connection(), "example:redlock"));
    }
}
