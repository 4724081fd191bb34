//! Telling the world about lock changes: keyspace notifications and the
//! Redisson unlock message.
//!
//! * Keyspace notifications `lock.acquire`, `lock.release`, `lock.force` in the
//!   hash class (`h`: a lock is a hash), so `notify-keyspace-events Kh` (or
//!   `KA`) subscribers see them on `__keyspace@<db>__:<key>`; switched off by
//!   `lock.notify no`. Not the generic class: the module itself listens to
//!   generic events (to notice DEL), and Redis would build a module context
//!   for each of our own events, about 5% of an acquire.
//! * The unlock message `0` on `<lock.channel-prefix>:{<key>}` (or
//!   `<lock.channel-prefix>:<key>` when the key already has a `{`, Redisson's
//!   `prefixName`) whenever a lock is left free, exactly what Redisson's
//!   waiters subscribe to. In cluster mode it is a sharded message
//!   (`SSUBSCRIBE`), since the hash tag puts the channel in the key's own
//!   slot; see `lock.publish`.

use crate::config::{self, PublishMode};
use crate::decision::Event;
use crate::ffi::context::NotifyClass;
use crate::ffi::{Ctx, RStr};

/// Redisson's `LockPubSub.UNLOCK_MESSAGE`.
pub const UNLOCK_MESSAGE: &[u8] = b"0";

/// Emits the keyspace notification for `event` on `key`.
pub fn notify(ctx: Ctx, key: RStr, event: Event) {
    if config::notify() {
        ctx.notify_keyspace(NotifyClass::HASH, event.name(), key);
    }
}

/// Whether to publish sharded (`lock.publish`); `None`: not at all.
fn sharded(ctx: Ctx) -> Option<bool> {
    match config::PUBLISH.get() {
        PublishMode::off => None,
        PublishMode::classic => Some(false),
        PublishMode::sharded => Some(true),
        PublishMode::auto => Some(ctx.in_cluster()),
    }
}

/// Publishes the unlock message for `key`, as `lock.publish` says.
pub fn publish_unlock(ctx: Ctx, key: RStr) {
    let Some(sharded) = sharded(ctx) else {
        return;
    };
    // Redisson's `RedissonLock.getChannelName`: `prefixName(prefix, name)`.
    let channel = config::CHANNEL_PREFIX.with(|prefix| prefixed(prefix, key.as_bytes()));
    ctx.publish(&channel, UNLOCK_MESSAGE, sharded);
}

/// Redisson's `prefixName(prefix, name)`: `prefix:{name}`, or `prefix:name`
/// when the name already has a `{` (its own hash tag then decides the slot).
pub fn prefixed(prefix: &[u8], key: &[u8]) -> Vec<u8> {
    let braces = !key.contains(&b'{');
    let mut channel = Vec::with_capacity(prefix.len() + key.len() + 3);
    channel.extend_from_slice(prefix);
    channel.push(b':');
    if braces {
        channel.push(b'{');
    }
    channel.extend_from_slice(key);
    if braces {
        channel.push(b'}');
    }
    channel
}

/// Publishes a read-write lock's unlock message on `redisson_rwlock:{key}`:
/// `0` after a read unlock, `1` after a write unlock (Redisson's
/// `UNLOCK_MESSAGE` and `READ_UNLOCK_MESSAGE`), as `lock.publish` says.
pub fn publish_rw_unlock(ctx: Ctx, key: RStr, after_write: bool) {
    let Some(sharded) = sharded(ctx) else {
        return;
    };
    let message: &[u8] = if after_write { b"1" } else { UNLOCK_MESSAGE };
    ctx.publish(
        &prefixed(b"redisson_rwlock", key.as_bytes()),
        message,
        sharded,
    );
}

/// Publishes a semaphore's available permits on `redisson_sc:{key}`
/// (Redisson's `RSemaphore` and `RPermitExpirableSemaphore` channel).
pub fn publish_permits(ctx: Ctx, key: RStr, available: i64) {
    let Some(sharded) = sharded(ctx) else {
        return;
    };
    ctx.publish(
        &prefixed(b"redisson_sc", key.as_bytes()),
        available.to_string().as_bytes(),
        sharded,
    );
}

/// Publishes a latch's message on `redisson_countdownlatch__channel__{key}`:
/// `1` for a new count, `0` when it opened (Redisson's `RCountDownLatch`,
/// which always adds the braces, whatever the name holds).
pub fn publish_latch(ctx: Ctx, key: RStr, message: &[u8]) {
    let Some(sharded) = sharded(ctx) else {
        return;
    };
    let mut channel = b"redisson_countdownlatch__channel__{".to_vec();
    channel.extend_from_slice(key.as_bytes());
    channel.push(b'}');
    ctx.publish(&channel, message, sharded);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_unlock_channel_follows_redissons_prefix_rule() {
        assert_eq!(
            prefixed(b"redisson_lock__channel", b"MoonCake"),
            b"redisson_lock__channel:{MoonCake}"
        );
        // A name with a `{` keeps its own hash tag: no braces added
        // (`RedissonLock.getChannelName` is `prefixName`).
        assert_eq!(
            prefixed(b"redisson_lock__channel", b"{orders}:42"),
            b"redisson_lock__channel:{orders}:42"
        );
        assert_eq!(prefixed(b"p", b"a{b}\0"), b"p:a{b}\0");
        assert_eq!(prefixed(b"p", b"a}b\0"), b"p:{a}b\0}");
    }

    #[test]
    fn read_write_names_follow_redissons_prefix_rule() {
        assert_eq!(
            prefixed(b"redisson_rwlock", b"doc"),
            b"redisson_rwlock:{doc}"
        );
        assert_eq!(
            prefixed(b"redisson_rwlock", b"a{t}b"),
            b"redisson_rwlock:a{t}b"
        );
    }
}
