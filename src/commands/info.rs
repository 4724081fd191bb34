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
//!   `timeout_ms` (0 = forever) for clients blocked in `LOCK.ACQUIRE ... WAIT`;
//! * `token`: the last fencing token handed out for this lock (the value of
//!   its counter `redisson_lock_token:{key}`), nil when there is none (never
//!   acquired with `TOKEN`, the counter expired, or it is not an integer);
//! * `kept`: array, in queue order, of maps `owner`, `wants`,
//!   `kept_until_ms` (unix ms): the places kept for waiters that left by
//!   their timeout or their connection closing (`docs/waiting.md`).
//!
//! Errors: wrong arity; `WRONGTYPE`.

use crate::args::KeyOnly;
use crate::commands::arg_docs::KEY;
use crate::counter_key::{self, CounterKey};
use crate::ffi::command::{Access, Command, CommandResult, CommandSpec, KeyFlags};
use crate::ffi::key::OpenMode;
use crate::ffi::{Ctx, RStr};
use crate::lock::parse_hold_count;
use crate::lock_key::LockKey;
use crate::rwlock_key::{RwLockKey, Snapshot};
use crate::waiting;

/// `LOCK.INFO`, as registered.
pub struct LockInfo;

impl Command for LockInfo {
    /// `readonly`; key `RO access`: it shows the hash (as `HGETALL`).
    const SPEC: CommandSpec = CommandSpec {
        name: c"lock.info",
        access: Access::Read,
        key: KeyFlags::READ,
        summary: c"Shows a lock's owners, hold counts, lease and waiters",
        complexity: c"O(N) where N is the number of owners and waiters",
        arity: 2,
        args: &[KEY],
    };

    fn run(ctx: Ctx, argv: &[RStr]) -> CommandResult {
        let cmd = KeyOnly::parse(LockInfo::SPEC.name(), argv)?;
        let lock = LockKey::open_read(ctx, cmd.key)?;
        let rw = RwLockKey::of(&lock).snapshot();
        let owners: Vec<(Vec<u8>, Vec<u8>)> = lock
            .entries()
            .into_iter()
            .filter(|(field, _)| rw.is_none() || field != b"mode")
            .collect();
        let waiters = waiting::snapshot(ctx, cmd.key);
        let kept = waiting::kept_places(ctx, cmd.key);
        let token = last_token(ctx, cmd.key);

        ctx.reply_map(if rw.is_some() { 10 } else { 7 });
        ctx.reply_simple(c"state");
        ctx.reply_simple(if lock.exists() { c"held" } else { c"free" });

        ctx.reply_simple(c"owners");
        ctx.reply_map(owners.len());
        for (owner, count) in &owners {
            ctx.reply_bulk(owner);
            match parse_hold_count(count) {
                Ok(count) => ctx.reply_integer(count),
                Err(_) => ctx.reply_bulk(count),
            }
        }

        ctx.reply_simple(c"ttl_ms");
        ctx.reply_integer(lock.ttl_ms());
        ctx.reply_simple(c"deadline_ms");
        ctx.reply_integer(lock.deadline_ms().unwrap_or(-1));

        ctx.reply_simple(c"waiters");
        ctx.reply_array(waiters.len());
        for waiter in &waiters {
            ctx.reply_map(4);
            ctx.reply_simple(c"owner");
            ctx.reply_bulk(&waiter.owner);
            ctx.reply_simple(c"wants");
            ctx.reply_bulk(waiter.ask.name());
            ctx.reply_simple(c"waited_ms");
            ctx.reply_integer(waiter.waited_ms);
            ctx.reply_simple(c"timeout_ms");
            ctx.reply_integer(waiter.timeout_ms);
        }

        ctx.reply_simple(c"token");
        match token {
            Some(token) => ctx.reply_integer(token),
            None => ctx.reply_null(),
        }

        ctx.reply_simple(c"kept");
        ctx.reply_array(kept.len());
        for place in &kept {
            ctx.reply_map(3);
            ctx.reply_simple(c"owner");
            ctx.reply_bulk(&place.identity);
            ctx.reply_simple(c"wants");
            ctx.reply_bulk(place.ask.name());
            ctx.reply_simple(c"kept_until_ms");
            ctx.reply_integer(place.until_ms);
        }

        if let Some(rw) = rw {
            reply_rw(ctx, &rw);
        }
        Ok(())
    }
}

/// A read-write lock's own fields: `mode`, `readers` (owner -> the
/// deadline of each of its read holds, unix ms, -2 for a hold whose key is
/// gone), `writer` (`[owner, write holds]`, nil when none).
fn reply_rw(ctx: Ctx, rw: &Snapshot) {
    ctx.reply_simple(c"mode");
    ctx.reply_bulk(rw.mode.text());
    ctx.reply_simple(c"readers");
    ctx.reply_map(rw.readers.len());
    for reader in &rw.readers {
        ctx.reply_bulk(&reader.owner);
        ctx.reply_array(reader.deadlines.len());
        for deadline in &reader.deadlines {
            ctx.reply_integer(*deadline);
        }
    }
    ctx.reply_simple(c"writer");
    match &rw.writer {
        Some(writer) => {
            ctx.reply_array(2);
            ctx.reply_bulk(&writer.owner);
            ctx.reply_integer(writer.count);
        }
        None => ctx.reply_null(),
    }
}

/// The value of the lock's token counter, if it has a readable one.
fn last_token(ctx: Ctx, key: RStr) -> Option<i64> {
    let name = counter_key::counter_name(key).ok()?;
    let counter = CounterKey::open(ctx, name.borrow(), OpenMode::Read).ok()?;
    counter.value()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn takes_exactly_one_key() {
        let parse = |argv| KeyOnly::parse(LockInfo::SPEC.name(), argv);
        assert_eq!(parse(&["LOCK.INFO", "k"]), Ok(KeyOnly { key: "k" }));
        for args in [&["LOCK.INFO"][..], &["LOCK.INFO", "k", "x"]] {
            assert!(parse(args).unwrap_err().contains("'lock.info'"));
        }
    }
}
