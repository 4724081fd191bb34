//! Redisson 3.14.1's own Lua scripts (exactly as its source has them) and the
//! `LOCK.*` commands on the same keys: they exclude each other, re-enter and
//! release each other's holds with the right counts, and publish the same
//! unlock message.

use redis::{Connection, Value};
use redis_lock_test_support::redisson::*;
use redis_lock_test_support::*;

const VARIANTS: [(&str, &str); 2] = [("hincrby", ACQUIRE_HINCRBY), ("hset", ACQUIRE_HSET)];
const LEASE: i64 = 30_000;

fn count(con: &mut Connection, key: &[u8], owner: &[u8]) -> Option<String> {
    redis::cmd("HGET")
        .arg(key)
        .arg(owner)
        .query(con)
        .expect("HGET")
}

fn assert_busy(v: &Value, what: &str) {
    assert!(
        matches!(v, Value::Int(t) if *t > LEASE - 1000 && *t <= LEASE),
        "{what}: expected the holder's remaining lease, got {v:?}"
    );
}

#[test]
fn script_lock_excludes_command_and_command_lock_excludes_script() {
    let server = Server::start();
    let mut con = server.connection();
    for (variant, script) in VARIANTS {
        let key = format!("script-first-{variant}").into_bytes();
        assert_eq!(
            script_acquire(&mut con, script, &key, b"uuid:1", LEASE),
            Value::Nil,
            "{variant}: script acquires"
        );
        assert_eq!(count(&mut con, &key, b"uuid:1").as_deref(), Some("1"));
        let busy = acquire(&mut con, &key, b"uuid:2", LEASE);
        assert!(
            matches!(busy, Some(t) if t > LEASE - 1000 && t <= LEASE),
            "{variant}: LOCK.ACQUIRE on a script lock -> ttl, got {busy:?}"
        );
        assert_eq!(
            holders(&mut con, &key),
            owned_by("uuid:1"),
            "{variant}: unchanged"
        );
        let info = lock_info(&mut con, &key);
        assert_eq!(
            (info.state.as_str(), info.count_of(b"uuid:1")),
            ("held", Some(1)),
            "{variant}: {info:?}"
        );
        assert_eq!(
            renew(&mut con, &key, b"uuid:2", LEASE),
            0,
            "{variant}: non-holder renew"
        );
        assert_eq!(
            release(&mut con, &key, b"uuid:2", None),
            None,
            "{variant}: non-holder release"
        );

        let key = format!("command-first-{variant}").into_bytes();
        assert_eq!(acquire(&mut con, &key, b"uuid:1", LEASE), None);
        let busy = script_acquire(&mut con, script, &key, b"uuid:2", LEASE);
        assert_busy(
            &busy,
            &format!("{variant}: script on a command lock returns pttl"),
        );
        assert_eq!(
            holders(&mut con, &key),
            owned_by("uuid:1"),
            "{variant}: unchanged"
        );
        assert_eq!(
            script_renew(&mut con, &key, b"uuid:2", LEASE),
            Value::Int(0),
            "{variant}: non-holder renew script"
        );
        assert_eq!(
            script_unlock(&mut con, &key, b"uuid:2", LEASE),
            Value::Nil,
            "{variant}: non-holder unlock script"
        );
        assert_eq!(
            holders(&mut con, &key),
            owned_by("uuid:1"),
            "{variant}: unchanged"
        );
    }
}

#[test]
fn reentry_and_release_across_sides_keep_the_count() {
    let server = Server::start();
    let mut con = server.connection();
    for (variant, script) in VARIANTS {
        let key = format!("mixed-{variant}").into_bytes();
        let channel = unlock_channel(&key);
        let mut sub = Subscriber::new(&server, &[&channel]);
        let owner: &[u8] = b"1a2cef15-9816-4bea-89dc-1a8d9ad096ca:644";

        // Script, then command, then script, then command: count 4.
        assert_eq!(
            script_acquire(&mut con, script, &key, owner, LEASE),
            Value::Nil
        );
        assert_eq!(
            acquire(&mut con, &key, owner, LEASE),
            None,
            "{variant}: command re-enters a script lock"
        );
        assert_eq!(count(&mut con, &key, owner).as_deref(), Some("2"));
        assert_eq!(
            script_acquire(&mut con, script, &key, owner, LEASE),
            Value::Nil,
            "{variant}: script re-enters"
        );
        assert_eq!(count(&mut con, &key, owner).as_deref(), Some("3"));
        assert_eq!(acquire(&mut con, &key, owner, LEASE), None);
        assert_eq!(
            lock_info(&mut con, &key).count_of(owner),
            Some(4),
            "{variant}"
        );

        // Release alternately: 4 -> 3 -> 2 -> 1 -> free.
        assert_eq!(release(&mut con, &key, owner, Some(LEASE)), Some(0));
        assert_eq!(count(&mut con, &key, owner).as_deref(), Some("3"));
        assert_eq!(
            script_unlock(&mut con, &key, owner, 5_000),
            Value::Int(0),
            "{variant}: script releases one hold"
        );
        assert_eq!(count(&mut con, &key, owner).as_deref(), Some("2"));
        assert_lease_just_set(
            &mut con,
            &key,
            5_000,
            &format!("{variant}: the script reset the lease"),
        );
        assert_eq!(release(&mut con, &key, owner, None), Some(0));
        assert_eq!(count(&mut con, &key, owner).as_deref(), Some("1"));
        assert!(
            sub.drain(&mut con).is_empty(),
            "{variant}: no unlock message while held"
        );
        assert_eq!(
            script_unlock(&mut con, &key, owner, LEASE),
            Value::Int(1),
            "{variant}: script frees a command-re-entered lock"
        );
        assert!(!exists(&mut con, &key));
        let messages = sub.drain(&mut con);
        assert_eq!(
            messages,
            vec![(channel.clone(), b"0".to_vec())],
            "{variant}: {:?}",
            show(&messages)
        );

        // Command first, script re-enters, script releases, command frees.
        assert_eq!(acquire(&mut con, &key, owner, LEASE), None);
        assert_eq!(
            script_acquire(&mut con, script, &key, owner, LEASE),
            Value::Nil,
            "{variant}: script re-enters a command lock"
        );
        assert_eq!(count(&mut con, &key, owner).as_deref(), Some("2"));
        assert_eq!(script_unlock(&mut con, &key, owner, LEASE), Value::Int(0));
        assert_eq!(count(&mut con, &key, owner).as_deref(), Some("1"));
        assert_eq!(
            release(&mut con, &key, owner, None),
            Some(1),
            "{variant}: command frees"
        );
        assert!(!exists(&mut con, &key));
        let messages = sub.drain(&mut con);
        assert_eq!(
            messages,
            vec![(channel.clone(), b"0".to_vec())],
            "{variant}: {:?}",
            show(&messages)
        );
    }
}

#[test]
fn unlock_script_frees_a_command_lock_and_publishes() {
    let server = Server::start();
    let mut con = server.connection();
    let channel = unlock_channel(b"MoonCake");
    let mut sub = Subscriber::new(&server, &[&channel]);
    assert_eq!(acquire(&mut con, b"MoonCake", b"u:1", LEASE), None);
    assert_eq!(
        script_unlock(&mut con, b"MoonCake", b"u:1", LEASE),
        Value::Int(1),
        "last release by script -> 1"
    );
    assert!(!exists(&mut con, b"MoonCake"));
    let messages = sub.drain(&mut con);
    assert_eq!(
        messages,
        vec![(channel, b"0".to_vec())],
        "{:?}",
        show(&messages)
    );
    // And a command acquires it again at once.
    assert_eq!(acquire(&mut con, b"MoonCake", b"u:2", LEASE), None);
}

#[test]
fn lock_release_of_a_script_lock_publishes() {
    let server = Server::start();
    let mut con = server.connection();
    for (variant, script) in VARIANTS {
        let key = format!("rel-{variant}").into_bytes();
        let channel = unlock_channel(&key);
        let mut sub = Subscriber::new(&server, &[&channel]);
        assert_eq!(
            script_acquire(&mut con, script, &key, b"u:1", LEASE),
            Value::Nil
        );
        assert_eq!(
            release(&mut con, &key, b"u:1", None),
            Some(1),
            "{variant}: LOCK.RELEASE frees a script lock"
        );
        assert!(!exists(&mut con, &key));
        let messages = sub.drain(&mut con);
        assert_eq!(
            messages,
            vec![(channel, b"0".to_vec())],
            "{variant}: {:?}",
            show(&messages)
        );
        assert_eq!(
            script_acquire(&mut con, script, &key, b"u:2", LEASE),
            Value::Nil,
            "{variant}: free for the script"
        );
    }
}

#[test]
fn the_unlock_message_goes_where_a_redisson_waiter_listens_whatever_the_name() {
    // Redisson subscribes its waiters to `prefixName("redisson_lock__channel",
    // name)`: braces are added only when the name has none of its own.
    let server = Server::start();
    let mut con = server.connection();
    for (key, channel) in [
        (&b"plain"[..], &b"redisson_lock__channel:{plain}"[..]),
        (b"{orders}:42", b"redisson_lock__channel:{orders}:42"),
        (b"a{b}c", b"redisson_lock__channel:a{b}c"),
    ] {
        assert_eq!(unlock_channel(key), channel, "Redisson's rule");
        let braced = [&b"redisson_lock__channel:{"[..], key, b"}"].concat();
        // Also listening where a module that always added braces published.
        let channels: Vec<&[u8]> = if braced == channel {
            vec![channel]
        } else {
            vec![channel, &braced]
        };
        let mut sub = Subscriber::new(&server, &channels);
        let name = String::from_utf8_lossy(key);
        assert_eq!(acquire(&mut con, key, b"u:1", LEASE), None);
        assert_eq!(release(&mut con, key, b"u:1", None), Some(1), "{name}");
        assert_eq!(acquire(&mut con, key, b"u:1", LEASE), None);
        assert_eq!(force(&mut con, key), 1, "{name}");
        let messages = sub.drain(&mut con);
        assert_eq!(
            messages,
            vec![(channel.to_vec(), b"0".to_vec()); 2],
            "{name}: release and force publish on Redisson's channel only: {:?}",
            show(&messages)
        );
    }
}

#[test]
fn force_unlock_across_sides() {
    let server = Server::start();
    let mut con = server.connection();
    let channel = unlock_channel(b"res");
    let mut sub = Subscriber::new(&server, &[&channel]);

    // forceUnlockAsync on a command lock.
    assert_eq!(acquire(&mut con, b"res", b"u:1", LEASE), None);
    assert_eq!(acquire(&mut con, b"res", b"u:1", LEASE), None);
    assert_eq!(script_force(&mut con, b"res"), Value::Int(1));
    assert!(!exists(&mut con, b"res"));
    assert_eq!(script_force(&mut con, b"res"), Value::Int(0));
    assert_eq!(lock_info(&mut con, b"res").state, "free");

    // LOCK.FORCE on a script lock.
    assert_eq!(
        script_acquire(&mut con, ACQUIRE_HINCRBY, b"res", b"u:2", LEASE),
        Value::Nil
    );
    assert_eq!(force(&mut con, b"res"), 1);
    assert!(!exists(&mut con, b"res"));

    let messages = sub.drain(&mut con);
    assert_eq!(
        messages,
        vec![
            (channel.clone(), b"0".to_vec()),
            (channel.clone(), b"0".to_vec())
        ],
        "one message from the script's force, one from LOCK.FORCE: {:?}",
        show(&messages)
    );
}

#[test]
fn renew_across_sides() {
    let server = Server::start();
    let mut con = server.connection();

    // The watchdog's script renews a command lock.
    assert_eq!(acquire(&mut con, b"a", b"u:1", 2_000), None);
    assert_eq!(script_renew(&mut con, b"a", b"u:1", 60_000), Value::Int(1));
    assert_lease_just_set(&mut con, b"a", 60_000, "script renewed a command lock");

    // LOCK.RENEW renews a script lock.
    assert_eq!(
        script_acquire(&mut con, ACQUIRE_HSET, b"b", b"u:1", 2_000),
        Value::Nil
    );
    assert_eq!(renew(&mut con, b"b", b"u:1", 60_000), 1);
    assert_lease_just_set(&mut con, b"b", 60_000, "LOCK.RENEW renewed a script lock");
    assert_eq!(
        hgetall(&mut con, b"b"),
        vec![(b"u:1".to_vec(), b"1".to_vec())]
    );
}

#[test]
fn evalsha_scripts_and_commands_interleave() {
    // Redisson sends EVALSHA; the scripts behave the same loaded.
    let server = Server::start();
    let mut con = server.connection();
    let acquire_sha: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(ACQUIRE_HINCRBY)
        .query(&mut con)
        .expect("SCRIPT LOAD");
    let unlock_sha: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(UNLOCK)
        .query(&mut con)
        .expect("SCRIPT LOAD");
    let r: Value = redis::cmd("EVALSHA")
        .arg(&acquire_sha)
        .arg(1)
        .arg("res")
        .arg(LEASE)
        .arg("u:1")
        .query(&mut con)
        .expect("EVALSHA");
    assert_eq!(r, Value::Nil);
    assert!(acquire(&mut con, b"res", b"u:2", LEASE).is_some());
    let r: Value = redis::cmd("EVALSHA")
        .arg(&acquire_sha)
        .arg(1)
        .arg("res")
        .arg(LEASE)
        .arg("u:2")
        .query(&mut con)
        .expect("EVALSHA");
    assert_busy(&r, "EVALSHA on a held lock");
    let r: Value = redis::cmd("EVALSHA")
        .arg(&unlock_sha)
        .arg(2)
        .arg("res")
        .arg(unlock_channel(b"res"))
        .arg(UNLOCK_MESSAGE)
        .arg(LEASE)
        .arg("u:1")
        .query(&mut con)
        .expect("EVALSHA unlock");
    assert_eq!(r, Value::Int(1));
    assert_eq!(acquire(&mut con, b"res", b"u:2", LEASE), None);
}

#[test]
fn script_and_command_on_a_lock_without_expiry_agree() {
    // Both sides answer -1 for a held lock without a lease.
    let server = Server::start();
    let mut con = server.connection();
    let _: i64 = redis::cmd("HSET")
        .arg("res")
        .arg("u:1")
        .arg(1)
        .query(&mut con)
        .expect("HSET");
    assert_eq!(acquire(&mut con, b"res", b"u:2", LEASE), Some(-1));
    assert_eq!(
        script_acquire(&mut con, ACQUIRE_HINCRBY, b"res", b"u:2", LEASE),
        Value::Int(-1)
    );
}

/// A random walk applied twice: with `LOCK.*` on one key and with Redisson's
/// scripts on another. Replies, hashes and leases must match step by step.
#[test]
fn differential_random_ops_match_redisson_scripts() {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    let seed: u64 = std::env::var("LOCK_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_1a2c);
    let mut rng = StdRng::seed_from_u64(seed);
    let server = Server::start();
    let mut con = server.connection();
    let (cmd_key, lua_key): (&[u8], &[u8]) = (b"diff:cmd", b"diff:lua");
    let owners: [&[u8]; 3] = [b"u:1", b"u:2", b"u:3"];
    let leases = [10_000i64, 20_000, 30_000];

    for step in 0..2000 {
        let owner = owners[rng.gen_range(0..owners.len())];
        let lease = leases[rng.gen_range(0..leases.len())];
        let op = rng.gen_range(0..10);
        let (name, by_command, by_script): (&str, Value, Value) = match op {
            0..=3 => (
                "acquire",
                redis::cmd("LOCK.ACQUIRE")
                    .arg(cmd_key)
                    .arg(owner)
                    .arg(lease)
                    .query(&mut con)
                    .expect("LOCK.ACQUIRE"),
                script_acquire(&mut con, ACQUIRE_HINCRBY, lua_key, owner, lease),
            ),
            4 => (
                "renew",
                redis::cmd("LOCK.RENEW")
                    .arg(cmd_key)
                    .arg(owner)
                    .arg(lease)
                    .query(&mut con)
                    .expect("LOCK.RENEW"),
                script_renew(&mut con, lua_key, owner, lease),
            ),
            5..=8 => (
                "release",
                redis::cmd("LOCK.RELEASE")
                    .arg(cmd_key)
                    .arg(owner)
                    .arg(lease)
                    .query(&mut con)
                    .expect("LOCK.RELEASE"),
                script_unlock(&mut con, lua_key, owner, lease),
            ),
            _ => (
                "force",
                redis::cmd("LOCK.FORCE")
                    .arg(cmd_key)
                    .query(&mut con)
                    .expect("LOCK.FORCE"),
                script_force(&mut con, lua_key),
            ),
        };
        let what = format!(
            "step {step} (seed {seed}): {name} {:?} {lease}",
            String::from_utf8_lossy(owner)
        );
        match (&by_command, &by_script) {
            // Remaining leases: read at slightly different moments.
            (Value::Int(a), Value::Int(b)) if name == "acquire" => {
                assert!((a - b).abs() <= 100, "{what}: ttl {a} vs script {b}")
            }
            _ => assert_eq!(by_command, by_script, "{what}: command vs script reply"),
        }
        assert_eq!(
            hgetall(&mut con, cmd_key),
            hgetall(&mut con, lua_key),
            "{what}: hash"
        );
        let (a, b) = (pttl(&mut con, cmd_key), pttl(&mut con, lua_key));
        assert!(
            (a < 0) == (b < 0) && (a - b).abs() <= 100,
            "{what}: PTTL {a} vs script {b}"
        );
    }
}
