//! The lock's commands, reply by reply: every reply in the contracts of
//! `LOCK.ACQUIRE`, `LOCK.RENEW`, `LOCK.RELEASE`, `LOCK.FORCE` and `LOCK.INFO`
//! (`src/commands/`), what each writes to the lock's hash, and its lease.
//! What the lock announces is in `lock_events.rs`; the lock inside the
//! server (limits, counters, metadata, transactions) in `lock_server.rs`.

use std::time::{Duration, Instant};

use redis::Value;
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
    assert_eq!(items.len(), 14, "7 key/value pairs: {raw:?}");
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
    assert_eq!(pairs.len(), 7, "{raw:?}");
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
