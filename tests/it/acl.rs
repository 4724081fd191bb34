//! ACLs: an application user locks its own keys only and cannot force; the
//! commands carry ACL categories; read and write key permissions follow the
//! commands' key specs, which `COMMAND INFO` shows and `COMMAND GETKEYS`
//! finds.

use redis::{Connection, Value};
use redis_lock_test_support::*;

fn as_user(server: &Server, user: &str, password: &str) -> Connection {
    let mut con = server.connection();
    let _: () = redis::cmd("AUTH")
        .arg(user)
        .arg(password)
        .query(&mut con)
        .expect("AUTH");
    con
}

#[test]
fn an_app_user_locks_its_own_keys_only_and_cannot_force() {
    let server = Server::start();
    let mut admin = server.connection();
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("app")
        .arg("on")
        .arg(">pw")
        .arg("~app:*")
        .arg("+lock.acquire")
        .arg("+lock.release")
        .query(&mut admin)
        .expect("ACL SETUSER");
    let mut app = as_user(&server, "app", "pw");

    assert_eq!(acquire(&mut app, "app:1", "o", 5000), None);
    assert_eq!(release(&mut app, "app:1", "o", None), Some(1));

    let other = redis::cmd("LOCK.ACQUIRE")
        .arg("other:1")
        .arg("o")
        .arg(5000)
        .query::<Value>(&mut app);
    expect_err(other, "NOPERM", "", "a key outside ~app:*");
    let forced = redis::cmd("LOCK.FORCE")
        .arg("app:1")
        .query::<Value>(&mut app);
    expect_err(forced, "NOPERM", "", "LOCK.FORCE is not granted");
    assert!(
        !exists(&mut admin, "other:1"),
        "the refused acquire wrote nothing"
    );

    // The key pattern also guards WAIT: a refused waiter never blocks.
    let waited = redis::cmd("LOCK.ACQUIRE")
        .arg("other:2")
        .arg("o")
        .arg(5000)
        .arg("WAIT")
        .arg(0)
        .query::<Value>(&mut app);
    expect_err(waited, "NOPERM", "", "WAIT on a key outside ~app:*");

    // TOKEN: the lock key's pattern governs; the module raises the counter,
    // which the user cannot touch directly (docs/fenced.md, "Cluster and ACLs").
    let token = token_of(&mut app, "app:2", "o", 5000);
    let counter = "redisson_lock_token:{app:2}";
    assert_eq!(
        redis::cmd("GET")
            .arg(counter)
            .query::<i64>(&mut admin)
            .unwrap(),
        token
    );
    let direct = redis::cmd("DEL").arg(counter).query::<Value>(&mut app);
    expect_err(direct, "NOPERM", "", "the counter is outside ~app:*");
}

/// Redis 7.0 has no API to give module commands ACL categories (and derives
/// none); the module must load there all the same. Everywhere else they carry
/// `@write`/`@read`/`@fast` and the module's `@lock`.
#[test]
fn lock_commands_carry_acl_categories_where_the_server_supports_them() {
    let server = Server::start();
    let mut con = server.connection();
    let category = |con: &mut Connection, name: &str| -> Vec<String> {
        let mut members: Vec<String> = redis::cmd("ACL")
            .arg("CAT")
            .arg(name)
            .query(con)
            .expect("ACL CAT");
        members.retain(|c| c.starts_with("lock."));
        members.sort();
        members
    };
    let categories: Vec<String> = redis::cmd("ACL")
        .arg("CAT")
        .query(&mut con)
        .expect("ACL CAT");
    if !categories.iter().any(|c| c == "lock") {
        let version = server.info("server", "redis_version").unwrap_or_default();
        let valkey = server.info("server", "valkey_version");
        assert!(
            valkey.is_none() && (version.starts_with("7.0") || version.starts_with("7.2")),
            "only Redis before 7.4 lacks module ACL categories: redis {version}, valkey {valkey:?}"
        );
        return;
    }
    // The readers: the INFO commands, the semaphore's and latch's counts,
    // LOCK.AWAIT and LOCK.SCAN; every other command writes, and is fast.
    let writers = [
        "lock.acquire",
        "lock.cancel",
        "lock.countdown",
        "lock.fence",
        "lock.force",
        "lock.latchset",
        "lock.permitacquire",
        "lock.permitrelease",
        "lock.permitrenew",
        "lock.racquire",
        "lock.release",
        "lock.renew",
        "lock.rrelease",
        "lock.rwrenew",
        "lock.semacquire",
        "lock.semadd",
        "lock.semdrain",
        "lock.semrelease",
        "lock.semset",
        "lock.wacquire",
        "lock.wrelease",
    ];
    let readers = [
        "lock.await",
        "lock.info",
        "lock.latchcount",
        "lock.latchinfo",
        "lock.scan",
        "lock.semavailable",
        "lock.seminfo",
    ];
    assert_eq!(category(&mut con, "write"), writers);
    let mut fast = writers.to_vec();
    fast.extend(["lock.latchcount", "lock.semavailable"]);
    fast.sort();
    assert_eq!(category(&mut con, "fast"), fast);
    let mut every = writers.to_vec();
    every.extend(readers);
    every.sort();
    assert_eq!(category(&mut con, "lock"), every);
    assert_eq!(category(&mut con, "read"), readers);

    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg("ops")
        .arg("on")
        .arg(">pw")
        .arg("~*")
        .arg("+@lock")
        .query(&mut con)
        .expect("ACL SETUSER +@lock");
    let mut ops = as_user(&server, "ops", "pw");
    assert_eq!(force(&mut ops, "k"), 0, "+@lock allows LOCK.FORCE");
}

/// What docs/operations.md ("ACLs") says works on each server: category
/// rules where the server gives module commands categories, command names
/// on Redis 7.0, where `+@lock` is refused and `+@read +@write` (or
/// `+@fast`) does not cover a single `LOCK.*` command.
#[test]
fn the_acl_rules_the_operations_page_gives_work_on_this_server() {
    let server = Server::start();
    let mut admin = server.connection();
    let categories: Vec<String> = redis::cmd("ACL")
        .arg("CAT")
        .query(&mut admin)
        .expect("ACL CAT");
    let has_categories = categories.iter().any(|c| c == "lock");
    let may_acquire = |user: &str, key: &str| {
        let mut con = as_user(&server, user, "pw");
        !noperm(&mut con, &["LOCK.ACQUIRE", key, "o", "5000"])
    };
    let by_category = redis::cmd("ACL")
        .arg(&["SETUSER", "ops", "on", ">pw", "~*", "+@lock"])
        .query::<()>(&mut admin);
    assert_eq!(by_category.is_ok(), has_categories, "{by_category:?}");
    if has_categories {
        assert!(may_acquire("ops", "k1"), "+@lock");
    }
    acl_setuser(&mut admin, &["rw", "on", ">pw", "~*", "+@read", "+@write"]);
    assert_eq!(may_acquire("rw", "k2"), has_categories, "+@read +@write");
    acl_setuser(&mut admin, &["quick", "on", ">pw", "~*", "+@fast"]);
    assert_eq!(may_acquire("quick", "k3"), has_categories, "+@fast");
    // Everywhere: the commands by name, or +@all.
    acl_setuser(
        &mut admin,
        &["named", "on", ">pw", "~*", "+lock.acquire", "+lock.release"],
    );
    assert!(may_acquire("named", "k4"), "+lock.acquire by name");
    acl_setuser(&mut admin, &["everything", "on", ">pw", "~*", "+@all"]);
    assert!(may_acquire("everything", "k5"), "+@all");

    // The monitoring user: LOCK.INFO, and HGETALL only when granted too.
    acquire(&mut admin, "held", "o", 30_000);
    acl_setuser(&mut admin, &["dash", "on", ">pw", "%R~*", "+lock.info"]);
    let mut dash = as_user(&server, "dash", "pw");
    assert!(!noperm(&mut dash, &["LOCK.INFO", "held"]));
    assert!(noperm(&mut dash, &["HGETALL", "held"]), "no +hgetall");
    acl_setuser(&mut admin, &["dash", "+hgetall"]);
    assert!(!noperm(&mut dash, &["HGETALL", "held"]));
    assert!(noperm(&mut dash, &["LOCK.ACQUIRE", "held", "p", "5000"]));
}

// ---------------------------------------------------------------------------
// Key specs: ACL read / write key permissions
// ---------------------------------------------------------------------------

fn acl_setuser(con: &mut Connection, rules: &[&str]) {
    let _: () = redis::cmd("ACL")
        .arg("SETUSER")
        .arg(rules)
        .query(con)
        .unwrap_or_else(|e| panic!("ACL SETUSER {rules:?}: {e}"));
}

/// Sends `args` and says whether the server refused them with `NOPERM`
/// (any other error fails the test: it would hide what is being checked).
fn noperm(con: &mut Connection, args: &[&str]) -> bool {
    match command(args).query::<Value>(con) {
        Ok(_) => false,
        Err(e) if err_text(&e).starts_with("NOPERM") => true,
        Err(e) => panic!("{args:?}: unexpected error {}", err_text(&e)),
    }
}

/// Each command declares what it does to its key (key specs), so ACL key
/// permissions `%R~` / `%W~` apply to it exactly as to Redis's own commands:
/// `LOCK.INFO` reads (like `HGETALL`); `LOCK.ACQUIRE` reads and writes (it
/// answers the holder's lease, like `PTTL`, and counts holds up, like
/// `HINCRBY`); renew, release and force only write (like `PEXPIRE`, `HDEL`,
/// `DEL`). Before key specs every command needed both permissions.
#[test]
fn acl_read_and_write_key_permissions_follow_the_key_specs() {
    let server = Server::start();
    let mut admin = server.connection();
    assert_eq!(acquire(&mut admin, b"k", b"A", 30_000), None);
    acl_setuser(&mut admin, &["ro", "on", "nopass", "%R~*", "+@all"]);
    acl_setuser(
        &mut admin,
        &["ro-info", "on", "nopass", "%R~*", "+lock.info"],
    );
    acl_setuser(&mut admin, &["wo", "on", "nopass", "%W~*", "+@all"]);

    for user in ["ro", "ro-info"] {
        let mut ro = as_user(&server, user, "any");
        let info = lock_info(&mut ro, b"k");
        assert_eq!(info.state, "held", "{user} reads the lock");
        assert_eq!(info.count_of(b"A"), Some(1));
    }
    let mut ro = as_user(&server, "ro", "any");
    assert!(!noperm(&mut ro, &["HGETALL", "k"]), "HGETALL for %R~*");
    for args in [
        &["LOCK.ACQUIRE", "k", "A", "30000"][..],
        &["LOCK.ACQUIRE", "free", "A", "30000"],
        &["LOCK.ACQUIRE", "k", "B", "30000", "WAIT", "10"],
        &["LOCK.RENEW", "k", "A", "30000"],
        &["LOCK.RELEASE", "k", "A"],
        &["LOCK.FORCE", "k"],
    ] {
        assert!(noperm(&mut ro, args), "{args:?} needs write access");
    }
    assert_eq!(hgetall(&mut admin, b"k"), [(b"A".to_vec(), b"1".to_vec())]);
    assert!(
        !exists(&mut admin, b"free"),
        "the refused acquire wrote nothing"
    );

    let mut wo = as_user(&server, "wo", "any");
    // Redis's own commands, for comparison: reading needs %R, writing %W.
    assert!(noperm(&mut wo, &["HGETALL", "k"]));
    assert!(noperm(&mut wo, &["PTTL", "k"]));
    assert!(!noperm(&mut wo, &["PEXPIRE", "k", "30000"]));
    assert!(
        noperm(&mut wo, &["LOCK.INFO", "k"]),
        "LOCK.INFO reads the lock"
    );
    assert!(
        noperm(&mut wo, &["LOCK.ACQUIRE", "k", "B", "30000"]),
        "LOCK.ACQUIRE answers the holder's lease: it reads"
    );
    assert_eq!(renew(&mut wo, "k", "A", 30_000), 1, "renew with %W~*");
    assert_eq!(acquire(&mut admin, b"k", b"A", 30_000), None, "count 2");
    assert_eq!(
        release(&mut wo, "k", "A", None),
        Some(0),
        "release with %W~*"
    );
    assert_eq!(force(&mut wo, "k"), 1, "force with %W~*");
    assert!(!exists(&mut admin, b"k"));
}

/// One key spec entry of `COMMAND INFO`, as (flags, begin_search, find_keys).
fn key_specs(con: &mut Connection, command: &str) -> (Vec<Value>, Vec<(String, Value)>) {
    let info: Value = redis::cmd("COMMAND")
        .arg("INFO")
        .arg(command)
        .query(con)
        .expect("COMMAND INFO");
    let Value::Array(entries) = info else {
        panic!("COMMAND INFO {command}: {info:?}")
    };
    let Some(Value::Array(entry)) = entries.first() else {
        panic!("COMMAND INFO {command}: {entries:?}")
    };
    let Value::Array(specs) = &entry[8] else {
        panic!("COMMAND INFO {command} key specs: {entry:?}")
    };
    let legacy = entry[3..6].to_vec();
    assert_eq!(specs.len(), 1, "{command} has one key spec: {specs:?}");
    let spec = map_pairs(&specs[0])
        .into_iter()
        .map(|(k, v)| (as_string(&k).expect("key spec field"), v))
        .collect();
    (legacy, spec)
}

fn field<'a>(pairs: &'a [(String, Value)], name: &str) -> &'a Value {
    pairs
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v)
        .unwrap_or_else(|| panic!("{name} in {pairs:?}"))
}

fn strings(value: &Value) -> Vec<String> {
    match value {
        Value::Array(items) | Value::Set(items) => items
            .iter()
            .map(|v| as_string(v).expect("a string").to_ascii_lowercase())
            .collect(),
        other => panic!("expected an array of strings, got {other:?}"),
    }
}

#[test]
fn command_info_shows_each_commands_key_spec_and_getkeys_finds_the_key() {
    let server = Server::start();
    let mut con = server.connection();
    for (command, flags) in [
        ("lock.acquire", &["rw", "access", "update"][..]),
        ("lock.renew", &["rw", "update"]),
        ("lock.release", &["rw", "delete"]),
        ("lock.force", &["rm", "delete"]),
        ("lock.info", &["ro", "access"]),
        ("lock.cancel", &["ro", "access"]),
    ] {
        let (legacy, spec) = key_specs(&mut con, command);
        assert_eq!(
            legacy,
            [Value::Int(1), Value::Int(1), Value::Int(1)],
            "{command}: first/last/step for clients that predate key specs"
        );
        let mut got = strings(field(&spec, "flags"));
        got.sort();
        let mut want: Vec<String> = flags.iter().map(|f| f.to_string()).collect();
        want.sort();
        assert_eq!(got, want, "{command} key spec flags");
        let begin: Vec<(String, Value)> = map_pairs(field(&spec, "begin_search"))
            .into_iter()
            .map(|(k, v)| (as_string(&k).unwrap(), v))
            .collect();
        assert_eq!(as_string(field(&begin, "type")).as_deref(), Some("index"));
        let at: Vec<(String, Value)> = map_pairs(field(&begin, "spec"))
            .into_iter()
            .map(|(k, v)| (as_string(&k).unwrap(), v))
            .collect();
        assert_eq!(field(&at, "index"), &Value::Int(1), "{command}: key at 1");
        let find: Vec<(String, Value)> = map_pairs(field(&spec, "find_keys"))
            .into_iter()
            .map(|(k, v)| (as_string(&k).unwrap(), v))
            .collect();
        assert_eq!(as_string(field(&find, "type")).as_deref(), Some("range"));
        let range: Vec<(String, Value)> = map_pairs(field(&find, "spec"))
            .into_iter()
            .map(|(k, v)| (as_string(&k).unwrap(), v))
            .collect();
        assert_eq!(
            field(&range, "lastkey"),
            &Value::Int(0),
            "{command}: one key"
        );
    }

    for args in [
        &["LOCK.ACQUIRE", "k", "o", "1000"][..],
        &["LOCK.ACQUIRE", "k", "o", "1000", "WAIT", "0"],
        &["LOCK.RENEW", "k", "o", "1000"],
        &["LOCK.RELEASE", "k", "o"],
        &["LOCK.RELEASE", "k", "o", "1000"],
        &["LOCK.FORCE", "k"],
        &["LOCK.INFO", "k"],
        &["LOCK.CANCEL", "k", "o"],
        &["LOCK.ACQUIRE", "k", "o", "1000", "WAIT", "5", "KEEP", "0"],
        &["LOCK.AWAIT", "k", "5", "KEEP", "10", "WAITER", "w"],
    ] {
        let keys: Vec<String> = redis::cmd("COMMAND")
            .arg("GETKEYS")
            .arg(args)
            .query(&mut con)
            .unwrap_or_else(|e| panic!("COMMAND GETKEYS {args:?}: {e}"));
        assert_eq!(keys, ["k"], "COMMAND GETKEYS {args:?}");
    }
    let with_flags: Value = redis::cmd("COMMAND")
        .arg("GETKEYSANDFLAGS")
        .arg("LOCK.INFO")
        .arg("k")
        .query(&mut con)
        .expect("COMMAND GETKEYSANDFLAGS");
    let Value::Array(keys) = with_flags else {
        panic!("GETKEYSANDFLAGS: {with_flags:?}")
    };
    let Value::Array(first) = &keys[0] else {
        panic!("GETKEYSANDFLAGS entry: {keys:?}")
    };
    assert_eq!(as_string(&first[0]).as_deref(), Some("k"));
    let mut flags = strings(&first[1]);
    flags.sort();
    assert_eq!(flags, ["access", "ro"]);
}
