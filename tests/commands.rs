//! Every reply in the `LOCK.*` contracts (src/commands/*.rs), the unlock
//! message, keyspace notifications, configs, INFO counters, command metadata,
//! and the commands inside MULTI/EXEC and Lua.

use std::time::{Duration, Instant};

use redis::Value;
use redis_lock_test_support::redisson::ACQUIRE_HINCRBY;
use redis_lock_test_support::*;

const LEASE: i64 = 30_000;

// ---------------------------------------------------------------------------
// LOCK.ACQUIRE
// ---------------------------------------------------------------------------

#[test]
fn acquire_free_lock_sets_count_one_and_lease() {
    let server = Server::start();
    let mut con = server.connection();

    assert_eq!(
        acquire(&mut con, b"res", b"A", LEASE),
        None,
        "acquire on a free lock replies nil"
    );
    assert_eq!(
        hgetall(&mut con, b"res"),
        vec![(b"A".to_vec(), b"1".to_vec())],
        "hash is {{A: 1}}"
    );
    assert_lease_just_set(&mut con, b"res", LEASE, "a free lock acquired");
    let type_: String = redis::cmd("TYPE").arg("res").query(&mut con).expect("TYPE");
    assert_eq!(type_, "hash");
}

#[test]
fn acquire_reentry_increments_count_and_resets_lease() {
    let server = Server::start();
    let mut con = server.connection();

    assert_eq!(acquire(&mut con, b"res", b"A", 10_000), None);
    assert_eq!(
        acquire(&mut con, b"res", b"A", 60_000),
        None,
        "re-entry replies nil"
    );
    assert_eq!(
        hgetall(&mut con, b"res"),
        vec![(b"A".to_vec(), b"2".to_vec())],
        "count is 2"
    );
    assert_lease_just_set(
        &mut con,
        b"res",
        60_000,
        "re-entry must reset the lease to 60000 ms",
    );
    // And a shorter one shortens it: the lease is set, not maxed.
    assert_eq!(acquire(&mut con, b"res", b"A", 5_000), None);
    assert_lease_just_set(
        &mut con,
        b"res",
        5_000,
        "re-entry sets the lease to 5000 ms",
    );
    assert_eq!(lock_info(&mut con, b"res").count_of(b"A"), Some(3));
}

#[test]
fn acquire_held_by_other_replies_remaining_lease_and_changes_nothing() {
    let server = Server::start();
    let mut con = server.connection();

    assert_eq!(acquire(&mut con, b"res", b"A", LEASE), None);
    let deadline = pexpiretime(&mut con, b"res");
    let ttl =
        acquire(&mut con, b"res", b"B", 99_000).expect("contended acquire replies an integer");
    let now_ttl = pttl(&mut con, b"res");
    assert!(
        ttl > LEASE - 1000 && ttl <= LEASE,
        "remaining lease {ttl} should be close to {LEASE}"
    );
    assert!(
        (ttl - now_ttl).abs() < 1000,
        "reply {ttl} should be the holder's PTTL ({now_ttl})"
    );
    assert_eq!(
        hgetall(&mut con, b"res"),
        vec![(b"A".to_vec(), b"1".to_vec())],
        "B was not added"
    );
    assert_eq!(
        pexpiretime(&mut con, b"res"),
        deadline,
        "B did not touch the lease"
    );
}

#[test]
fn acquire_on_hash_without_expiry_replies_minus_one() {
    let server = Server::start();
    let mut con = server.connection();

    let _: i64 = redis::cmd("HSET")
        .arg("res")
        .arg("A")
        .arg(1)
        .query(&mut con)
        .expect("HSET");
    assert_eq!(
        acquire(&mut con, b"res", b"B", LEASE),
        Some(-1),
        "no expiry -> -1"
    );
    assert_eq!(pttl(&mut con, b"res"), -1, "still no expiry");
    assert_eq!(
        hgetall(&mut con, b"res"),
        vec![(b"A".to_vec(), b"1".to_vec())]
    );
    let info = lock_info(&mut con, b"res");
    assert_eq!(
        (info.state.as_str(), info.ttl_ms, info.deadline_ms),
        ("held", -1, -1),
        "{info:?}"
    );
}

#[test]
fn lease_expiry_frees_the_lock_for_another_owner() {
    let server = Server::start();
    let mut con = server.connection();

    let start = Instant::now();
    assert_eq!(acquire(&mut con, b"res", b"A", 100), None);
    let busy = acquire(&mut con, b"res", b"B", LEASE);
    assert!(
        matches!(busy, Some(t) if (0..=100).contains(&t)),
        "B must be refused while A's lease runs: {busy:?}"
    );
    let mut granted_after = None;
    poll_until(
        Duration::from_secs(3),
        "B acquires after A's 100 ms lease",
        || {
            if acquire(&mut con, b"res", b"B", LEASE).is_none() {
                granted_after = Some(start.elapsed());
                true
            } else {
                false
            }
        },
    );
    let granted_after = granted_after.expect("granted");
    assert!(
        granted_after >= Duration::from_millis(90),
        "B got the lock after only {granted_after:?}"
    );
    assert_eq!(
        hgetall(&mut con, b"res"),
        vec![(b"B".to_vec(), b"1".to_vec())],
        "A's hold is gone"
    );
}

#[test]
fn binary_safe_owners_and_keys() {
    let server = Server::start();
    let mut con = server.connection();
    let owner: &[u8] = b"uu\x00id\xff\xfe:1";
    let prefix_of_owner: &[u8] = b"uu";
    let key: &[u8] = b"k\x00\xff{x}";
    let mut sub = Subscriber::new(&server, &[&unlock_channel(key)]);

    assert_eq!(acquire(&mut con, key, owner, LEASE), None);
    assert_eq!(acquire(&mut con, key, owner, LEASE), None);
    assert_eq!(
        hgetall(&mut con, key),
        vec![(owner.to_vec(), b"2".to_vec())],
        "owner stored byte for byte"
    );
    let info = lock_info(&mut con, key);
    assert_eq!(
        info.count_of(owner),
        Some(2),
        "LOCK.INFO shows the binary owner: {info:?}"
    );
    assert!(
        acquire(&mut con, key, prefix_of_owner, LEASE).is_some(),
        "a prefix of the owner is another owner"
    );
    assert_eq!(renew(&mut con, key, prefix_of_owner, LEASE), 0);
    assert_eq!(
        release(&mut con, key, prefix_of_owner, None),
        None,
        "a prefix of the owner does not hold it"
    );
    assert_eq!(renew(&mut con, key, owner, LEASE), 1);
    assert_eq!(release(&mut con, key, owner, None), Some(0));
    assert_eq!(release(&mut con, key, owner, None), Some(1));
    assert!(!exists(&mut con, key));
    let messages = sub.drain(&mut con);
    assert_eq!(
        messages,
        vec![(unlock_channel(key), b"0".to_vec())],
        "unlock message on the binary key's channel: {:?}",
        show(&messages)
    );
}

// ---------------------------------------------------------------------------
// LOCK.RENEW
// ---------------------------------------------------------------------------

#[test]
fn renew_replies_one_for_holder_and_resets_lease() {
    let server = Server::start();
    let mut con = server.connection();

    assert_eq!(acquire(&mut con, b"res", b"A", 5_000), None);
    assert_eq!(acquire(&mut con, b"res", b"A", 5_000), None);
    assert_eq!(
        renew(&mut con, b"res", b"A", 60_000),
        1,
        "holder renews -> 1"
    );
    assert_lease_just_set(&mut con, b"res", 60_000, "lease reset to 60000 ms");
    assert_eq!(
        hgetall(&mut con, b"res"),
        vec![(b"A".to_vec(), b"2".to_vec())],
        "renew does not change the count"
    );
    assert_eq!(renew(&mut con, b"res", b"A", 2_000), 1);
    assert_lease_just_set(
        &mut con,
        b"res",
        2_000,
        "renew sets (not extends) the lease",
    );
}

#[test]
fn renew_replies_zero_for_non_holder_and_missing_lock() {
    let server = Server::start();
    let mut con = server.connection();

    assert_eq!(
        renew(&mut con, b"missing", b"A", LEASE),
        0,
        "missing lock -> 0"
    );
    assert!(
        !exists(&mut con, b"missing"),
        "renew must not create the key"
    );

    assert_eq!(acquire(&mut con, b"res", b"A", LEASE), None);
    let deadline = pexpiretime(&mut con, b"res");
    assert_eq!(renew(&mut con, b"res", b"B", 99_000), 0, "non-holder -> 0");
    assert_eq!(
        pexpiretime(&mut con, b"res"),
        deadline,
        "non-holder's renew changed the lease"
    );
    assert_eq!(
        hgetall(&mut con, b"res"),
        vec![(b"A".to_vec(), b"1".to_vec())]
    );
}

// ---------------------------------------------------------------------------
// LOCK.RELEASE
// ---------------------------------------------------------------------------

#[test]
fn release_by_non_holder_replies_nil_and_changes_nothing() {
    let server = Server::start();
    let mut con = server.connection();

    assert_eq!(
        release(&mut con, b"missing", b"A", None),
        None,
        "missing lock -> nil"
    );
    assert_eq!(release(&mut con, b"missing", b"A", Some(LEASE)), None);
    assert!(!exists(&mut con, b"missing"));

    assert_eq!(acquire(&mut con, b"res", b"A", LEASE), None);
    let deadline = pexpiretime(&mut con, b"res");
    assert_eq!(
        release(&mut con, b"res", b"B", None),
        None,
        "non-holder -> nil"
    );
    assert_eq!(
        release(&mut con, b"res", b"B", Some(99_000)),
        None,
        "non-holder with lease -> nil"
    );
    assert_eq!(
        hgetall(&mut con, b"res"),
        vec![(b"A".to_vec(), b"1".to_vec())],
        "count unchanged"
    );
    assert_eq!(pexpiretime(&mut con, b"res"), deadline, "lease unchanged");
}

#[test]
fn release_reentered_lock_replies_zero_and_resets_or_keeps_lease() {
    let server = Server::start();
    let mut con = server.connection();

    for _ in 0..3 {
        assert_eq!(acquire(&mut con, b"res", b"A", 60_000), None);
    }
    // With lease-ms: count 3 -> 2, lease reset.
    assert_eq!(
        release(&mut con, b"res", b"A", Some(5_000)),
        Some(0),
        "count still positive -> 0"
    );
    assert_eq!(
        hgetall(&mut con, b"res"),
        vec![(b"A".to_vec(), b"2".to_vec())]
    );
    assert_lease_just_set(
        &mut con,
        b"res",
        5_000,
        "release with lease-ms resets the lease to 5000",
    );

    // Without lease-ms: count 2 -> 1, the exact deadline kept.
    let deadline = pexpiretime(&mut con, b"res");
    assert_eq!(release(&mut con, b"res", b"A", None), Some(0));
    assert_eq!(
        hgetall(&mut con, b"res"),
        vec![(b"A".to_vec(), b"1".to_vec())]
    );
    assert_eq!(
        pexpiretime(&mut con, b"res"),
        deadline,
        "release without lease-ms keeps the deadline"
    );

    // Last hold: deleted.
    assert_eq!(
        release(&mut con, b"res", b"A", None),
        Some(1),
        "last hold -> 1"
    );
    assert!(!exists(&mut con, b"res"), "the key is deleted");
    assert_eq!(
        release(&mut con, b"res", b"A", None),
        None,
        "releasing again -> nil"
    );
}

#[test]
fn release_last_hold_with_lease_deletes_key() {
    let server = Server::start();
    let mut con = server.connection();
    assert_eq!(acquire(&mut con, b"res", b"A", LEASE), None);
    assert_eq!(release(&mut con, b"res", b"A", Some(LEASE)), Some(1));
    assert!(!exists(&mut con, b"res"));
}

#[test]
fn release_with_other_owners_in_hash_keeps_theirs() {
    // A foreign writer put two owners in one hash; releasing A's last hold
    // deletes the key, as Redisson's script does.
    let server = Server::start();
    let mut con = server.connection();
    let _: i64 = redis::cmd("HSET")
        .arg("res")
        .arg("A")
        .arg(2)
        .arg("B")
        .arg(1)
        .query(&mut con)
        .expect("HSET");
    assert_eq!(release(&mut con, b"res", b"A", None), Some(0));
    assert_eq!(
        hgetall(&mut con, b"res"),
        vec![
            (b"A".to_vec(), b"1".to_vec()),
            (b"B".to_vec(), b"1".to_vec())
        ]
    );
    assert_eq!(release(&mut con, b"res", b"A", None), Some(1));
    assert!(
        !exists(&mut con, b"res"),
        "Redisson semantics: the last hold of the caller deletes the key"
    );
}

// ---------------------------------------------------------------------------
// LOCK.FORCE
// ---------------------------------------------------------------------------

#[test]
fn force_deletes_any_lock_and_replies_one_or_zero() {
    let server = Server::start();
    let mut con = server.connection();

    assert_eq!(force(&mut con, b"missing"), 0, "no lock -> 0");
    assert_eq!(acquire(&mut con, b"res", b"A", LEASE), None);
    assert_eq!(acquire(&mut con, b"res", b"A", LEASE), None);
    assert_eq!(force(&mut con, b"res"), 1, "held lock -> 1");
    assert!(!exists(&mut con, b"res"));
    assert_eq!(force(&mut con, b"res"), 0, "again -> 0");
    assert_eq!(
        acquire(&mut con, b"res", b"B", LEASE),
        None,
        "free for anyone after force"
    );
}

// ---------------------------------------------------------------------------
// LOCK.INFO
// ---------------------------------------------------------------------------

#[test]
fn info_resp2_is_a_flat_array() {
    let server = Server::start();
    let mut con = server.connection();

    assert_eq!(acquire(&mut con, b"res", b"A", LEASE), None);
    assert_eq!(acquire(&mut con, b"res", b"A", LEASE), None);
    let raw: Value = redis::cmd("LOCK.INFO")
        .arg("res")
        .query(&mut con)
        .expect("LOCK.INFO");
    let Value::Array(items) = &raw else {
        panic!("RESP2 LOCK.INFO must be a flat array: {raw:?}")
    };
    assert_eq!(items.len(), 12, "6 key/value pairs: {raw:?}");
    assert!(
        matches!(&items[3], Value::Array(o) if o.len() == 2),
        "owners is a flat array in RESP2: {raw:?}"
    );
    let info = LockInfo::parse(&raw);
    let deadline = pexpiretime(&mut con, b"res");
    assert_eq!(info.state, "held");
    assert_eq!(info.owners, vec![(b"A".to_vec(), Value::Int(2))]);
    assert!(
        info.ttl_ms > LEASE - 1000 && info.ttl_ms <= LEASE,
        "{info:?}"
    );
    assert!(
        (info.deadline_ms - deadline).abs() <= 5,
        "deadline_ms {} vs PEXPIRETIME {deadline}",
        info.deadline_ms
    );
    assert!(info.waiters.is_empty(), "{info:?}");
}

#[test]
fn info_resp3_is_a_map() {
    let server = Server::start();
    let mut con = server.resp3_connection();

    assert_eq!(acquire(&mut con, b"res", b"A", LEASE), None);
    let raw: Value = redis::cmd("LOCK.INFO")
        .arg("res")
        .query(&mut con)
        .expect("LOCK.INFO");
    let Value::Map(pairs) = &raw else {
        panic!("RESP3 LOCK.INFO must be a map: {raw:?}")
    };
    assert_eq!(pairs.len(), 6, "{raw:?}");
    assert!(
        matches!(&pairs[1].1, Value::Map(o) if o.len() == 1),
        "owners is a map in RESP3: {raw:?}"
    );
    assert_eq!(pairs[5].1, Value::Nil, "no token without TOKEN: {raw:?}");
    assert!(
        matches!(&pairs[4].1, Value::Array(w) if w.is_empty()),
        "waiters is an empty array: {raw:?}"
    );
    let info = LockInfo::parse(&raw);
    let deadline = pexpiretime(&mut con, b"res");
    assert_eq!(info.state, "held");
    assert_eq!(info.owners, vec![(b"A".to_vec(), Value::Int(1))]);
    assert!(
        info.ttl_ms > LEASE - 1000 && info.ttl_ms <= LEASE,
        "{info:?}"
    );
    assert!(
        (info.deadline_ms - deadline).abs() <= 5,
        "deadline_ms {} vs PEXPIRETIME {deadline}",
        info.deadline_ms
    );

    // Free lock in RESP3.
    let raw: Value = redis::cmd("LOCK.INFO")
        .arg("nothing")
        .query(&mut con)
        .expect("LOCK.INFO free");
    assert!(matches!(&raw, Value::Map(_)), "{raw:?}");
    let info = LockInfo::parse(&raw);
    assert_eq!(
        (info.state.as_str(), info.ttl_ms, info.deadline_ms),
        ("free", -2, -1),
        "{info:?}"
    );
    assert!(
        info.owners.is_empty() && info.waiters.is_empty(),
        "{info:?}"
    );
}

#[test]
fn info_on_free_lock_and_foreign_values() {
    let server = Server::start();
    let mut con = server.connection();

    let info = lock_info(&mut con, b"nothing");
    assert_eq!(info.state, "free");
    assert!(info.owners.is_empty());
    assert_eq!(info.ttl_ms, -2, "free lock: ttl_ms -2");
    assert_eq!(info.deadline_ms, -1, "free lock: deadline_ms -1");
    assert!(info.waiters.is_empty());
    assert!(
        !exists(&mut con, b"nothing"),
        "LOCK.INFO must not create the key"
    );

    // A non-integer count written by someone else shows as raw bytes.
    let _: i64 = redis::cmd("HSET")
        .arg("odd")
        .arg("A")
        .arg("abc")
        .query(&mut con)
        .expect("HSET");
    let info = lock_info(&mut con, b"odd");
    assert_eq!(
        info.owners,
        vec![(b"A".to_vec(), Value::BulkString(b"abc".to_vec()))],
        "{info:?}"
    );
    assert_eq!(info.state, "held");
}

#[test]
fn info_after_release_and_force_shows_free() {
    let server = Server::start();
    let mut con = server.connection();
    assert_eq!(acquire(&mut con, b"res", b"A", LEASE), None);
    assert_eq!(acquire(&mut con, b"res", b"A", LEASE), None);
    assert_eq!(release(&mut con, b"res", b"A", None), Some(0));
    assert_eq!(lock_info(&mut con, b"res").count_of(b"A"), Some(1));
    assert_eq!(release(&mut con, b"res", b"A", None), Some(1));
    assert_eq!(lock_info(&mut con, b"res").state, "free");
    assert_eq!(acquire(&mut con, b"res", b"B", LEASE), None);
    assert_eq!(lock_info(&mut con, b"res").count_of(b"B"), Some(1));
    assert_eq!(force(&mut con, b"res"), 1);
    assert_eq!(lock_info(&mut con, b"res").state, "free");
}

// ---------------------------------------------------------------------------
// Unlock message
// ---------------------------------------------------------------------------

#[test]
fn unlock_message_on_last_release_and_force_only() {
    let server = Server::start();
    let mut con = server.connection();
    let channel = unlock_channel(b"MoonCake");
    assert_eq!(channel, b"redisson_lock__channel:{MoonCake}");
    let mut sub = Subscriber::new(&server, &[&channel]);

    // Acquire, re-enter, contend, renew, partial release: no message.
    assert_eq!(acquire(&mut con, b"MoonCake", b"A", LEASE), None);
    assert_eq!(acquire(&mut con, b"MoonCake", b"A", LEASE), None);
    assert!(acquire(&mut con, b"MoonCake", b"B", LEASE).is_some());
    assert_eq!(renew(&mut con, b"MoonCake", b"A", LEASE), 1);
    assert_eq!(release(&mut con, b"MoonCake", b"B", None), None);
    assert_eq!(release(&mut con, b"MoonCake", b"A", Some(LEASE)), Some(0));
    let messages = sub.drain(&mut con);
    assert!(
        messages.is_empty(),
        "no unlock message before the lock is free: {:?}",
        show(&messages)
    );

    // Last release: exactly one "0".
    assert_eq!(release(&mut con, b"MoonCake", b"A", None), Some(1));
    let messages = sub.drain(&mut con);
    assert_eq!(
        messages,
        vec![(channel.clone(), b"0".to_vec())],
        "release: {:?}",
        show(&messages)
    );

    // Force: one "0"; force of nothing: none.
    assert_eq!(acquire(&mut con, b"MoonCake", b"B", LEASE), None);
    assert_eq!(force(&mut con, b"MoonCake"), 1);
    assert_eq!(force(&mut con, b"MoonCake"), 0);
    let messages = sub.drain(&mut con);
    assert_eq!(
        messages,
        vec![(channel.clone(), b"0".to_vec())],
        "force: {:?}",
        show(&messages)
    );
}

#[test]
fn unlock_message_goes_to_the_key_own_channel_only() {
    let server = Server::start();
    let mut con = server.connection();
    let mut sub = Subscriber::new(&server, &[&unlock_channel(b"a"), &unlock_channel(b"b")]);
    assert_eq!(acquire(&mut con, b"a", b"A", LEASE), None);
    assert_eq!(release(&mut con, b"a", b"A", None), Some(1));
    let messages = sub.drain(&mut con);
    assert_eq!(
        messages,
        vec![(unlock_channel(b"a"), b"0".to_vec())],
        "{:?}",
        show(&messages)
    );
}

#[test]
fn channel_prefix_set_with_config_set() {
    let server = Server::start();
    let mut con = server.connection();
    let mine = channel_with_prefix(b"myapp", b"res");
    let default = unlock_channel(b"res");
    let mut sub = Subscriber::new(&server, &[&mine, &default]);

    config_set(&mut con, "lock.channel-prefix", "myapp");
    assert_eq!(config_get(&mut con, "lock.channel-prefix"), "myapp");

    assert_eq!(acquire(&mut con, b"res", b"A", LEASE), None);
    assert_eq!(release(&mut con, b"res", b"A", None), Some(1));
    assert_eq!(acquire(&mut con, b"res", b"A", LEASE), None);
    assert_eq!(force(&mut con, b"res"), 1);
    let messages = sub.drain(&mut con);
    assert_eq!(
        messages,
        vec![(mine.clone(), b"0".to_vec()), (mine.clone(), b"0".to_vec())],
        "both unlocks on myapp:{{res}} and none on the default channel: {:?}",
        show(&messages)
    );

    // An empty prefix is refused and the old one stays.
    let refused = redis::cmd("CONFIG")
        .arg("SET")
        .arg("lock.channel-prefix")
        .arg("")
        .query::<()>(&mut con);
    assert!(refused.is_err(), "an empty channel prefix must be refused");
    assert_eq!(
        config_get(&mut con, "lock.channel-prefix"),
        "myapp",
        "the old prefix stays after a refused CONFIG SET"
    );
}

#[test]
fn channel_prefix_set_on_the_loadmodule_line() {
    let server = Server::with(Options::new().module_args(&["channel-prefix", "myprefix"]));
    let mut con = server.connection();
    assert_eq!(config_get(&mut con, "lock.channel-prefix"), "myprefix");

    let mine = channel_with_prefix(b"myprefix", b"res");
    let mut sub = Subscriber::new(&server, &[&mine, &unlock_channel(b"res")]);
    assert_eq!(acquire(&mut con, b"res", b"A", LEASE), None);
    assert_eq!(release(&mut con, b"res", b"A", None), Some(1));
    let messages = sub.drain(&mut con);
    assert_eq!(
        messages,
        vec![(mine, b"0".to_vec())],
        "{:?}",
        show(&messages)
    );
}

#[test]
fn publish_off_publishes_nothing_and_classic_publishes() {
    let server = Server::start();
    let mut con = server.connection();
    let channel = unlock_channel(b"res");
    let mut sub = Subscriber::new(&server, &[&channel]);

    config_set(&mut con, "lock.publish", "off");
    assert_eq!(acquire(&mut con, b"res", b"A", LEASE), None);
    assert_eq!(release(&mut con, b"res", b"A", None), Some(1));
    assert_eq!(acquire(&mut con, b"res", b"A", LEASE), None);
    assert_eq!(force(&mut con, b"res"), 1);
    let messages = sub.drain(&mut con);
    assert!(
        messages.is_empty(),
        "lock.publish off must publish nothing: {:?}",
        show(&messages)
    );

    config_set(&mut con, "lock.publish", "classic");
    assert_eq!(acquire(&mut con, b"res", b"A", LEASE), None);
    assert_eq!(release(&mut con, b"res", b"A", None), Some(1));
    let messages = sub.drain(&mut con);
    assert_eq!(
        messages,
        vec![(channel, b"0".to_vec())],
        "classic publishes: {:?}",
        show(&messages)
    );

    let bad = redis::cmd("CONFIG")
        .arg("SET")
        .arg("lock.publish")
        .arg("loud")
        .query::<()>(&mut con);
    assert!(
        bad.is_err(),
        "an unknown lock.publish value must be refused"
    );
}

// ---------------------------------------------------------------------------
// Keyspace notifications
// ---------------------------------------------------------------------------

fn lock_events(messages: &[Message]) -> Vec<String> {
    messages
        .iter()
        .map(|(_, p)| String::from_utf8_lossy(p).into_owned())
        .filter(|p| p.starts_with("lock."))
        .collect()
}

#[test]
fn keyspace_notifications_for_acquire_release_force() {
    let server = Server::start();
    let mut con = server.connection();
    config_set(&mut con, "notify-keyspace-events", "KA");
    let mut sub = Subscriber::new(&server, &[b"__keyspace@0__:res"]);

    assert_eq!(acquire(&mut con, b"res", b"A", LEASE), None); // lock.acquire
    assert_eq!(acquire(&mut con, b"res", b"A", LEASE), None); // re-entry: none
    assert!(acquire(&mut con, b"res", b"B", LEASE).is_some()); // contended: none
    assert_eq!(renew(&mut con, b"res", b"A", LEASE), 1); // none
    assert_eq!(release(&mut con, b"res", b"A", None), Some(0)); // none
    assert_eq!(release(&mut con, b"res", b"A", None), Some(1)); // lock.release
    assert_eq!(acquire(&mut con, b"res", b"B", LEASE), None); // lock.acquire
    assert_eq!(force(&mut con, b"res"), 1); // lock.force
    assert_eq!(force(&mut con, b"res"), 0); // none
    let messages = sub.drain(&mut con);
    assert!(
        messages.iter().all(|(c, _)| c == b"__keyspace@0__:res"),
        "{:?}",
        show(&messages)
    );
    assert_eq!(
        lock_events(&messages),
        ["lock.acquire", "lock.release", "lock.acquire", "lock.force"],
        "all messages: {:?}",
        show(&messages)
    );

    config_set(&mut con, "lock.notify", "no");
    assert_eq!(acquire(&mut con, b"res", b"A", LEASE), None);
    assert_eq!(release(&mut con, b"res", b"A", None), Some(1));
    assert_eq!(acquire(&mut con, b"res", b"A", LEASE), None);
    assert_eq!(force(&mut con, b"res"), 1);
    let messages = sub.drain(&mut con);
    assert!(
        lock_events(&messages).is_empty(),
        "lock.notify no must silence lock.* events: {:?}",
        show(&messages)
    );
}

/// The `notify-keyspace-events` class of the `lock.*` events: hash (`h`), as
/// src/events.rs documents (a lock is a hash).
const LOCK_EVENT_CLASS: char = 'h';

#[test]
fn keyspace_notifications_in_their_class_only() {
    let server = Server::start();
    let mut con = server.connection();
    let mut sub = Subscriber::new(
        &server,
        &[b"__keyspace@0__:res", b"__keyevent@0__:lock.acquire"],
    );
    let set_classes = |con: &mut redis::Connection, classes: &str| {
        config_set(con, "notify-keyspace-events", classes);
    };

    // Off by default in Redis: nothing.
    assert_eq!(acquire(&mut con, b"res", b"A", LEASE), None);
    assert_eq!(force(&mut con, b"res"), 1);
    assert!(
        sub.drain(&mut con).is_empty(),
        "notify-keyspace-events is empty by default"
    );

    // K + the class (keyspace form) is enough.
    set_classes(&mut con, &format!("K{LOCK_EVENT_CLASS}"));
    assert_eq!(acquire(&mut con, b"res", b"A", LEASE), None);
    let messages = sub.drain(&mut con);
    assert_eq!(
        show(&messages),
        [("__keyspace@0__:res".to_string(), "lock.acquire".to_string())],
        "notify-keyspace-events K{LOCK_EVENT_CLASS}"
    );

    // E + the class: the key-event form names the key.
    set_classes(&mut con, &format!("E{LOCK_EVENT_CLASS}"));
    assert_eq!(force(&mut con, b"res"), 1);
    assert_eq!(acquire(&mut con, b"res", b"A", LEASE), None);
    let messages = sub.drain(&mut con);
    assert_eq!(
        show(&messages),
        [("__keyevent@0__:lock.acquire".to_string(), "res".to_string())]
    );

    // Every other class but this one: no lock.* events.
    let others: String = "g$lshzxetd"
        .chars()
        .filter(|c| *c != LOCK_EVENT_CLASS)
        .collect();
    set_classes(&mut con, &format!("KE{others}"));
    assert_eq!(release(&mut con, b"res", b"A", None), Some(1));
    assert_eq!(acquire(&mut con, b"res", b"A", LEASE), None);
    assert_eq!(force(&mut con, b"res"), 1);
    let messages = sub.drain(&mut con);
    assert!(
        lock_events(&messages).is_empty(),
        "lock.* events must only be in class {LOCK_EVENT_CLASS:?}: {:?}",
        show(&messages)
    );
}

#[test]
fn locks_in_another_database_are_separate_and_notify_there() {
    let server = Server::start();
    let mut db0 = server.connection();
    let mut db3 = server.connection_db(3);
    config_set(&mut db0, "notify-keyspace-events", "KA");
    let mut sub = Subscriber::new(&server, &[b"__keyspace@3__:res", b"__keyspace@0__:res"]);

    assert_eq!(acquire(&mut db3, b"res", b"A", LEASE), None);
    assert_eq!(
        acquire(&mut db0, b"res", b"B", LEASE),
        None,
        "db 0 has its own lock of the same name"
    );
    assert_eq!(
        hgetall(&mut db3, b"res"),
        vec![(b"A".to_vec(), b"1".to_vec())]
    );
    assert_eq!(
        hgetall(&mut db0, b"res"),
        vec![(b"B".to_vec(), b"1".to_vec())]
    );
    assert_eq!(
        release(&mut db3, b"res", b"B", None),
        None,
        "B holds db 0's lock, not db 3's"
    );
    assert_eq!(release(&mut db3, b"res", b"A", None), Some(1));
    assert_eq!(
        lock_info(&mut db0, b"res").count_of(b"B"),
        Some(1),
        "db 0's lock untouched"
    );
    let messages: Vec<Message> = sub
        .drain(&mut db0)
        .into_iter()
        .filter(|(_, p)| p.starts_with(b"lock."))
        .collect();
    assert_eq!(
        show(&messages),
        [
            ("__keyspace@3__:res".to_string(), "lock.acquire".to_string()),
            ("__keyspace@0__:res".to_string(), "lock.acquire".to_string()),
            ("__keyspace@3__:res".to_string(), "lock.release".to_string()),
        ]
    );
}

// ---------------------------------------------------------------------------
// lock.max-lease-ms
// ---------------------------------------------------------------------------

#[test]
fn max_lease_refuses_longer_leases() {
    let server = Server::start();
    let mut con = server.connection();
    config_set(&mut con, "lock.max-lease-ms", "1000");

    let r = redis::cmd("LOCK.ACQUIRE")
        .arg("res")
        .arg("A")
        .arg(1001)
        .query::<Value>(&mut con);
    expect_err(r, "ERR", "lock.max-lease-ms", "LOCK.ACQUIRE above max");
    assert!(!exists(&mut con, b"res"), "refused acquire created the key");

    assert_eq!(
        acquire(&mut con, b"res", b"A", 1000),
        None,
        "exactly max is fine"
    );
    let deadline = pexpiretime(&mut con, b"res");
    let r = redis::cmd("LOCK.ACQUIRE")
        .arg("res")
        .arg("A")
        .arg(5000)
        .query::<Value>(&mut con);
    expect_err(
        r,
        "ERR",
        "lock.max-lease-ms",
        "LOCK.ACQUIRE re-entry above max",
    );
    let r = redis::cmd("LOCK.RENEW")
        .arg("res")
        .arg("A")
        .arg(5000)
        .query::<Value>(&mut con);
    expect_err(r, "ERR", "lock.max-lease-ms", "LOCK.RENEW above max");
    // A release is never refused for its lease: it clamps it to the cap
    // (tests/production.rs, a_release_with_a_lease_above_the_cap_...).
    assert_eq!(
        hgetall(&mut con, b"res"),
        vec![(b"A".to_vec(), b"1".to_vec())],
        "refused commands changed the count"
    );
    assert_eq!(
        pexpiretime(&mut con, b"res"),
        deadline,
        "refused commands changed the lease"
    );

    config_set(&mut con, "lock.max-lease-ms", "0");
    assert_eq!(
        acquire(&mut con, b"res", b"A", 1_000_000_000_000),
        None,
        "0 = unlimited"
    );
    let bad = redis::cmd("CONFIG")
        .arg("SET")
        .arg("lock.max-lease-ms")
        .arg("-5")
        .query::<()>(&mut con);
    assert!(bad.is_err(), "a negative lock.max-lease-ms must be refused");
}

#[test]
fn leases_longer_than_100_years_are_refused_alike() {
    const TOO_LONG: &str = "ERR lease-ms must be at most 3155760000000 (milliseconds, 100 years)";
    let server = Server::start();
    let mut con = server.connection();
    assert_eq!(acquire(&mut con, b"held", b"A", LEASE), None);
    assert_eq!(acquire(&mut con, b"held", b"A", LEASE), None, "count 2");
    let deadline = pexpiretime(&mut con, b"held");

    // 100 years and 1 ms; 285,000 years (fits an i64 deadline); i64::MAX
    // (overflows one); 20 digits (overflows an i64).
    for lease in [
        "3155760000001",
        "9000000000000000",
        "9223372036854775807",
        "99999999999999999999",
    ] {
        for args in [
            &["LOCK.ACQUIRE", "free", "A", lease][..],
            &["LOCK.ACQUIRE", "free", "A", lease, "TOKEN"],
            &["LOCK.ACQUIRE", "held", "A", lease],
            &["LOCK.ACQUIRE", "held", "B", lease, "WAIT", "10"],
            &["LOCK.RENEW", "held", "A", lease],
            &["LOCK.RELEASE", "held", "A", lease],
        ] {
            let reply = command(args).query::<Value>(&mut con);
            match reply {
                Err(e) => assert_eq!(err_text(&e), TOO_LONG, "{args:?}"),
                Ok(v) => panic!("{args:?} was accepted: {v:?}"),
            }
        }
    }
    assert!(
        !exists(&mut con, b"free"),
        "a refused acquire created the key"
    );
    assert!(!exists(&mut con, b"redisson_lock_token:{free}"));
    assert_eq!(
        hgetall(&mut con, b"held"),
        vec![(b"A".to_vec(), b"2".to_vec())]
    );
    assert_eq!(
        pexpiretime(&mut con, b"held"),
        deadline,
        "the lease is untouched"
    );

    // Exactly 100 years is a lease like any other.
    assert_eq!(acquire(&mut con, b"free", b"A", 3_155_760_000_000), None);
    let ttl = pttl(&mut con, b"free");
    assert!(
        ttl > 3_155_759_000_000 && ttl <= 3_155_760_000_000,
        "PTTL {ttl}"
    );
}

// ---------------------------------------------------------------------------
// INFO lock_stats
// ---------------------------------------------------------------------------

#[test]
fn info_counters_move() {
    let server = Server::start();
    let mut con = server.connection();
    let before = server.lock_stats();
    for field in [
        "lock_acquired",
        "lock_reentered",
        "lock_contended",
        "lock_released",
        "lock_forced",
    ] {
        assert_eq!(
            before.get(field),
            Some(&0),
            "INFO lock_stats {field} starts at 0: {before:?}"
        );
    }

    assert_eq!(acquire(&mut con, b"res", b"A", LEASE), None); // acquired
    assert_eq!(acquire(&mut con, b"res", b"A", LEASE), None); // reentered
    assert!(acquire(&mut con, b"res", b"B", LEASE).is_some()); // contended
    assert!(acquire(&mut con, b"res", b"C", LEASE).is_some()); // contended
    assert_eq!(release(&mut con, b"res", b"A", None), Some(0)); // nothing
    assert_eq!(release(&mut con, b"res", b"B", None), None); // nothing
    assert_eq!(release(&mut con, b"res", b"A", None), Some(1)); // released
    assert_eq!(acquire(&mut con, b"res", b"B", LEASE), None); // acquired
    assert_eq!(force(&mut con, b"res"), 1); // forced
    assert_eq!(force(&mut con, b"res"), 0); // nothing
    assert_eq!(renew(&mut con, b"res", b"B", LEASE), 0); // nothing

    let after = server.lock_stats();
    let expected = [
        ("lock_acquired", 2),
        ("lock_reentered", 1),
        ("lock_contended", 2),
        ("lock_released", 1),
        ("lock_forced", 1),
    ];
    for (field, n) in expected {
        assert_eq!(
            after.get(field),
            Some(&n),
            "INFO lock_stats {field}: {after:?}"
        );
    }
    // Also reachable by the module name.
    let text: String = redis::cmd("INFO")
        .arg("lock")
        .query(&mut con)
        .expect("INFO lock");
    assert_eq!(
        info_field(&text, "lock_acquired").as_deref(),
        Some("2"),
        "INFO lock: {text}"
    );
}

// ---------------------------------------------------------------------------
// Command metadata
// ---------------------------------------------------------------------------

fn command_info(con: &mut redis::Connection, name: &str) -> (Vec<String>, i64, i64, i64) {
    let v: Value = redis::cmd("COMMAND")
        .arg("INFO")
        .arg(name)
        .query(con)
        .expect("COMMAND INFO");
    let Value::Array(outer) = &v else {
        panic!("COMMAND INFO reply {v:?}")
    };
    let Some(Value::Array(doc)) = outer.first() else {
        panic!("{name} unknown to COMMAND INFO: {v:?}")
    };
    assert_eq!(
        as_string(&doc[0])
            .map(|s| s.to_ascii_lowercase())
            .as_deref(),
        Some(name),
        "{v:?}"
    );
    let flags = match &doc[2] {
        Value::Array(f) | Value::Set(f) => f.iter().filter_map(as_string).collect(),
        other => panic!("flags {other:?}"),
    };
    let int = |v: &Value| match v {
        Value::Int(i) => *i,
        other => panic!("key position {other:?}"),
    };
    (flags, int(&doc[3]), int(&doc[4]), int(&doc[5]))
}

#[test]
fn command_info_key_positions_and_flags() {
    let server = Server::start();
    let mut con = server.connection();
    for name in [
        "lock.acquire",
        "lock.renew",
        "lock.release",
        "lock.force",
        "lock.info",
        "lock.racquire",
        "lock.wacquire",
        "lock.rrelease",
        "lock.wrelease",
        "lock.rwrenew",
        "lock.semset",
        "lock.semadd",
        "lock.semacquire",
        "lock.semrelease",
        "lock.semavailable",
        "lock.semdrain",
        "lock.permitacquire",
        "lock.permitrelease",
        "lock.permitrenew",
        "lock.seminfo",
        "lock.latchset",
        "lock.countdown",
        "lock.latchcount",
        "lock.await",
        "lock.latchinfo",
    ] {
        let (flags, first, last, step) = command_info(&mut con, name);
        assert_eq!((first, last, step), (1, 1, 1), "{name} key positions");
        match name {
            "lock.acquire" | "lock.racquire" | "lock.wacquire" | "lock.semset" | "lock.semadd"
            | "lock.semacquire" | "lock.permitacquire" | "lock.latchset" => {
                assert!(
                    flags.contains(&"write".to_string()),
                    "{name} flags {flags:?}"
                );
                assert!(
                    flags.contains(&"denyoom".to_string()),
                    "{name} flags {flags:?}"
                );
            }
            "lock.info" | "lock.semavailable" | "lock.seminfo" | "lock.latchcount"
            | "lock.await" | "lock.latchinfo" => {
                assert!(
                    flags.contains(&"readonly".to_string()),
                    "{name} flags {flags:?}"
                );
                assert!(
                    !flags.contains(&"write".to_string()),
                    "{name} flags {flags:?}"
                );
            }
            _ => {
                assert!(
                    flags.contains(&"write".to_string()),
                    "{name} flags {flags:?}"
                );
                assert!(
                    !flags.contains(&"denyoom".to_string()),
                    "{name} must work under memory pressure: {flags:?}"
                );
            }
        }
    }
    let keys: Vec<String> = redis::cmd("COMMAND")
        .arg("GETKEYS")
        .arg("LOCK.ACQUIRE")
        .arg("the-key")
        .arg("owner")
        .arg(100)
        .query(&mut con)
        .expect("COMMAND GETKEYS");
    assert_eq!(keys, ["the-key"]);
}

// ---------------------------------------------------------------------------
// MULTI/EXEC and Lua
// ---------------------------------------------------------------------------

#[test]
fn commands_work_inside_multi_exec() {
    let server = Server::start();
    let mut con = server.connection();
    let replies: Vec<Value> = redis::pipe()
        .atomic()
        .cmd("LOCK.ACQUIRE")
        .arg("res")
        .arg("A")
        .arg(LEASE)
        .cmd("LOCK.ACQUIRE")
        .arg("res")
        .arg("A")
        .arg(LEASE)
        .cmd("LOCK.ACQUIRE")
        .arg("res")
        .arg("B")
        .arg(LEASE)
        .cmd("LOCK.RENEW")
        .arg("res")
        .arg("A")
        .arg(LEASE)
        .cmd("LOCK.RELEASE")
        .arg("res")
        .arg("A")
        .cmd("HGET")
        .arg("res")
        .arg("A")
        .cmd("LOCK.RELEASE")
        .arg("res")
        .arg("A")
        .cmd("EXISTS")
        .arg("res")
        .cmd("LOCK.ACQUIRE")
        .arg("res")
        .arg("C")
        .arg(LEASE)
        .cmd("LOCK.FORCE")
        .arg("res")
        .cmd("LOCK.INFO")
        .arg("res")
        .query(&mut con)
        .expect("MULTI/EXEC");
    assert_eq!(replies[0], Value::Nil);
    assert_eq!(replies[1], Value::Nil);
    assert!(
        matches!(replies[2], Value::Int(t) if t > 0 && t <= LEASE),
        "contended in MULTI: {:?}",
        replies[2]
    );
    assert_eq!(replies[3], Value::Int(1));
    assert_eq!(replies[4], Value::Int(0));
    assert_eq!(as_string(&replies[5]).as_deref(), Some("1"));
    assert_eq!(replies[6], Value::Int(1));
    assert_eq!(replies[7], Value::Int(0));
    assert_eq!(replies[8], Value::Nil);
    assert_eq!(replies[9], Value::Int(1));
    assert_eq!(LockInfo::parse(&replies[10]).state, "free");
}

#[test]
fn commands_work_from_lua() {
    let server = Server::start();
    let mut con = server.connection();
    let script = "return redis.call(ARGV[1], KEYS[1], unpack(ARGV, 2))";
    let run = |con: &mut redis::Connection, args: &[&str]| -> redis::RedisResult<Value> {
        redis::cmd("EVAL")
            .arg(script)
            .arg(1)
            .arg("res")
            .arg(args)
            .query(con)
    };
    assert_eq!(
        run(&mut con, &["LOCK.ACQUIRE", "A", "30000"]).expect("acquire in Lua"),
        Value::Nil
    );
    assert_eq!(
        run(&mut con, &["LOCK.ACQUIRE", "A", "30000"]).expect("re-enter in Lua"),
        Value::Nil
    );
    let busy = run(&mut con, &["LOCK.ACQUIRE", "B", "30000"]).expect("contended in Lua");
    assert!(
        matches!(busy, Value::Int(t) if t > 0 && t <= LEASE),
        "{busy:?}"
    );
    assert_eq!(
        run(&mut con, &["LOCK.RENEW", "A", "30000"]).expect("renew in Lua"),
        Value::Int(1)
    );
    assert_eq!(
        run(&mut con, &["LOCK.RELEASE", "A"]).expect("release in Lua"),
        Value::Int(0)
    );
    assert_eq!(
        hgetall(&mut con, b"res"),
        vec![(b"A".to_vec(), b"1".to_vec())]
    );
    let info = LockInfo::parse(&run(&mut con, &["LOCK.INFO"]).expect("info in Lua"));
    assert_eq!(info.count_of(b"A"), Some(1));
    assert_eq!(
        run(&mut con, &["LOCK.RELEASE", "A"]).expect("release in Lua"),
        Value::Int(1)
    );
    assert!(!exists(&mut con, b"res"));
    assert_eq!(
        run(&mut con, &["LOCK.ACQUIRE", "B", "30000"]).expect("acquire in Lua"),
        Value::Nil
    );
    assert_eq!(
        run(&mut con, &["LOCK.FORCE"]).expect("force in Lua"),
        Value::Int(1)
    );
    // Errors surface through Lua too.
    let err = run(&mut con, &["LOCK.ACQUIRE", "A", "0"]);
    let text = expect_err(err, "", "lease-ms", "bad lease in Lua");
    assert!(text.contains("ERR"), "{text}");
    assert!(!exists(&mut con, b"res"));
}

// ---------------------------------------------------------------------------
// Memory pressure
// ---------------------------------------------------------------------------

#[test]
fn under_maxmemory_only_acquire_is_refused() {
    // deny-oom is on LOCK.ACQUIRE only: holders can still renew, release and
    // operators force while the server is out of memory.
    let server = Server::start();
    let mut con = server.connection();
    assert_eq!(acquire(&mut con, b"res", b"A", LEASE), None);
    assert_eq!(acquire(&mut con, b"res", b"A", LEASE), None);
    assert_eq!(acquire(&mut con, b"other", b"B", LEASE), None);
    config_set(&mut con, "maxmemory-policy", "noeviction");
    config_set(&mut con, "maxmemory", "1");

    let r = redis::cmd("LOCK.ACQUIRE")
        .arg("new")
        .arg("C")
        .arg(LEASE)
        .query::<Value>(&mut con);
    expect_err(r, "OOM", "", "LOCK.ACQUIRE of a new lock under maxmemory");
    assert!(!exists(&mut con, b"new"));
    assert_eq!(
        renew(&mut con, b"res", b"A", LEASE),
        1,
        "renew works under maxmemory"
    );
    assert_eq!(
        release(&mut con, b"res", b"A", None),
        Some(0),
        "release works under maxmemory"
    );
    assert_eq!(release(&mut con, b"res", b"A", None), Some(1));
    assert_eq!(force(&mut con, b"other"), 1, "force works under maxmemory");
    assert_eq!(
        lock_info(&mut con, b"res").state,
        "free",
        "LOCK.INFO works under maxmemory"
    );

    config_set(&mut con, "maxmemory", "0");
    assert_eq!(
        acquire(&mut con, b"new", b"C", LEASE),
        None,
        "acquire works again without the limit"
    );
}

// ---------------------------------------------------------------------------
// WATCH (optimistic transactions on lock keys)
// ---------------------------------------------------------------------------

/// WATCHes `key` on one connection, runs `args` on another, then tries an
/// EXEC: true if the transaction went through (the key was not signalled as
/// modified).
fn watch_survives(server: &Server, key: &str, args: &[&str]) -> bool {
    let mut watcher = server.connection();
    let mut other = server.connection();
    let _: () = redis::cmd("WATCH")
        .arg(key)
        .query(&mut watcher)
        .expect("WATCH");
    let _ = command(args).query::<Value>(&mut other);
    let _: () = redis::cmd("MULTI").query(&mut watcher).expect("MULTI");
    let queued: String = redis::cmd("PING")
        .query(&mut watcher)
        .expect("PING in MULTI");
    assert_eq!(queued, "QUEUED");
    match redis::cmd("EXEC")
        .query::<Value>(&mut watcher)
        .expect("EXEC")
    {
        Value::Nil => false,
        Value::Array(_) => true,
        other => panic!("EXEC reply {other:?}"),
    }
}

#[test]
fn watch_is_aborted_by_lock_changes() {
    let server = Server::start();
    assert!(
        !watch_survives(&server, "res", &["LOCK.ACQUIRE", "res", "A", "30000"]),
        "acquire of a free lock"
    );
    assert!(
        !watch_survives(&server, "res", &["LOCK.ACQUIRE", "res", "A", "30000"]),
        "re-entry"
    );
    assert!(
        !watch_survives(&server, "res", &["LOCK.RENEW", "res", "A", "30000"]),
        "renew by the holder"
    );
    assert!(
        !watch_survives(&server, "res", &["LOCK.RELEASE", "res", "A"]),
        "partial release"
    );
    assert!(
        !watch_survives(&server, "res", &["LOCK.RELEASE", "res", "A"]),
        "last release"
    );
    assert!(
        !watch_survives(&server, "res", &["LOCK.ACQUIRE", "res", "A", "30000"]),
        "acquire again"
    );
    assert!(
        !watch_survives(&server, "res", &["LOCK.FORCE", "res"]),
        "force"
    );
}

/// A command that changes nothing must not abort other clients' WATCH (the
/// module signals keys as modified only when it writes them), just as a
/// contended Redisson acquire script does not.
#[test]
fn watch_is_not_aborted_by_commands_that_change_nothing() {
    let server = Server::start();
    let mut con = server.connection();
    assert_eq!(acquire(&mut con, b"res", b"A", LEASE), None);
    set(&mut con, "str", "v");

    // Control: Redisson's own acquire script, contended, leaves a WATCHer alone.
    assert!(
        watch_survives(
            &server,
            "res",
            &["EVAL", ACQUIRE_HINCRBY, "1", "res", "30000", "B"]
        ),
        "control: a contended Redisson acquire script does not abort a WATCHer"
    );

    let no_ops: [(&str, &[&str]); 9] = [
        ("res", &["LOCK.INFO", "res"]),
        ("res", &["LOCK.ACQUIRE", "res", "B", "30000"]),
        ("res", &["LOCK.RENEW", "res", "B", "30000"]),
        ("res", &["LOCK.RELEASE", "res", "B"]),
        ("missing", &["LOCK.RENEW", "missing", "B", "30000"]),
        ("missing", &["LOCK.RELEASE", "missing", "B"]),
        ("missing", &["LOCK.FORCE", "missing"]),
        ("str", &["LOCK.FORCE", "str"]),
        ("res", &["LOCK.ACQUIRE", "res", "B", "0"]),
    ];
    let mut aborted = Vec::new();
    for (key, args) in no_ops {
        if !watch_survives(&server, key, args) {
            aborted.push(args.join(" "));
        }
    }
    assert_eq!(
        hgetall(&mut con, b"res"),
        vec![(b"A".to_vec(), b"1".to_vec())]
    );
    assert!(
        aborted.is_empty(),
        "commands that changed nothing still aborted a WATCHer's EXEC (spurious modified-key signal): {aborted:?}"
    );
}
