//! What the lock tells the world: Redisson's unlock message (when, on which
//! channel, with which prefix, in which publish mode) and keyspace
//! notifications (which events, in which class, in which database).

use redis_lock_test_support::*;

const LEASE: i64 = 30_000;

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
