//! Production fit: configuration (settable, from the config file, from
//! `MODULE LOADEX`, as module arguments), `INFO`, `COMMAND DOCS`, sharded
//! publish, the lease cap on releases, eviction warnings, loading the
//! module twice. (ACLs are in `acl.rs`.)

use std::time::Duration;

use redis::{Connection, Value};
use redis_lock_test_support::raw::{RawClient, Resp};
use redis_lock_test_support::*;

/// `MODULE LIST`'s `ver` is the workspace's version, encoded as Redis
/// modules do (`major * 10000 + minor * 100 + patch`).
#[test]
fn module_list_shows_the_workspace_version() {
    let server = Server::start();
    let mut con = server.connection();
    let list: Value = redis::cmd("MODULE")
        .arg("LIST")
        .query(&mut con)
        .expect("MODULE LIST");
    let Value::Array(modules) = list else {
        panic!("MODULE LIST: {list:?}")
    };
    let lock = modules
        .iter()
        .find(|m| find_field(m, "name").and_then(|v| as_string(&v)).as_deref() == Some("lock"))
        .expect("the lock module is listed");
    let parts: Vec<i64> = env!("CARGO_PKG_VERSION")
        .split('.')
        .map(|p| p.parse().expect("a numeric version"))
        .collect();
    let encoded = parts[0] * 10_000 + parts[1] * 100 + parts[2];
    assert_eq!(
        find_field(lock, "ver"),
        Some(Value::Int(encoded)),
        "{lock:?}"
    );
}

#[test]
fn command_docs_describe_every_command() {
    let server = Server::start();
    let mut con = server.connection();
    for (name, args) in [
        (
            "lock.acquire",
            &[
                "key",
                "owner",
                "lease-ms",
                "timeout-ms",
                "grace-ms",
                "token",
                "numreplicas",
                "sync-timeout-ms",
            ][..],
        ),
        (
            "lock.racquire",
            &["key", "owner", "lease-ms", "timeout-ms", "grace-ms"],
        ),
        (
            "lock.semacquire",
            &["key", "permits", "timeout-ms", "grace-ms", "waiter-id"],
        ),
        (
            "lock.await",
            &["key", "timeout-ms", "grace-ms", "waiter-id"],
        ),
        ("lock.cancel", &["key", "owner-or-waiter-id"]),
        ("lock.renew", &["key", "owner", "lease-ms"]),
        ("lock.release", &["key", "owner", "lease-ms"]),
        ("lock.force", &["key"]),
        ("lock.info", &["key"]),
        ("lock.fence", &["key", "token"]),
    ] {
        let docs: Value = redis::cmd("COMMAND")
            .arg("DOCS")
            .arg(name)
            .query(&mut con)
            .expect("COMMAND DOCS");
        let pairs = map_pairs(&docs);
        assert_eq!(pairs.len(), 1, "docs for {name}: {docs:?}");
        let doc: Vec<(String, Value)> = map_pairs(&pairs[0].1)
            .into_iter()
            .map(|(k, v)| (as_string(&k).unwrap(), v))
            .collect();
        let field = |f: &str| {
            doc.iter()
                .find(|(k, _)| k == f)
                .map(|(_, v)| v.clone())
                .unwrap_or_else(|| panic!("{name} docs have {f}"))
        };
        assert!(
            as_string(&field("summary")).is_some_and(|s| !s.is_empty()),
            "{name} summary"
        );
        assert!(
            as_string(&field("complexity")).is_some_and(|s| s.starts_with("O(")),
            "{name} complexity"
        );
        // The first release brought the plain lock's commands; 0.2.0 the
        // fence, the other objects, the cancel and the listing
        // (src/commands/mod.rs has every command's).
        let since = match name {
            "lock.fence" | "lock.racquire" | "lock.semacquire" | "lock.await" | "lock.cancel"
            | "lock.scan" => "0.2.0",
            _ => "0.1.0",
        };
        assert_eq!(as_string(&field("since")).as_deref(), Some(since), "{name}");
        let Value::Array(arguments) = field("arguments") else {
            panic!("{name} arguments")
        };
        let names: Vec<String> = arguments
            .iter()
            .map(|a| find_field(a, "name").and_then(|v| as_string(&v)).unwrap())
            .collect();
        assert_eq!(names, args, "{name} argument names");
    }
    let info: Value = redis::cmd("COMMAND")
        .arg("INFO")
        .arg("lock.renew")
        .query(&mut con)
        .expect("COMMAND INFO");
    let Value::Array(entries) = info else {
        panic!("COMMAND INFO array")
    };
    let Value::Array(entry) = &entries[0] else {
        panic!("COMMAND INFO entry")
    };
    assert_eq!(entry[1], Value::Int(4), "arity of lock.renew");
    let arity = redis::cmd("LOCK.RENEW")
        .arg("k")
        .arg("o")
        .query::<Value>(&mut con);
    expect_err(
        arity,
        "ERR",
        "wrong number of arguments",
        "Redis checks the documented arity",
    );
}

#[test]
fn configs_are_settable_and_bad_values_keep_the_old_one() {
    let server = Server::with(Options::new().module_args(&[
        "channel-prefix",
        "boot",
        "max-lease-ms",
        "60000",
    ]));
    let mut con = server.connection();
    assert_eq!(
        config_get(&mut con, "lock.channel-prefix"),
        "boot",
        "set on the loadmodule line"
    );
    assert_eq!(config_get(&mut con, "lock.max-lease-ms"), "60000");
    assert_eq!(config_get(&mut con, "lock.publish"), "auto");
    assert_eq!(config_get(&mut con, "lock.notify"), "yes");

    for (name, good, bads) in [
        ("lock.channel-prefix", "myapp", &[""][..]),
        ("lock.publish", "sharded", &["loud", "", "1"]),
        ("lock.max-lease-ms", "1000", &["-1", "abc", "1.5"]),
        ("lock.notify", "no", &["maybe", "2"]),
    ] {
        config_set(&mut con, name, good);
        assert_eq!(config_get(&mut con, name), good);
        for bad in bads {
            let refused = redis::cmd("CONFIG")
                .arg("SET")
                .arg(name)
                .arg(*bad)
                .query::<Value>(&mut con);
            expect_err(refused, "ERR", name, &format!("CONFIG SET {name} {bad:?}"));
            assert_eq!(
                config_get(&mut con, name),
                good,
                "{name} kept its value after {bad:?}"
            );
        }
    }
    // The new values are in force.
    let too_long = redis::cmd("LOCK.ACQUIRE")
        .arg("k")
        .arg("o")
        .arg(1001)
        .query::<Value>(&mut con);
    expect_err(
        too_long,
        "ERR",
        "lock.max-lease-ms",
        "lease above lock.max-lease-ms",
    );
}

#[test]
fn sharded_publish_also_works_outside_a_cluster() {
    let server = Server::start();
    let mut con = server.connection();
    config_set(&mut con, "lock.publish", "sharded");
    let mut sub = RawClient::connect(server.port);
    let channel = String::from_utf8(unlock_channel("k")).expect("a text channel");
    sub.send(&["SSUBSCRIBE", &channel]);
    assert_eq!(sub.read().array()[0].text(), "ssubscribe");
    acquire(&mut con, "k", "o", 5000);
    release(&mut con, "k", "o", None);
    let texts: Vec<String> = sub.read().array().iter().map(|v| v.text()).collect();
    assert_eq!(texts, ["smessage", &channel, "0"]);
}

#[test]
fn info_lock_counts_what_happened() {
    let server = Server::with(Options::new().config("hz", &["100"]));
    let mut con = server.connection();
    acquire(&mut con, "k", "a", 30_000);
    acquire(&mut con, "k", "a", 30_000);
    acquire(&mut con, "k", "b", 30_000);
    let mut timed_out = RawClient::connect(server.port);
    timed_out.send(&["LOCK.ACQUIRE", "k", "c", "1000", "WAIT", "20"]);
    assert!(matches!(timed_out.read(), Resp::Int(_)));
    let mut waiter = RawClient::connect(server.port);
    waiter.send(&["LOCK.ACQUIRE", "k", "d", "1000", "WAIT", "0"]);
    poll_until(Duration::from_secs(5), "one waiting client", || {
        server.lock_stats().get("lock_waiting_clients") == Some(&1)
    });
    release(&mut con, "k", "a", None);
    release(&mut con, "k", "a", None);
    assert!(waiter.read().is_nil());
    force(&mut con, "k");

    let stats = server.lock_stats();
    let expect = [
        ("lock_acquired", 2),
        ("lock_reentered", 1),
        ("lock_contended", 3),
        ("lock_released", 1),
        ("lock_forced", 1),
        ("lock_waits_started", 2),
        ("lock_waits_granted", 1),
        ("lock_waits_timed_out", 1),
        ("lock_handoffs", 1),
        ("lock_waiting_clients", 0),
    ];
    for (name, value) in expect {
        assert_eq!(stats.get(name), Some(&value), "{name} in {stats:?}");
    }
}

/// The other two ways to configure the module: a `lock.*` line after the
/// loadmodule line in redis.conf (the command line appends to it), and
/// `MODULE LOADEX ... CONFIG` into a running server.
#[test]
fn configs_from_the_config_file_and_module_loadex() {
    let server = Server::with(
        Options::new()
            .config("lock.channel-prefix", &["fromconf"])
            .config("lock.notify", &["no"]),
    );
    let mut con = server.connection();
    assert_eq!(config_get(&mut con, "lock.channel-prefix"), "fromconf");
    assert_eq!(config_get(&mut con, "lock.notify"), "no");

    let bare = Server::with(
        Options::new()
            .without_module()
            .config("enable-module-command", &["yes"]),
    );
    let mut con = bare.connection();
    let module = module_path();
    let _: () = redis::cmd("MODULE")
        .arg("LOADEX")
        .arg(module.to_str().expect("utf-8 path"))
        .arg("CONFIG")
        .arg("lock.channel-prefix")
        .arg("loadex")
        .arg("CONFIG")
        .arg("lock.publish")
        .arg("classic")
        .query(&mut con)
        .expect("MODULE LOADEX");
    assert_eq!(config_get(&mut con, "lock.channel-prefix"), "loadex");
    assert_eq!(config_get(&mut con, "lock.publish"), "classic");
    let mut sub = RawClient::connect(bare.port);
    sub.send(&["SUBSCRIBE", "loadex:{k}"]);
    assert_eq!(sub.read().array()[0].text(), "subscribe");
    acquire(&mut con, "k", "o", 5000);
    release(&mut con, "k", "o", None);
    let texts: Vec<String> = sub.read().array().iter().map(|v| v.text()).collect();
    assert_eq!(texts, ["message", "loadex:{k}", "0"]);
}

// ---------------------------------------------------------------------------
// lock.max-lease-ms and releases
// ---------------------------------------------------------------------------

/// Redisson sends its lease with every unlock, so a cap below it must not make
/// a release fail (the lock would stay held until its lease ran out): a
/// release's lease is clamped to the cap, while acquire and renew still refuse
/// leases above it.
#[test]
fn a_release_with_a_lease_above_the_cap_succeeds_and_is_clamped() {
    let server = Server::start();
    let mut con = server.connection();
    config_set(&mut con, "lock.max-lease-ms", 10_000);

    assert_eq!(acquire(&mut con, b"twice", b"A", 5_000), None);
    assert_eq!(acquire(&mut con, b"twice", b"A", 5_000), None);
    assert_eq!(release(&mut con, b"twice", b"A", Some(60_000)), Some(0));
    assert_eq!(lock_info(&mut con, b"twice").count_of(b"A"), Some(1));
    let left = pttl(&mut con, b"twice");
    assert!(
        left > 5_000 && left <= 10_000,
        "the lease was reset to the cap, not to 60000 nor kept: {left}"
    );
    assert_eq!(release(&mut con, b"twice", b"A", Some(60_000)), Some(1));
    assert!(!exists(&mut con, b"twice"));

    assert_eq!(acquire(&mut con, b"once", b"A", 5_000), None);
    assert_eq!(release(&mut con, b"once", b"A", Some(60_000)), Some(1));
    assert!(!exists(&mut con, b"once"));

    // Taking and renewing still refuse a lease above the cap.
    let refused = redis::cmd("LOCK.ACQUIRE")
        .arg("k")
        .arg("A")
        .arg(60_000)
        .query::<Value>(&mut con);
    expect_err(refused, "ERR", "lock.max-lease-ms", "acquire above the cap");
    assert_eq!(acquire(&mut con, b"k", b"A", 5_000), None);
    let refused = redis::cmd("LOCK.RENEW")
        .arg("k")
        .arg("A")
        .arg(60_000)
        .query::<Value>(&mut con);
    expect_err(refused, "ERR", "lock.max-lease-ms", "renew above the cap");
    // A bad lease is still refused by a release, and changes nothing.
    let refused = redis::cmd("LOCK.RELEASE")
        .arg("k")
        .arg("A")
        .arg(0)
        .query::<Value>(&mut con);
    expect_err(refused, "ERR", "lease-ms", "release with lease 0");
    assert_eq!(lock_info(&mut con, b"k").count_of(b"A"), Some(1));
}

// ---------------------------------------------------------------------------
// Eviction
// ---------------------------------------------------------------------------

const EVICTION_WARNING: &str = "can evict held locks";

fn info_lock(server: &Server, field: &str) -> Option<String> {
    server.info("lock", field)
}

#[test]
fn an_evicting_policy_at_startup_is_logged_and_shown_in_info() {
    let server = Server::with(Options::new().config("maxmemory-policy", &["allkeys-lru"]));
    let log = server.log();
    let warning = log
        .lines()
        .find(|line| line.contains(EVICTION_WARNING))
        .unwrap_or_else(|| panic!("no eviction warning in the log:\n{log}"));
    assert!(warning.contains("allkeys-lru"), "{warning}");
    assert!(warning.contains("noeviction"), "says what to do: {warning}");
    assert_eq!(
        info_lock(&server, "lock_maxmemory_policy").as_deref(),
        Some("allkeys-lru")
    );
    assert_eq!(
        info_lock(&server, "lock_evicts_locks").as_deref(),
        Some("1")
    );
}

#[test]
fn switching_to_an_evicting_policy_at_run_time_is_logged_and_shown_in_info() {
    let server = Server::start();
    let mut con = server.connection();
    assert_eq!(
        info_lock(&server, "lock_maxmemory_policy").as_deref(),
        Some("noeviction")
    );
    assert_eq!(
        info_lock(&server, "lock_evicts_locks").as_deref(),
        Some("0")
    );
    config_set(&mut con, "hz", "20");
    assert!(
        !server.log().contains(EVICTION_WARNING),
        "noeviction warns of nothing:\n{}",
        server.log()
    );

    config_set(&mut con, "maxmemory-policy", "volatile-ttl");
    let log = server.log();
    let warnings: Vec<&str> = log
        .lines()
        .filter(|line| line.contains(EVICTION_WARNING))
        .collect();
    assert_eq!(warnings.len(), 1, "one warning:\n{log}");
    assert!(warnings[0].contains("volatile-ttl"), "{}", warnings[0]);
    assert_eq!(
        info_lock(&server, "lock_maxmemory_policy").as_deref(),
        Some("volatile-ttl")
    );
    assert_eq!(
        info_lock(&server, "lock_evicts_locks").as_deref(),
        Some("1")
    );

    config_set(&mut con, "maxmemory-policy", "noeviction");
    assert_eq!(
        info_lock(&server, "lock_evicts_locks").as_deref(),
        Some("0")
    );
    assert_eq!(
        info_lock(&server, "lock_maxmemory_policy").as_deref(),
        Some("noeviction")
    );
    let warnings = server
        .log()
        .lines()
        .filter(|line| line.contains(EVICTION_WARNING))
        .count();
    assert_eq!(warnings, 1, "going back to noeviction warns of nothing");
}

// ---------------------------------------------------------------------------
// Module arguments
// ---------------------------------------------------------------------------

/// What every refusal lists: the valid argument names.
const ARGUMENT_NAMES: [&str; 4] = ["channel-prefix", "publish", "max-lease-ms", "notify"];

#[test]
fn bad_module_arguments_stop_the_server_naming_the_argument() {
    for (args, named) in [
        (&["bogus", "1"][..], &["'bogus'"][..]),
        (&["lock.publish", "classic", "bogus", "1"], &["'bogus'"]),
        (&["lock.bogus", "1"], &["'lock.bogus'"]),
        (&["publish"], &["'publish'", "no value"]),
        (&["publish", "classic", "notify"], &["'notify'", "no value"]),
        (&["publish", "bogus"], &["publish", "'bogus'", "classic"]),
        (&["max-lease-ms", "-5"], &["max-lease-ms", "'-5'"]),
        (
            &["lock.max-lease-ms", "1.5"],
            &["lock.max-lease-ms", "'1.5'"],
        ),
        (&["notify", "maybe"], &["notify", "'maybe'"]),
        (&["channel-prefix", ""], &["channel-prefix", "''"]),
        (
            &["publish", "classic", "LOCK.PUBLISH", "off"],
            &["'LOCK.PUBLISH'", "twice"],
        ),
    ] {
        let log = startup_refused(Options::new().module_args(args));
        let line = log
            .lines()
            .find(|line| line.contains("lock module: refusing"))
            .unwrap_or_else(|| panic!("{args:?}: no refusal in the log:\n{log}"));
        for needle in named.iter().chain(&ARGUMENT_NAMES) {
            assert!(line.contains(needle), "{args:?}: {needle:?} in {line}");
        }
    }
}

/// `lock.publish classic` used to be ignored (the crate only matched the bare,
/// exact-case name). Names work bare or prefixed, in any case, and values are
/// read as `CONFIG SET` reads them.
#[test]
fn module_arguments_take_names_with_or_without_the_prefix_in_any_case() {
    let server = Server::with(Options::new().module_args(&[
        "lock.publish",
        "classic",
        "NOTIFY",
        "No",
        "Lock.Max-Lease-Ms",
        "5000",
        "channel-prefix",
        "args",
    ]));
    let mut con = server.connection();
    assert_eq!(config_get(&mut con, "lock.publish"), "classic");
    assert_eq!(config_get(&mut con, "lock.notify"), "no");
    assert_eq!(config_get(&mut con, "lock.max-lease-ms"), "5000");
    assert_eq!(config_get(&mut con, "lock.channel-prefix"), "args");
    config_set(&mut con, "lock.publish", "off");
    assert_eq!(config_get(&mut con, "lock.publish"), "off");

    // A `lock.*` config line after the loadmodule line wins over its argument.
    let server = Server::with(
        Options::new()
            .module_args(&["publish", "classic", "max-lease-ms", "7000"])
            .config("lock.publish", &["sharded"]),
    );
    let mut con = server.connection();
    assert_eq!(config_get(&mut con, "lock.publish"), "sharded");
    assert_eq!(config_get(&mut con, "lock.max-lease-ms"), "7000");
}

/// A second load, of the same file or of a copy, is refused by Redis (the
/// name `lock` is taken); the log says so, where Redis 7.0 and 8.x alone
/// print only "initialization failed". The loaded module is unharmed.
/// A load with the defaults logs no warning: a warning at every start (the
/// `redis-module` crate's "Skip register defrag callbacks" on Redis 7.0 did)
/// teaches operators to ignore the module's real ones.
#[test]
fn a_plain_load_logs_no_warning_from_the_module() {
    let server = Server::start();
    let mut con = server.connection();
    acquire(&mut con, "k", "o", 30_000);
    let log = server.log();
    // Redis marks warnings with `#`; module lines carry `<lock>`.
    let warnings: Vec<&str> = log
        .lines()
        .filter(|line| line.contains(" # <lock>"))
        .collect();
    assert!(warnings.is_empty(), "{warnings:#?}");
    assert!(
        log.contains("<lock>") || log.contains("Module 'lock' loaded"),
        "{log}"
    );
}

#[test]
fn a_second_module_load_is_refused_and_the_log_says_why() {
    const WHY: &str = "lock module: not loaded: a module named 'lock' is already loaded";
    let server = Server::with(Options::new().config("enable-module-command", &["yes"]));
    let mut con = server.connection();
    acquire(&mut con, "k", "o", 30_000);
    let module = module_path();
    let copy = server.dir().join("copy-of-the-module.so");
    std::fs::copy(&module, &copy).expect("copy the module");
    for (n, path) in [module, copy].iter().enumerate() {
        let path = path.to_str().expect("utf-8 module path");
        let refused = command(&["MODULE", "LOAD", path][..]).query::<Value>(&mut con);
        expect_err(refused, "ERR", "", path);
        poll_until(Duration::from_secs(5), "the refusal logged", || {
            server.log().matches(WHY).count() == n + 1
        });
    }
    assert!(
        holder_is(&mut con, "k", "o"),
        "the loaded module kept its lock"
    );
    assert_eq!(
        acquire(&mut con, "k", "p", 30_000).map(|ttl| ttl > 0),
        Some(true)
    );
    assert_eq!(release(&mut con, "k", "o", None), Some(1));
}

#[test]
fn module_load_with_bad_arguments_fails_and_leaves_nothing_loaded() {
    let server = Server::with(
        Options::new()
            .without_module()
            .config("enable-module-command", &["yes"]),
    );
    let mut con = server.connection();
    let module = module_path();
    let module = module.to_str().expect("utf-8 module path");
    let loaded = |con: &mut Connection| -> bool {
        let list: Value = redis::cmd("MODULE")
            .arg("LIST")
            .query(con)
            .expect("MODULE LIST");
        format!("{list:?}").contains("\"lock\"")
    };
    for args in [
        &["MODULE", "LOAD", module, "bogus", "1"][..],
        &["MODULE", "LOAD", module, "publish"],
        &["MODULE", "LOAD", module, "max-lease-ms", "-5"],
        &["MODULE", "LOADEX", module, "ARGS", "lock.publish", "bogus"],
        &[
            "MODULE",
            "LOADEX",
            module,
            "CONFIG",
            "lock.publish",
            "bogus",
        ],
        &["MODULE", "LOADEX", module, "CONFIG", "lock.bogus", "1"],
    ] {
        let refused = command(args).query::<Value>(&mut con);
        expect_err(refused, "ERR", "", &format!("{args:?}"));
        assert!(!loaded(&mut con), "{args:?} left the module loaded");
        let unknown = redis::cmd("LOCK.ACQUIRE")
            .arg("k")
            .arg("o")
            .arg(1000)
            .query::<Value>(&mut con);
        expect_err(unknown, "ERR", "unknown command", "no LOCK.* command");
    }
    let log = server.log();
    assert!(
        log.lines()
            .any(|l| l.contains("lock module: refusing") && l.contains("'bogus'")),
        "the refusal is logged:\n{log}"
    );

    // The server is unharmed, and the module loads with good arguments.
    let _: () = redis::cmd("MODULE")
        .arg("LOADEX")
        .arg(module)
        .arg("CONFIG")
        .arg("lock.notify")
        .arg("no")
        .arg("ARGS")
        .arg("Lock.Publish")
        .arg("classic")
        .arg("notify")
        .arg("yes")
        .query(&mut con)
        .expect("MODULE LOADEX with good arguments");
    assert!(loaded(&mut con));
    assert_eq!(config_get(&mut con, "lock.publish"), "classic");
    assert_eq!(
        config_get(&mut con, "lock.notify"),
        "no",
        "CONFIG beats ARGS"
    );
    assert_eq!(acquire(&mut con, b"k", b"o", 1000), None);
}
