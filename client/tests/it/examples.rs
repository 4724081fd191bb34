//! The examples run against throw-away servers, so CI keeps them working.

use std::process::Command;

use redis_lock_test_support::*;

/// `cargo run --release --example <name> -- <args>`: (success, stdout+stderr).
fn run_example(name: &str, args: &[String]) -> (bool, String) {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let output = Command::new(cargo)
        .args([
            "run",
            "--quiet",
            "--release",
            "-p",
            "redis-lock-client",
            "--example",
            name,
            "--",
        ])
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run cargo");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), text)
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
