//! RedLock over independent masters: a lock on a majority of them.
//!
//!     cargo run -p redis-lock-client --example redlock -- \
//!         redis://127.0.0.1:7001/ redis://127.0.0.1:7002/ redis://127.0.0.1:7003/
//!
//! Each URL is an independent server with the module (not replicas of one
//! another). Takes the lock on N/2 + 1 of them, prints its validity (lease
//! minus the time taking it took, minus clock drift), works, and releases it
//! on all. Exits non-zero if no quorum could be had within 2 s.

use std::time::Duration;

use redis_lock_client::{redis, LockClient, RedLock};

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let urls: Vec<String> = std::env::args().skip(1).collect();
    if urls.is_empty() {
        return Err("give the masters' URLs as arguments".into());
    }
    let masters = urls
        .iter()
        .map(|url| Ok(LockClient::new(redis::Client::open(url.as_str())?)?))
        .collect::<Result<Vec<_>, Box<dyn std::error::Error>>>()?;
    let lock = RedLock::new(masters, "example:redlock")?;
    println!("{} masters, quorum {}", urls.len(), lock.quorum());

    let lease = Duration::from_secs(10);
    let Some(guard) = lock.try_lock(Duration::from_secs(2), lease).await? else {
        return Err("no quorum within 2 s".into());
    };
    println!(
        "locked as {}; valid for {:?} of its {lease:?} lease",
        guard.owner(),
        guard.validity()
    );
    // Work that must finish well within guard.validity().
    tokio::time::sleep(Duration::from_millis(200)).await;
    guard.unlock().await;
    println!("released on every master");
    Ok(())
}
