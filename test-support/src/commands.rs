//! Plain commands, typed: one call per command a test reads a lock or a
//! server with (`HGETALL`, `PTTL`, `EXISTS`, `CONFIG`...). A server error
//! fails the test, naming the command.
//!
//! Helpers take keys and owners as anything the `redis` crate can send
//! (`"L"`, `b"k\x00"`, `&String`, `&[u8]`...) and any connection
//! (`redis::Connection`, a cluster connection).

use redis::{ConnectionLike, ToRedisArgs, Value};

use crate::reply::info_field;

/// A command from its name and arguments in one list: `&["SET", "k", "v"]`,
/// `&[b"LOCK.INFO", key]`, `&args` of a `Vec<Vec<u8>>`...
pub fn command(args: impl ToRedisArgs) -> redis::Cmd {
    let mut cmd = redis::Cmd::new();
    cmd.arg(args);
    cmd
}

/// Runs `args` (name first); a server error fails the test, naming the command.
pub fn run(con: &mut impl ConnectionLike, args: &[&str]) -> Value {
    command(args)
        .query(con)
        .unwrap_or_else(|e| panic!("{}: {e}", args.join(" ")))
}

/// Runs `cmd` and decodes its reply; an error fails the test, naming the command.
pub(crate) fn query<T: redis::FromRedisValue>(
    con: &mut impl ConnectionLike,
    cmd: &redis::Cmd,
) -> T {
    cmd.query(con).unwrap_or_else(|e| {
        let line = cmd
            .args_iter()
            .map(|a| match a {
                redis::Arg::Simple(bytes) => format!("{:?}", String::from_utf8_lossy(bytes)),
                redis::Arg::Cursor => "<cursor>".to_string(),
                // `Arg` is `#[non_exhaustive]` since redis 1.0.
                _ => "<arg>".to_string(),
            })
            .collect::<Vec<_>>()
            .join(" ");
        panic!("{line}: {e}")
    })
}

/// A command's arguments as a failing test shows them: each quoted, as
/// lossy UTF-8 (`"LOCK.ACQUIRE" "k\u{0}" "a"`).
pub fn show_args(args: &[Vec<u8>]) -> String {
    args.iter()
        .map(|a| format!("{:?}", String::from_utf8_lossy(a)))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `cmd` with `name` and one `arg`: most helpers below are one of these.
pub(crate) fn cmd1(name: &str, arg: impl ToRedisArgs) -> redis::Cmd {
    let mut cmd = redis::cmd(name);
    cmd.arg(arg);
    cmd
}

/// The hash of a lock as sorted (field, value) pairs.
pub fn hgetall(con: &mut impl ConnectionLike, key: impl ToRedisArgs) -> Vec<(Vec<u8>, Vec<u8>)> {
    sorted_pairs(con, key)
}

/// The hash of a lock as sorted (owner, count) text pairs: what [`owned_by`]
/// builds.
pub fn holders(con: &mut impl ConnectionLike, key: impl ToRedisArgs) -> Vec<(String, String)> {
    sorted_pairs(con, key)
}

fn sorted_pairs<T: redis::FromRedisValue + Ord>(
    con: &mut impl ConnectionLike,
    key: impl ToRedisArgs,
) -> Vec<(T, T)> {
    let mut pairs: Vec<(T, T)> = query(con, &cmd1("HGETALL", key));
    pairs.sort();
    pairs
}

/// What [`holders`] answers for a lock `owner` holds once.
pub fn owned_by(owner: &str) -> Vec<(String, String)> {
    vec![(owner.to_string(), "1".to_string())]
}

pub fn holder_is(con: &mut impl ConnectionLike, key: impl ToRedisArgs, owner: &str) -> bool {
    holders(con, key) == owned_by(owner)
}

pub fn pttl(con: &mut impl ConnectionLike, key: impl ToRedisArgs) -> i64 {
    query(con, &cmd1("PTTL", key))
}

/// Asserts that `key`'s lease was just set to `lease_ms`: its PTTL is in
/// the last second of it (a lease extended or kept instead would show).
/// `what` names the step that set it.
pub fn assert_lease_just_set(
    con: &mut impl ConnectionLike,
    key: impl ToRedisArgs,
    lease_ms: i64,
    what: &str,
) {
    let ttl = pttl(con, key);
    assert!(
        ttl > lease_ms - 1000 && ttl <= lease_ms,
        "{what}: PTTL {ttl}, not in the last second of a {lease_ms} ms lease"
    );
}

pub fn pexpiretime(con: &mut impl ConnectionLike, key: impl ToRedisArgs) -> i64 {
    query(con, &cmd1("PEXPIRETIME", key))
}

pub fn exists(con: &mut impl ConnectionLike, key: impl ToRedisArgs) -> bool {
    query::<i64>(con, &cmd1("EXISTS", key)) == 1
}

/// `SET key value`, which must succeed.
pub fn set(con: &mut impl ConnectionLike, key: impl ToRedisArgs, value: impl ToRedisArgs) {
    let mut cmd = cmd1("SET", key);
    cmd.arg(value);
    let () = query(con, &cmd);
}

/// `CONFIG GET name`: its one value.
pub fn config_get(con: &mut impl ConnectionLike, name: &str) -> String {
    let pair: Vec<String> = query(con, &cmd1("CONFIG", &["GET", name]));
    match <[String; 2]>::try_from(pair) {
        Ok([got, value]) if got == name => value,
        Ok(pair) => panic!("CONFIG GET {name} answered another config: {pair:?}"),
        Err(pair) => panic!("{name} is a config: CONFIG GET answered {pair:?}"),
    }
}

/// `CONFIG SET name value`, which must succeed.
pub fn config_set(con: &mut impl ConnectionLike, name: &str, value: impl ToRedisArgs) {
    let mut cmd = cmd1("CONFIG", &["SET", name]);
    cmd.arg(value);
    let () = query(con, &cmd);
}

/// `used_memory` from INFO memory.
pub fn used_memory(con: &mut impl ConnectionLike) -> i64 {
    let info: String = query(con, &cmd1("INFO", "memory"));
    info_field(&info, "used_memory")
        .and_then(|v| v.parse().ok())
        .expect("used_memory in INFO memory")
}

/// Runs `args` (name first); a server error is returned as its text.
pub fn try_run(con: &mut impl ConnectionLike, args: &[&str]) -> Result<Value, String> {
    command(args)
        .query(con)
        .map_err(|e| crate::reply::err_text(&e))
}

/// Runs `args`, whose reply must be an integer.
pub fn run_int(con: &mut impl ConnectionLike, args: &[&str]) -> i64 {
    match run(con, args) {
        Value::Int(n) => n,
        other => panic!("{}: not an integer: {other:?}", args.join(" ")),
    }
}

/// Runs each command of `cases`, which must be refused with an error
/// starting with its text.
pub fn assert_refused(con: &mut impl ConnectionLike, cases: &[(&[&str], &str)]) {
    for (args, start) in cases {
        match try_run(con, args) {
            Err(e) => assert!(e.starts_with(start), "{args:?}: {e}"),
            Ok(reply) => panic!("{args:?} was not refused: {reply:?}"),
        }
    }
}
