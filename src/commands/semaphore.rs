//! The semaphore's commands, on Redisson `RSemaphore`'s layout: the string
//! `key` holds the available permits; every change is announced on
//! `redisson_sc:{key}` with the new count (`semaphore.rs` decides,
//! `waiting/` carries out and serves the queue).
//!
//! * `LOCK.SEMSET key permits [PX ttl-ms]`: sets the permits when `key`
//!   does not exist (`trySetPermits`). Reply: 1 set, 0 it exists.
//! * `LOCK.SEMADD key delta`: adds `delta` (may be negative; a missing key
//!   counts as 0). Reply: the new count.
//! * `LOCK.SEMACQUIRE key permits [WAIT timeout-ms] [KEEP grace-ms]
//!   [WAITER waiter-id]`: takes `permits`.
//!   Reply: 1 taken, 0 not (too few free, or clients queue). With `WAIT`
//!   the client queues (FIFO, server-side) until it is given them (1) or
//!   `timeout-ms` passes (0; 0 ms = forever). The head of the queue is
//!   served first even when it wants more than a waiter behind it: large
//!   requests are not starved. With `WAITER`, its place is kept `KEEP`
//!   (else `lock.keep-place-ms`) after it leaves, and a grant is remembered
//!   for the id: asking again is answered that grant (`docs/waiting.md`).
//! * `LOCK.SEMRELEASE key permits`: gives `permits` back; they go to the
//!   head of the queue at once. Reply: the count after (before the queue
//!   took its share).
//! * `LOCK.SEMAVAILABLE key`: the permits free now, counting leased
//!   permits whose deadline passed (read-only; 0 when missing).
//! * `LOCK.SEMDRAIN key`: takes every free permit. Reply: the count found
//!   (it becomes 0; a count below zero too, as Redisson's `drainPermits`).
//!
//! Leased permits (`commands/permit.rs`) share the value: every command
//! here but `SEMAVAILABLE` first takes back those whose deadline passed.
//!
//! Errors: wrong arity; bad `permits` / `delta` / `ttl-ms` / `WAIT`;
//! `WRONGTYPE` when `key` is not a string or `{key}:timeout` not a sorted
//! set; a value that is not an integer; an overflow. Nothing changes.
//!
//! Effects (replicated): `SET key n KEEPTTL` (`SET key n PXAT at` for
//! `SEMSET ... PX`), and for reclaimed permits `ZREM {key}:timeout id...`.

use crate::args::{self, Arg};
use crate::commands::arg_docs::{KEEP, KEY, PERMITS, PX_TTL, WAIT, WAITER};
use crate::config;
use crate::errors::{self, Refusal};
use crate::ffi::blocking::Wake;
use crate::ffi::command::{Access, ArgDoc, ArgKind, Command, CommandResult, CommandSpec, KeyFlags};
use crate::ffi::key::OpenMode;
use crate::ffi::{Ctx, RStr};
use crate::grant_policy::Ask;
use crate::semaphore::{self, Took};
use crate::semaphore_key::{SemaphoreKeys, SemaphoreNames};
use crate::waiting::semaphore::{settle, wait};
use crate::waiting::{self, carry_out, Keep};

/// `LOCK.SEMSET`, as registered.
pub struct SemSet;
/// `LOCK.SEMADD`, as registered.
pub struct SemAdd;
/// `LOCK.SEMACQUIRE`, as registered.
pub struct SemAcquire;
/// `LOCK.SEMRELEASE`, as registered.
pub struct SemRelease;
/// `LOCK.SEMAVAILABLE`, as registered.
pub struct SemAvailable;
/// `LOCK.SEMDRAIN`, as registered.
pub struct SemDrain;

/// A count of permits to take or give: a positive integer.
pub fn permits(raw: &[u8]) -> Result<i64, Refusal> {
    match args::strict_i64(raw) {
        Some(n) if n > 0 => Ok(n),
        _ => Err(errors::PERMITS_NOT_POSITIVE),
    }
}

/// The options after a command's fixed arguments: each of `names` (an
/// empty name stands for none) at most once, each followed by its value;
/// anything else is `syntax`.
pub fn options<'a, A: Arg<'a>, const N: usize>(
    rest: &[A],
    names: [&str; N],
    syntax: Refusal,
) -> Result<[Option<&'a [u8]>; N], Refusal> {
    let mut found = [None; N];
    let mut i = 0;
    while i < rest.len() {
        let word = rest[i].bytes();
        let slot = names
            .iter()
            .position(|name| !name.is_empty() && word.eq_ignore_ascii_case(name.as_bytes()))
            .ok_or_else(|| syntax.clone())?;
        let value = rest.get(i + 1).ok_or_else(|| syntax.clone())?;
        if found[slot].replace(value.bytes()).is_some() {
            return Err(syntax);
        }
        i += 2;
    }
    Ok(found)
}

/// `LOCK.SEMSET key permits [PX ttl-ms]`.
#[derive(Debug, PartialEq, Eq)]
pub struct SetArgs<A> {
    pub key: A,
    pub count: i64,
    pub ttl_ms: Option<i64>,
}

/// Parses `command key count [PX ttl-ms]` (`LOCK.SEMSET`, `LOCK.LATCHSET`),
/// `count` checked by `count`.
pub fn parse_set<'a, A: Arg<'a>>(
    command: &str,
    argv: &[A],
    count: impl Fn(&[u8]) -> Result<i64, Refusal>,
) -> Result<SetArgs<A>, Refusal> {
    let [_, key, raw, rest @ ..] = argv else {
        return Err(args::arity_error(command));
    };
    let count = count(raw.bytes())?;
    let [px] = options(rest, ["PX"], errors::SYNTAX_SET_TTL)?;
    let ttl_ms = px
        .map(|raw| args::lease_ms(raw).map_err(|_| errors::TTL_NOT_POSITIVE))
        .transpose()?;
    Ok(SetArgs {
        key: *key,
        count,
        ttl_ms,
    })
}

/// `command key n` with `n` checked by `check`.
fn parse_key_n<'a, A: Arg<'a>>(
    command: &str,
    argv: &[A],
    check: impl Fn(&[u8]) -> Result<i64, Refusal>,
) -> Result<(A, i64), Refusal> {
    match argv {
        [_, key, n] => Ok((*key, check(n.bytes())?)),
        _ => Err(args::arity_error(command)),
    }
}

/// The most permits one `LOCK.PERMITACQUIRE` takes (each is an id in the
/// reply and a member of the set).
pub const MAX_LEASED_PER_CALL: i64 = 10_000;

/// `LOCK.SEMACQUIRE key permits [WAIT timeout-ms] [KEEP grace-ms] [WAITER
/// waiter-id]`, and `LOCK.PERMITACQUIRE key permits [LEASE lease-ms] [WAIT
/// timeout-ms] [KEEP grace-ms] [WAITER waiter-id]`.
#[derive(Debug, PartialEq, Eq)]
pub struct AcquireArgs<A> {
    pub key: A,
    pub permits: i64,
    /// Leased permits only; 0: never expires.
    pub lease_ms: i64,
    pub wait_ms: Option<i64>,
    /// `KEEP grace-ms`; else `lock.keep-place-ms`.
    pub keep_ms: Option<i64>,
    /// `WAITER waiter-id`: the waiter's identity.
    pub waiter: Option<Vec<u8>>,
}

impl<A> AcquireArgs<A> {
    /// The waiter's identity and its place's grace.
    pub fn keep(&self) -> Keep<'_> {
        Keep::of(self.waiter.as_deref(), self.keep_ms)
    }
}

/// Which of the two acquires [`AcquireArgs`] parses: its name (for arity
/// errors), whether its permits are leased (`LEASE lease-ms`, at most
/// 10000 a call), and the syntax error naming its options.
pub struct AcquireForm {
    pub command: &'static str,
    pub leased: bool,
    pub syntax: Refusal,
}

impl<'a, A: Arg<'a>> AcquireArgs<A> {
    /// `LOCK.SEMACQUIRE`'s arguments.
    pub fn parse(argv: &[A]) -> Result<Self, Refusal> {
        let form = AcquireForm {
            command: SemAcquire::SPEC.name(),
            leased: false,
            syntax: errors::SYNTAX_SEM_ACQUIRE,
        };
        Self::parse_with(argv, form)
    }

    /// `key permits [options]` for either acquire, as `form` says.
    pub fn parse_with(argv: &[A], form: AcquireForm) -> Result<Self, Refusal> {
        let AcquireForm {
            command,
            leased,
            syntax,
        } = form;
        let names = ["WAIT", if leased { "LEASE" } else { "" }, "KEEP", "WAITER"];
        let [_, key, raw, rest @ ..] = argv else {
            return Err(args::arity_error(command));
        };
        let permits = permits(raw.bytes())?;
        if leased && permits > MAX_LEASED_PER_CALL {
            return Err(errors::TOO_MANY_PERMITS);
        }
        let [wait, lease, keep, waiter] = options(rest, names, syntax)?;
        let grace = |raw| args::keep_ms(raw, config::MAX_KEEP_MS);
        Ok(AcquireArgs {
            key: *key,
            permits,
            lease_ms: lease.map(args::lease_ms).transpose()?.unwrap_or(0),
            wait_ms: wait.map(args::wait_timeout_ms).transpose()?,
            keep_ms: keep.map(grace).transpose()?,
            waiter: waiter.map(args::waiter_id).transpose()?.map(<[u8]>::to_vec),
        })
    }
}

/// Opens the semaphore for a change and takes expired leased permits
/// back; returns it and whether clients queue.
pub fn open_settled<'a>(
    ctx: Ctx<'a>,
    names: &'a SemaphoreNames<'a>,
) -> Result<(SemaphoreKeys<'a>, bool), Refusal> {
    let sem = SemaphoreKeys::open(ctx, names, OpenMode::Write)?;
    let queued = settle(ctx, &sem)?;
    Ok((sem, queued))
}

/// Opens, settles, decides with `decide` and carries it out; replies the
/// decision's integer.
fn change<R: Into<i64>>(
    ctx: Ctx,
    key: RStr,
    decide: impl FnOnce(Option<i64>) -> Result<semaphore::SemDecision<R>, Refusal>,
) -> CommandResult {
    let names = SemaphoreNames::of(key);
    let (sem, _) = open_settled(ctx, &names)?;
    let decision = decide(sem.value()?)?;
    let reply = carry_out(ctx, &sem, decision);
    ctx.reply_integer(reply.into());
    Ok(())
}

impl From<Took> for i64 {
    fn from(took: Took) -> i64 {
        i64::from(took.0)
    }
}

impl Command for SemSet {
    const SPEC: CommandSpec = CommandSpec {
        name: c"lock.semset",
        access: Access::GrowFast,
        key: KeyFlags::READ_UPDATE,
        summary: c"Sets a Redisson-compatible semaphore's permits if it does not exist",
        complexity: c"O(1)",
        arity: -3,
        args: &[KEY, PERMITS, PX_TTL],
    };

    fn run(ctx: Ctx, argv: &[RStr]) -> CommandResult {
        let cmd = parse_set(SemSet::SPEC.name(), argv, non_negative)?;
        let expire_at = cmd.ttl_ms.map(|ttl| ctx.now_ms().saturating_add(ttl));
        let names = SemaphoreNames::of(cmd.key);
        let (sem, _) = open_settled(ctx, &names)?;
        let decision = semaphore::set_permits(sem.value()?, cmd.count);
        let created = decision.value.is_some();
        if created && expire_at.is_some() {
            sem.create_with_expiry(cmd.count, expire_at);
        }
        let set = carry_out(ctx, &sem, decision);
        ctx.reply_integer(i64::from(set));
        Ok(())
    }
}

/// Permits to set: a non-negative integer.
fn non_negative(raw: &[u8]) -> Result<i64, Refusal> {
    match args::strict_i64(raw) {
        Some(n) if n >= 0 => Ok(n),
        _ => Err(errors::PERMITS_NOT_NON_NEGATIVE),
    }
}

impl Command for SemAdd {
    const SPEC: CommandSpec = CommandSpec {
        name: c"lock.semadd",
        access: Access::GrowFast,
        key: KeyFlags::READ_UPDATE,
        summary: c"Adds permits to (or, negative, removes them from) a semaphore",
        complexity: c"O(N) where N is the number of waiters served",
        arity: 3,
        args: &[KEY, ArgDoc::new(c"delta", ArgKind::Integer)],
    };

    fn run(ctx: Ctx, argv: &[RStr]) -> CommandResult {
        let (key, delta) = parse_key_n(SemAdd::SPEC.name(), argv, |raw| {
            args::strict_i64(raw).ok_or(errors::DELTA_NOT_INTEGER)
        })?;
        change(ctx, key, |value| semaphore::add_permits(value, delta))
    }
}

impl Command for SemAcquire {
    const SPEC: CommandSpec = CommandSpec {
        name: c"lock.semacquire",
        access: Access::GrowFast,
        key: KeyFlags::READ_UPDATE,
        summary: c"Takes permits of a fair, Redisson-compatible semaphore, optionally waiting",
        complexity: c"O(1)",
        arity: -3,
        args: &[KEY, PERMITS, WAIT, KEEP, WAITER],
    };

    fn run(ctx: Ctx, argv: &[RStr]) -> CommandResult {
        let cmd = AcquireArgs::parse(argv)?;
        if let Some(wait_ms) = cmd.wait_ms {
            args::wait_fits(ctx.now_ms(), wait_ms)?;
        }
        let names = SemaphoreNames::of(cmd.key);
        let (sem, queued) = open_settled(ctx, &names)?;
        let key = cmd.key.as_bytes();
        let ask = Ask::Permits {
            n: cmd.permits,
            leased: false,
        };
        // A waiter id already granted (a piece that crossed its grant):
        // that grant again, and nothing more.
        if waiting::answer_remembered(ctx, key, cmd.waiter.as_deref(), ask) {
            return Ok(());
        }
        let decision = semaphore::acquire(sem.value()?, cmd.permits, queued);
        match (carry_out(ctx, &sem, decision), cmd.wait_ms) {
            (Took(true), _) => {
                ctx.reply_integer(1);
                waiting::remember_grant(ctx, key, cmd.keep(), ask, &Wake::Integer(1));
            }
            (Took(false), Some(timeout_ms)) if ctx.can_block() => {
                wait(ctx, &sem, ask, 0, timeout_ms, cmd.keep());
            }
            (Took(false), _) => ctx.reply_integer(0),
        }
        Ok(())
    }
}

impl Command for SemRelease {
    const SPEC: CommandSpec = CommandSpec {
        name: c"lock.semrelease",
        access: Access::WriteFast,
        key: KeyFlags::READ_UPDATE,
        summary: c"Gives permits back to a semaphore; the first waiters are served at once",
        complexity: c"O(N) where N is the number of waiters served",
        arity: 3,
        args: &[KEY, PERMITS],
    };

    fn run(ctx: Ctx, argv: &[RStr]) -> CommandResult {
        let (key, n) = parse_key_n(SemRelease::SPEC.name(), argv, permits)?;
        change(ctx, key, |value| semaphore::release(value, n))
    }
}

impl Command for SemAvailable {
    const SPEC: CommandSpec = CommandSpec {
        name: c"lock.semavailable",
        access: Access::ReadFast,
        key: KeyFlags::READ,
        summary: c"Answers how many permits of a semaphore are free",
        complexity: c"O(log N) where N is the number of leased permits",
        arity: 2,
        args: &[KEY],
    };

    fn run(ctx: Ctx, argv: &[RStr]) -> CommandResult {
        let cmd = args::KeyOnly::parse(SemAvailable::SPEC.name(), argv)?;
        let names = SemaphoreNames::of(cmd.key);
        let sem = SemaphoreKeys::open(ctx, &names, OpenMode::Read)?;
        ctx.reply_integer(available(ctx, &sem)?);
        Ok(())
    }
}

/// The permits free now: the value, and leased permits whose deadline
/// passed (taken back at the next change).
pub fn available(ctx: Ctx, sem: &SemaphoreKeys) -> Result<i64, Refusal> {
    let expired = i64::try_from(sem.expired(ctx.now_ms()).len()).unwrap_or(0);
    Ok(sem.value()?.unwrap_or(0).saturating_add(expired))
}

impl Command for SemDrain {
    const SPEC: CommandSpec = CommandSpec {
        name: c"lock.semdrain",
        access: Access::WriteFast,
        key: KeyFlags::READ_UPDATE,
        summary: c"Takes every free permit of a semaphore",
        complexity: c"O(1)",
        arity: 2,
        args: &[KEY],
    };

    fn run(ctx: Ctx, argv: &[RStr]) -> CommandResult {
        let cmd = args::KeyOnly::parse(SemDrain::SPEC.name(), argv)?;
        change(ctx, cmd.key, |value| Ok(semaphore::drain(value)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::testing::{argv, assert_refused};

    #[test]
    fn acquire_takes_permits_and_an_optional_wait() {
        let cmd = AcquireArgs::parse(&argv(&["LOCK.SEMACQUIRE", "s", "2", "wait", "50"])).unwrap();
        assert_eq!((cmd.permits, cmd.wait_ms), (2, Some(50)));
        assert_eq!((cmd.keep_ms, cmd.waiter.as_deref()), (None, None));
        let args = ["LOCK.SEMACQUIRE", "s", "1", "WAITER", "w", "KEEP", "0"];
        let cmd = AcquireArgs::parse(&argv(&args)).unwrap();
        assert_eq!(
            (cmd.keep_ms, cmd.waiter.as_deref()),
            (Some(0), Some(&b"w"[..]))
        );
        assert_refused(
            AcquireArgs::parse,
            &[
                (&["LOCK.SEMACQUIRE", "s"], "'lock.semacquire'"),
                (&["LOCK.SEMACQUIRE", "s", "0"], "permits"),
                (&["LOCK.SEMACQUIRE", "s", "-1"], "permits"),
                (&["LOCK.SEMACQUIRE", "s", "1", "WAIT"], "syntax"),
                (
                    &["LOCK.SEMACQUIRE", "s", "1", "WAIT", "1", "WAIT", "1"],
                    "syntax",
                ),
                (&["LOCK.SEMACQUIRE", "s", "1", "LEASE", "1"], "syntax"),
                (&["LOCK.SEMACQUIRE", "s", "1", "WAIT", "-1"], "WAIT"),
                (
                    &["LOCK.SEMACQUIRE", "s", "1", "KEEP", "-1"],
                    "KEEP grace-ms",
                ),
                (
                    &["LOCK.SEMACQUIRE", "s", "1", "WAITER", ""],
                    "WAITER waiter-id",
                ),
                (&["LOCK.SEMACQUIRE", "s", "1", "WAITER"], "syntax"),
            ],
        );
    }

    #[test]
    fn set_takes_a_count_and_an_optional_ttl() {
        let parse = |a: &[&'static [u8]]| parse_set("lock.semset", a, non_negative);
        let cmd = parse(&argv(&["LOCK.SEMSET", "s", "0", "PX", "100"])).unwrap();
        assert_eq!((cmd.count, cmd.ttl_ms), (0, Some(100)));
        assert_refused(
            parse,
            &[
                (&["LOCK.SEMSET", "s"], "'lock.semset'"),
                (&["LOCK.SEMSET", "s", "-1"], "permits"),
                (&["LOCK.SEMSET", "s", "1", "PX", "0"], "PX ttl-ms"),
                (&["LOCK.SEMSET", "s", "1", "EX", "5"], "syntax"),
            ],
        );
    }
}
