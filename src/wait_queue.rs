//! Clients waiting for locks (`LOCK.ACQUIRE ... WAIT`): placeholder until
//! server-side waiting lands; a freed lock is simply announced.

use crate::events;
use crate::ffi::{Ctx, RStr};

/// One waiter as `LOCK.INFO` shows it.
pub struct WaiterInfo {
    pub owner: Vec<u8>,
    pub waited_ms: i64,
    pub timeout_ms: i64,
}

/// The waiters of `key`, in queue order.
pub fn snapshot(_ctx: &Ctx, _key: RStr) -> Vec<WaiterInfo> {
    Vec::new()
}

/// A lock was left free: publish the unlock message.
pub fn lock_freed(ctx: &Ctx, key: RStr) {
    events::publish_unlock(ctx, key);
}
