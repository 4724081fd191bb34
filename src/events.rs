//! Telling the world about lock changes: keyspace notifications and the
//! Redisson unlock message.
//!
//! * Keyspace notifications `lock.acquire`, `lock.release`, `lock.force` in the
//!   hash class (`h`: a lock is a hash), so `notify-keyspace-events Kh` (or
//!   `KA`) subscribers see them on `__keyspace@<db>__:<key>`; switched off by
//!   `lock.notify no`. Not the generic class: the module itself listens to
//!   generic events (to notice DEL), and Redis would build a module context
//!   for each of our own events, about 5% of an acquire.
//! * The unlock message `0` on `<lock.channel-prefix>:{<key>}` whenever a lock
//!   is left free, exactly what Redisson's waiters subscribe to. In cluster
//!   mode it is a sharded message (`SSUBSCRIBE`), since the `{<key>}` hash tag
//!   puts the channel in the key's own slot; see `lock.publish`.

use crate::config::{self, PublishMode};
use crate::ffi::context::NotifyClass;
use crate::ffi::{Ctx, RStr};
use crate::lock::Event;

/// Redisson's `LockPubSub.UNLOCK_MESSAGE`.
pub const UNLOCK_MESSAGE: &[u8] = b"0";

/// Emits the keyspace notification for `event` on `key`.
pub fn notify(ctx: Ctx, key: RStr, event: Event) {
    if config::notify() {
        ctx.notify_keyspace(NotifyClass::HASH, event.name(), key);
    }
}

/// The unlock channel of a lock key: `<prefix>:{<key>}`.
pub fn unlock_channel(prefix: &[u8], key: &[u8]) -> Vec<u8> {
    let mut channel = Vec::with_capacity(prefix.len() + key.len() + 3);
    channel.extend_from_slice(prefix);
    channel.extend_from_slice(b":{");
    channel.extend_from_slice(key);
    channel.push(b'}');
    channel
}

/// Publishes the unlock message for `key`, as `lock.publish` says.
pub fn publish_unlock(ctx: Ctx, key: RStr) {
    let sharded = match config::PUBLISH.get() {
        PublishMode::off => return,
        PublishMode::classic => false,
        PublishMode::sharded => true,
        PublishMode::auto => ctx.in_cluster(),
    };
    let channel = config::CHANNEL_PREFIX.with(|prefix| unlock_channel(prefix, key.as_bytes()));
    ctx.publish(&channel, UNLOCK_MESSAGE, sharded);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_unlock_channel_is_redissons() {
        assert_eq!(
            unlock_channel(b"redisson_lock__channel", b"MoonCake"),
            b"redisson_lock__channel:{MoonCake}"
        );
        assert_eq!(unlock_channel(b"p", b"a{b}\0"), b"p:{a{b}\0}");
    }
}
