//! The count-down latch's commands, on Redisson `RCountDownLatch`'s layout:
//! the string `key` holds the count and is deleted at zero; messages on
//! `redisson_countdownlatch__channel__{key}` (`1` a new count, `0` open).
//! `latch.rs` decides, `waiting/latch.rs` carries out and answers waiters.
//!
//! * `LOCK.LATCHSET key count [PX ttl-ms]`: sets the count when `key` does
//!   not exist (`trySetCount`). Reply: 1 set, 0 it exists. With `PX` the
//!   latch expires: when the time passes it is deleted, `0` is published
//!   and every waiter is answered -1.
//! * `LOCK.COUNTDOWN key`: one less. Reply: the count left; at 0 the latch
//!   is deleted, `0` published and every waiter answered 1.
//! * `LOCK.LATCHCOUNT key`: the count (0 when missing). Read-only.
//! * `LOCK.AWAIT key timeout-ms [KEEP grace-ms] [WAITER waiter-id]`: waits
//!   server-side until the count is zero. Reply: 1 open (at once when the
//!   latch is missing or at zero), 0 `timeout-ms` passed (0 ms = forever),
//!   -1 the latch expired first. Where a client cannot block (MULTI, Lua)
//!   it answers at once: 1 or 0. With `WAITER`, its place is kept `KEEP`
//!   (else `lock.keep-place-ms`) after it leaves, and what ended its wait
//!   is remembered for the id: asking again is answered that
//!   (`docs/waiting.md`).
//! * `LOCK.LATCHINFO key`: a map: `count`, `ttl_ms`, `waiters` (array of
//!   maps `waited_ms`, `timeout_ms`), `kept` (the kept places: maps
//!   `waiter`, `kept_until_ms`).
//!
//! Errors: wrong arity; bad `count`, `ttl-ms`, `timeout-ms`; `WRONGTYPE`
//! when `key` is not a string; a count that is not an integer. Nothing
//! changes.
//!
//! Effects (replicated): `SET key n PXAT at` / `SET key n` (`LATCHSET`),
//! `SET key n KEEPTTL` (`COUNTDOWN`), `DEL key` (at zero).

use crate::args::{self, Arg};
use crate::commands::arg_docs::{KEEP, KEY, PX_TTL, WAITER};
use crate::commands::semaphore::{options, parse_set};
use crate::config;
use crate::errors::{self, Refusal};
use crate::ffi::command::{Access, ArgDoc, ArgKind, Command, CommandResult, CommandSpec, KeyFlags};
use crate::ffi::key::OpenMode;
use crate::ffi::{Ctx, RStr};
use crate::grant_policy::Ask;
use crate::latch;
use crate::value_key::ValueKey;
use crate::waiting::latch::{settle, wait, Latch};
use crate::waiting::{self, carry_out, Keep};

/// `LOCK.LATCHSET`, as registered.
pub struct LatchSet;
/// `LOCK.COUNTDOWN`, as registered.
pub struct CountDown;
/// `LOCK.LATCHCOUNT`, as registered.
pub struct LatchCount;
/// `LOCK.AWAIT`, as registered.
pub struct Await;
/// `LOCK.LATCHINFO`, as registered.
pub struct LatchInfo;

/// A latch's count to set: a positive integer.
fn count(raw: &[u8]) -> Result<i64, Refusal> {
    match args::strict_i64(raw) {
        Some(n) if n > 0 => Ok(n),
        _ => Err(errors::COUNT_NOT_POSITIVE),
    }
}

/// A parsed `LOCK.AWAIT key timeout-ms [KEEP grace-ms] [WAITER waiter-id]`.
#[derive(Debug)]
pub struct AwaitArgs<'a, A> {
    pub key: A,
    pub timeout_ms: i64,
    pub keep_ms: Option<i64>,
    pub waiter: Option<&'a [u8]>,
}

/// `LOCK.AWAIT key timeout-ms [KEEP grace-ms] [WAITER waiter-id]`.
pub fn parse_await<'a, A: Arg<'a>>(argv: &[A]) -> Result<AwaitArgs<'a, A>, Refusal> {
    let [_, key, timeout, rest @ ..] = argv else {
        return Err(args::arity_error(Await::SPEC.name()));
    };
    let timeout_ms = match args::strict_i64(timeout.bytes()) {
        Some(ms) if ms >= 0 => ms,
        _ => return Err(errors::AWAIT_TIMEOUT_INVALID),
    };
    let [keep, waiter] = options(rest, ["KEEP", "WAITER"], errors::SYNTAX_AWAIT)?;
    let grace = |raw| args::keep_ms(raw, config::MAX_KEEP_MS);
    Ok(AwaitArgs {
        key: *key,
        timeout_ms,
        keep_ms: keep.map(grace).transpose()?,
        waiter: waiter.map(args::waiter_id).transpose()?,
    })
}

/// Opens the latch for a change, first carrying out an expiry or delete
/// that happened behind the module's back.
fn open_settled<'a>(ctx: Ctx<'a>, key: RStr<'a>, mode: OpenMode) -> Result<ValueKey<'a>, Refusal> {
    let latch = ValueKey::open(ctx, key, mode)?;
    settle(ctx, &latch)?;
    Ok(latch)
}

impl Command for LatchSet {
    const SPEC: CommandSpec = CommandSpec {
        name: c"lock.latchset",
        access: Access::GrowFast,
        key: KeyFlags::READ_UPDATE,
        summary: c"Sets a Redisson-compatible count-down latch's count if it does not exist, optionally with an expiry",
        complexity: c"O(1)",
        arity: -3,
        args: &[
            KEY,
            ArgDoc::new(c"count", ArgKind::Integer),
            PX_TTL,
        ],
    };

    fn run(ctx: Ctx, argv: &[RStr]) -> CommandResult {
        let cmd = parse_set(LatchSet::SPEC.name(), argv, count)?;
        let expire_at = cmd.ttl_ms.map(|ttl| ctx.now_ms().saturating_add(ttl));
        let latch = open_settled(ctx, cmd.key, OpenMode::Write)?;
        let current = latch.get(latch::parse_count)?;
        let decision = latch::set_count(current, cmd.count, expire_at);
        let set = carry_out(ctx, &Latch::of(&latch), decision);
        ctx.reply_integer(i64::from(set));
        Ok(())
    }
}

impl Command for CountDown {
    const SPEC: CommandSpec = CommandSpec {
        name: c"lock.countdown",
        access: Access::WriteFast,
        key: KeyFlags::READ_UPDATE,
        summary: c"Counts a latch down; at zero every waiter is let go",
        complexity: c"O(N) where N is the number of waiters let go",
        arity: 2,
        args: &[KEY],
    };

    fn run(ctx: Ctx, argv: &[RStr]) -> CommandResult {
        let cmd = args::KeyOnly::parse(CountDown::SPEC.name(), argv)?;
        let latch = open_settled(ctx, cmd.key, OpenMode::Write)?;
        let decision = latch::count_down(latch.get(latch::parse_count)?);
        let left = carry_out(ctx, &Latch::of(&latch), decision);
        ctx.reply_integer(left);
        Ok(())
    }
}

impl Command for LatchCount {
    const SPEC: CommandSpec = CommandSpec {
        name: c"lock.latchcount",
        access: Access::ReadFast,
        key: KeyFlags::READ,
        summary: c"Answers a latch's count",
        complexity: c"O(1)",
        arity: 2,
        args: &[KEY],
    };

    fn run(ctx: Ctx, argv: &[RStr]) -> CommandResult {
        let cmd = args::KeyOnly::parse(LatchCount::SPEC.name(), argv)?;
        let latch = ValueKey::open(ctx, cmd.key, OpenMode::Read)?;
        ctx.reply_integer(latch.get(latch::parse_count)?.unwrap_or(0).max(0));
        Ok(())
    }
}

impl Command for Await {
    const SPEC: CommandSpec = CommandSpec {
        name: c"lock.await",
        access: Access::Read,
        key: KeyFlags::READ,
        summary: c"Waits server-side until a latch reaches zero, times out, or expires",
        complexity: c"O(1)",
        arity: -3,
        args: &[
            KEY,
            ArgDoc::new(c"timeout-ms", ArgKind::Integer),
            KEEP,
            WAITER,
        ],
    };

    fn run(ctx: Ctx, argv: &[RStr]) -> CommandResult {
        let cmd = parse_await(argv)?;
        args::wait_fits(ctx.now_ms(), cmd.timeout_ms)?;
        let latch = open_settled(ctx, cmd.key, OpenMode::Read)?;
        // A waiter id whose wait ended (opened, expired) hears that again.
        if waiting::answer_remembered(ctx, cmd.key.as_bytes(), cmd.waiter, Ask::Latch) {
            return Ok(());
        }
        if latch::is_open(latch.get(latch::parse_count)?) {
            ctx.reply_integer(1);
        } else if ctx.can_block() {
            let keep = Keep::of(cmd.waiter, cmd.keep_ms);
            wait(ctx, &latch, cmd.timeout_ms, keep);
        } else {
            ctx.reply_integer(0);
        }
        Ok(())
    }
}

impl Command for LatchInfo {
    const SPEC: CommandSpec = CommandSpec {
        name: c"lock.latchinfo",
        access: Access::Read,
        key: KeyFlags::READ,
        summary: c"Shows a latch's count, expiry and waiters",
        complexity: c"O(N) where N is the number of waiters",
        arity: 2,
        args: &[KEY],
    };

    fn run(ctx: Ctx, argv: &[RStr]) -> CommandResult {
        let cmd = args::KeyOnly::parse(LatchInfo::SPEC.name(), argv)?;
        let latch = ValueKey::open(ctx, cmd.key, OpenMode::Read)?;
        let count = latch.get(latch::parse_count)?.unwrap_or(0).max(0);
        let waiters = waiting::snapshot(ctx, cmd.key);
        let kept = waiting::kept_places(ctx, cmd.key);
        ctx.reply_map(4);
        ctx.reply_simple(c"count");
        ctx.reply_integer(count);
        ctx.reply_simple(c"ttl_ms");
        ctx.reply_integer(latch.ttl_ms());
        ctx.reply_simple(c"waiters");
        ctx.reply_array(waiters.len());
        for waiter in &waiters {
            ctx.reply_map(2);
            ctx.reply_simple(c"waited_ms");
            ctx.reply_integer(waiter.waited_ms);
            ctx.reply_simple(c"timeout_ms");
            ctx.reply_integer(waiter.timeout_ms);
        }
        ctx.reply_simple(c"kept");
        ctx.reply_array(kept.len());
        for place in &kept {
            ctx.reply_map(2);
            ctx.reply_simple(c"waiter");
            ctx.reply_bulk(&place.identity);
            ctx.reply_simple(c"kept_until_ms");
            ctx.reply_integer(place.until_ms);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::testing::{argv, assert_refused};

    #[test]
    fn await_takes_a_timeout_and_set_a_positive_count() {
        let cmd = parse_await(&argv(&["LOCK.AWAIT", "l", "0"])).unwrap();
        assert_eq!(
            (cmd.timeout_ms, cmd.keep_ms, cmd.waiter),
            (0, None, None),
            "forever"
        );
        let args = ["LOCK.AWAIT", "l", "5", "waiter", "w", "KEEP", "10"];
        let cmd = parse_await(&argv(&args)).unwrap();
        assert_eq!((cmd.keep_ms, cmd.waiter), (Some(10), Some(&b"w"[..])));
        assert_refused(
            parse_await,
            &[
                (&["LOCK.AWAIT", "l"], "'lock.await'"),
                (&["LOCK.AWAIT", "l", "-1"], "timeout-ms"),
                (&["LOCK.AWAIT", "l", "1", "KEEP"], "syntax"),
                (&["LOCK.AWAIT", "l", "1", "KEEP", "x"], "KEEP grace-ms"),
                (&["LOCK.AWAIT", "l", "1", "WAITER", ""], "WAITER waiter-id"),
                (&["LOCK.AWAIT", "l", "1", "PX", "1"], "syntax"),
            ],
        );
        assert_refused(
            |a| parse_set("lock.latchset", a, count),
            &[
                (&["LOCK.LATCHSET", "l", "0"], "count"),
                (&["LOCK.LATCHSET", "l", "1", "PX", "x"], "PX ttl-ms"),
            ],
        );
    }
}
