//! `LOCK.INFO key`
//!
//! Who holds a lock, how often, for how long, and who waits: for people at
//! redis-cli and for dashboards. Read-only; O(owners + waiters).
//!
//! Reply: a map (RESP3) or flat key/value array (RESP2):
//! * `state`: `held` or `free`;
//! * `owners`: map of owner id -> hold count (an integer; the raw bytes if some
//!   other writer stored a non-integer);
//! * `ttl_ms`: remaining lease in ms (-1 no expiry, -2 free);
//! * `deadline_ms`: the lease's absolute unix-ms deadline (-1 none);
//! * `waiters`: array, in queue order, of maps `owner`, `waited_ms`,
//!   `timeout_ms` (0 = forever) for clients blocked in `LOCK.ACQUIRE ... WAIT`.
//!
//! Errors: wrong arity; `WRONGTYPE`.

use crate::args;
use crate::command_docs::{ArgDoc, ArgKind, CommandDoc};
use crate::ffi::{CommandResult, Ctx, RStr};
use crate::handoff;
use crate::lock::parse_hold_count;
use crate::lock_key::LockKey;

pub const NAME: &str = "lock.info";

/// `COMMAND DOCS` for this command.
pub const DOC: CommandDoc = CommandDoc {
    summary: c"Shows a lock's owners, hold counts, lease and waiters",
    complexity: c"O(N) where N is the number of owners and waiters",
    arity: 2,
    args: &[ArgDoc::new(c"key", ArgKind::Key)],
};

pub fn run(ctx: &Ctx, argv: &[RStr]) -> CommandResult {
    let [_, key] = argv else {
        return Err(args::arity_error(NAME));
    };
    let lock = LockKey::open_read(ctx, *key)?;
    let owners = lock.entries();
    let waiters = handoff::snapshot(ctx, *key);

    ctx.reply_map(5);
    ctx.reply_simple("state");
    ctx.reply_simple(if lock.exists() { "held" } else { "free" });

    ctx.reply_simple("owners");
    ctx.reply_map(owners.len());
    for (owner, count) in &owners {
        ctx.reply_bulk(owner);
        match parse_hold_count(count) {
            Ok(count) => ctx.reply_integer(count),
            Err(_) => ctx.reply_bulk(count),
        }
    }

    ctx.reply_simple("ttl_ms");
    ctx.reply_integer(lock.ttl_ms());
    ctx.reply_simple("deadline_ms");
    ctx.reply_integer(lock.deadline_ms().unwrap_or(-1));

    ctx.reply_simple("waiters");
    ctx.reply_array(waiters.len());
    for waiter in &waiters {
        ctx.reply_map(3);
        ctx.reply_simple("owner");
        ctx.reply_bulk(&waiter.owner);
        ctx.reply_simple("waited_ms");
        ctx.reply_integer(waiter.waited_ms);
        ctx.reply_simple("timeout_ms");
        ctx.reply_integer(waiter.timeout_ms);
    }
    Ok(())
}
