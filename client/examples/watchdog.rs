//! The watchdog at work, and the lost-lock signal.
//!
//! Takes a lock with a 1 s watchdog lease, works for 3.5 s (the watchdog
//! renews it every 333 ms, so it never expires), then an "operator" forces
//! it with `LOCK.FORCE` and the holder is told within a third of the lease.
//!
//!     cargo run -p redis-lock-client --example watchdog -- redis://127.0.0.1:6379/
//!
//! Needs a server with the module (`make run`). Exits non-zero if the lock
//! was lost while working or the force went unnoticed.

use std::time::{Duration, Instant};

use redis_lock_client::{redis, LockClient, Options};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "redis://127.0.0.1:6379/".to_string());
    let lease = Duration::from_secs(1);
    let locks = LockClient::with_options(
        redis::Client::open(url.as_str())?,
        Options::default().watchdog_lease(lease),
    )?;

    let guard = locks.lock("example:watchdog").await?;
    println!("locked {} as {}", guard.name(), guard.owner());
    let started = Instant::now();
    let work = async {
        for second in 1..=3 {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let left = locks.remaining_lease("example:watchdog").await?;
            println!(
                "worked {second} s; lease left {left:?} (renewed every {:?})",
                lease / 3
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        Ok::<(), redis_lock_client::LockError>(())
    };
    tokio::select! {
        done = work => done?,
        why = guard.lost() => return Err(format!("lost while working: {why}").into()),
    }
    println!(
        "still held after {:.1?}, 3.5x its lease: the watchdog kept it",
        started.elapsed()
    );

    // An operator forces the lock; the holder hears of it at the next renewal.
    let forced_at = Instant::now();
    locks.force_unlock("example:watchdog").await?;
    match tokio::time::timeout(lease, guard.lost()).await {
        Ok(why) => println!("told after {:.0?}: {why}", forced_at.elapsed()),
        Err(_) => return Err("the forced unlock was not signalled within the lease".into()),
    }
    Ok(())
}
