//! The line the module logs at load: its version, its commit, the server.
//! (The refusal of a server older than 7.0 is unit-tested in
//! `src/server_version.rs` and run against a real Redis 6.2 by
//! `scripts/test-ops.sh` (`make test-ops`).)

use redis_lock_test_support::*;

#[test]
fn the_module_logs_its_version_commit_and_server_at_load() {
    let server = Server::start();
    let log = server.log();
    let line = log
        .lines()
        .find(|line| line.contains("<lock> lock module: version "))
        .unwrap_or_else(|| panic!("no version line in the log:\n{log}"));
    let expected = format!(
        "lock module: version {} (commit ",
        env!("CARGO_PKG_VERSION")
    );
    assert!(line.contains(&expected), "{line}");
    // Built from a git checkout (as the tests are): a 12-digit commit.
    let commit = line
        .split("(commit ")
        .nth(1)
        .and_then(|rest| rest.split(')').next())
        .unwrap_or_default();
    assert!(
        commit.len() == 12 && commit.chars().all(|c| c.is_ascii_hexdigit()),
        "commit {commit:?} in {line}"
    );
    // The server as it names itself in INFO.
    let info = server.info_section("server");
    let named = match info_field(&info, "valkey_version") {
        Some(valkey) => format!(
            "loaded on Valkey {valkey} (redis_version {})",
            info_field(&info, "redis_version").unwrap_or_default()
        ),
        None => format!(
            "loaded on Redis {}",
            info_field(&info, "redis_version").unwrap_or_default()
        ),
    };
    assert!(line.ends_with(&named), "{line} should end with {named}");
}
