//! The classic Redisson stock scenario: stock 90, 100 concurrent buyers, each
//! taking the `MoonCake` lock to read and decrement the stock. Exactly 90 sales,
//! never below zero, never two buyers in the critical section.

use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use rand::Rng;
use redis::{Connection, Value};
use redis_lock_test_support::redisson::{script_acquire, script_unlock, ACQUIRE_HINCRBY};
use redis_lock_test_support::*;

const PRODUCT: &str = "MoonCake";
const PRODUCT_STOCK: &str = "MoonCakeStock";
const INITIAL_STOCK: i64 = 90;
const BUYERS: usize = 100;
const GIVE_UP: Duration = Duration::from_secs(10);

/// A Redisson-like client id: a random UUID.
fn uuid_like() -> String {
    let mut rng = rand::thread_rng();
    let b: [u8; 16] = rng.gen();
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

#[derive(Default)]
struct Tally {
    sales: AtomicUsize,
    sold_out: AtomicUsize,
    gave_up: AtomicUsize,
    contended: AtomicUsize,
    in_section: AtomicUsize,
    max_in_section: AtomicUsize,
    min_stock_seen: AtomicI64,
}

/// How one buyer takes and gives back the lock.
#[derive(Clone, Copy)]
enum Side {
    Command,
    /// Redisson's own scripts (`redis_lock_test_support::redisson`).
    Script,
}

fn try_lock(con: &mut Connection, side: Side, owner: &str) -> bool {
    let reply: Value = match side {
        Side::Command => redis::cmd("LOCK.ACQUIRE")
            .arg(PRODUCT)
            .arg(owner)
            .arg(30_000)
            .query(con)
            .expect("acquire the product lock"),
        Side::Script => script_acquire(con, ACQUIRE_HINCRBY, PRODUCT.as_bytes(), owner, 30_000),
    };
    match reply {
        Value::Nil => true,
        Value::Int(ttl) => {
            assert!(
                ttl > 0 && ttl <= 30_000,
                "a busy lock's remaining lease should be in (0, 30000]: {ttl}"
            );
            false
        }
        other => panic!("unexpected acquire reply {other:?}"),
    }
}

fn unlock(con: &mut Connection, side: Side, owner: &str) {
    let reply: Value = match side {
        Side::Command => redis::cmd("LOCK.RELEASE")
            .arg(PRODUCT)
            .arg(owner)
            .query(con)
            .expect("release the product lock"),
        Side::Script => script_unlock(con, PRODUCT.as_bytes(), owner, 30_000),
    };
    assert_eq!(
        reply,
        Value::Int(1),
        "{owner} held the lock once: its release must free it"
    );
}

/// One buyer, as Redisson's `decreaseStock` example: lock, read, decrement if > 0, unlock.
fn buyer(con: &mut Connection, side: Side, owner: &str, tally: &Tally) {
    let start = Instant::now();
    let mut rng = rand::thread_rng();
    loop {
        if try_lock(con, side, owner) {
            let inside = tally.in_section.fetch_add(1, Ordering::SeqCst) + 1;
            tally.max_in_section.fetch_max(inside, Ordering::SeqCst);

            let stock: i64 = redis::cmd("GET")
                .arg(PRODUCT_STOCK)
                .query(con)
                .expect("GET stock");
            tally.min_stock_seen.fetch_min(stock, Ordering::SeqCst);
            if stock > 0 {
                // Widen the window a little so an overlap would be caught.
                std::thread::yield_now();
                set(con, PRODUCT_STOCK, stock - 1);
                tally.sales.fetch_add(1, Ordering::SeqCst);
            } else {
                tally.sold_out.fetch_add(1, Ordering::SeqCst);
            }

            tally.in_section.fetch_sub(1, Ordering::SeqCst);
            unlock(con, side, owner);
            return;
        }
        tally.contended.fetch_add(1, Ordering::Relaxed);
        if start.elapsed() > GIVE_UP {
            tally.gave_up.fetch_add(1, Ordering::SeqCst);
            return;
        }
        std::thread::sleep(Duration::from_millis(rng.gen_range(1..=5)));
    }
}

fn run_scenario(side_of: impl Fn(usize) -> Side) -> (Server, Arc<Tally>) {
    let server = Server::start();
    let mut con = server.connection();
    set(&mut con, PRODUCT_STOCK, INITIAL_STOCK);

    let tally = Arc::new(Tally {
        min_stock_seen: AtomicI64::new(i64::MAX),
        ..Tally::default()
    });
    let client_id = uuid_like();
    let barrier = Arc::new(Barrier::new(BUYERS));
    let handles: Vec<_> = (0..BUYERS)
        .map(|i| {
            let mut con = server.connection();
            let tally = Arc::clone(&tally);
            let barrier = Arc::clone(&barrier);
            let owner = format!("{client_id}:{i}");
            let side = side_of(i);
            std::thread::Builder::new()
                .name(format!("buyer-{i}"))
                .spawn(move || {
                    barrier.wait();
                    buyer(&mut con, side, &owner, &tally);
                })
                .expect("spawn a buyer thread")
        })
        .collect();
    for h in handles {
        h.join().expect("a buyer thread panicked");
    }
    (server, tally)
}

fn assert_outcome(server: &Server, tally: &Tally) {
    let mut con = server.connection();
    let stock: i64 = redis::cmd("GET")
        .arg(PRODUCT_STOCK)
        .query(&mut con)
        .expect("GET final stock");
    assert_eq!(
        tally.gave_up.load(Ordering::SeqCst),
        0,
        "some buyers never got the lock within {GIVE_UP:?}"
    );
    assert_eq!(
        tally.sales.load(Ordering::SeqCst),
        INITIAL_STOCK as usize,
        "exactly {INITIAL_STOCK} sales"
    );
    assert_eq!(
        tally.sold_out.load(Ordering::SeqCst),
        BUYERS - INITIAL_STOCK as usize,
        "the rest found it sold out"
    );
    assert_eq!(stock, 0, "final stock");
    assert!(
        tally.min_stock_seen.load(Ordering::SeqCst) >= 0,
        "stock went negative"
    );
    assert_eq!(
        tally.max_in_section.load(Ordering::SeqCst),
        1,
        "two buyers were in the critical section at once"
    );
    assert!(
        !exists(&mut con, PRODUCT.as_bytes()),
        "the lock is left free"
    );
}

#[test]
fn hundred_buyers_ninety_cakes() {
    let (server, tally) = run_scenario(|_| Side::Command);
    assert_outcome(&server, &tally);
    let stats = server.lock_stats();
    assert_eq!(
        stats.get("lock_acquired"),
        Some(&(BUYERS as u64)),
        "{stats:?}"
    );
    assert_eq!(
        stats.get("lock_released"),
        Some(&(BUYERS as u64)),
        "{stats:?}"
    );
    assert_eq!(stats.get("lock_reentered"), Some(&0), "{stats:?}");
    eprintln!(
        "contended acquires: {}",
        tally.contended.load(Ordering::Relaxed)
    );
}

#[test]
fn hundred_buyers_half_on_redisson_scripts() {
    // Even buyers use LOCK.*, odd ones Redisson's Lua: still mutually exclusive.
    let (server, tally) = run_scenario(|i| {
        if i % 2 == 0 {
            Side::Command
        } else {
            Side::Script
        }
    });
    assert_outcome(&server, &tally);
    let stats = server.lock_stats();
    assert_eq!(
        stats.get("lock_acquired"),
        Some(&((BUYERS / 2) as u64)),
        "{stats:?}"
    );
}
