//! Reply shapes shared by a command and the waiting that finishes it: a
//! `LOCK.ACQUIRE ... WAIT` is answered by the command itself or, later, by
//! the wait queue (`waiting/`), in the same shapes.

use crate::ffi::Ctx;

/// `[first, second]`: Redisson `RFencedLock`'s reply shape.
pub fn pair(ctx: Ctx, first: i64, second: i64) {
    ctx.reply_array(2);
    ctx.reply_integer(first);
    ctx.reply_integer(second);
}

/// Granted: nil, or with `TOKEN` the pair `[-1, token]`.
pub fn granted(ctx: Ctx, token: Option<i64>) {
    match token {
        Some(token) => pair(ctx, -1, token),
        None => ctx.reply_null(),
    }
}

/// The lock is someone else's, for `ttl_ms` more: the integer, or with
/// `TOKEN` the pair `[ttl_ms, -1]`.
pub fn busy(ctx: Ctx, ttl_ms: i64, token: bool) {
    if token {
        pair(ctx, ttl_ms, -1);
    } else {
        ctx.reply_integer(ttl_ms);
    }
}
