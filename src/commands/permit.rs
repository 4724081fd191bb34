//! Permits with a lease, on Redisson `RPermitExpirableSemaphore`'s layout:
//! the string `key` holds the free permits, the sorted set `{key}:timeout`
//! one member per permit taken (its id's 16 raw bytes) scored by its
//! deadline on **the server's clock**. A permit whose deadline passes is
//! taken back by the queue's timer at that moment and handed to the head
//! of the queue (`waiting/semaphore.rs`): a holder that dies loses its
//! permits after its lease, and the set holds only live permits.
//!
//! * `LOCK.PERMITACQUIRE key permits [LEASE lease-ms] [WAIT timeout-ms]
//!   [KEEP grace-ms] [WAITER waiter-id]`:
//!   takes `permits` (at most 10000), each with a new id. Reply: the array
//!   of ids (32 hex characters each), or nil when not taken (too few free,
//!   clients queue, or `WAIT` timed out; FIFO as `LOCK.SEMACQUIRE`, with
//!   its `KEEP` and `WAITER`: a waiter id granted asks again for the same
//!   ids).
//!   Without `LEASE` the permits never expire (Redisson's score for that).
//! * `LOCK.PERMITRELEASE key id [id ...]`: gives the permits back; they go
//!   to the head of the queue at once. Reply: how many. An id that is not
//!   a live permit (unknown, released or expired) is an error naming it,
//!   and nothing is released.
//! * `LOCK.PERMITRENEW key id lease-ms`: the permit's deadline becomes
//!   `lease-ms` from now (a watchdog's call). Reply: 1, or 0 when it is
//!   not held (unknown, released or expired).
//! * `LOCK.SEMINFO key`: a map: `available` (as `LOCK.SEMAVAILABLE`),
//!   `ttl_ms`, `permits` (array of `[id, deadline-ms]`, -1 for never, at
//!   most 1000, earliest first), `waiters` (array of maps `wants`
//!   (`permits` or `leased`), `permits`, `waited_ms`, `timeout_ms`),
//!   `kept` (the kept places: array of maps `waiter`, `wants`, `permits`,
//!   `kept_until_ms`).
//!
//! Errors: wrong arity; bad `permits`, `lease-ms`, `WAIT`, id; `WRONGTYPE`;
//! a value that is not an integer; (`LOCK.PERMITACQUIRE`) a name whose set
//! would be in another cluster slot (braces that are not a valid hash tag).
//! Nothing changes.
//!
//! Effects (replicated): `SET key n KEEPTTL`, `ZADD {key}:timeout deadline
//! id...` (and `PEXPIREAT {key}:timeout` when `key` has an expiry, as
//! Redisson does), `ZREM {key}:timeout id...`.

use crate::args::{self, Arg};
use crate::commands::arg_docs::{KEEP, KEY, LEASE, PERMITS, PERMIT_ID, WAIT, WAITER};
use crate::commands::semaphore::{self as sem_cmd, open_settled, AcquireArgs, AcquireForm};
use crate::config;
use crate::errors::{self, Refusal};
use crate::ffi::blocking::Wake;
use crate::ffi::command::{Access, Command, CommandResult, CommandSpec, KeyFlags};
use crate::ffi::key::OpenMode;
use crate::ffi::{Ctx, RStr};
use crate::grant_policy::Ask;
use crate::semaphore::{self, id_hex, parse_id_hex, shown_deadline, PermitId};
use crate::semaphore_key::{check_permits_slot, SemaphoreKeys, SemaphoreNames};
use crate::waiting::semaphore::{self as sem_waiting, lease_deadline, new_ids, wait};
use crate::waiting::{self, carry_out};

/// `LOCK.PERMITACQUIRE`, as registered.
pub struct PermitAcquire;
/// `LOCK.PERMITRELEASE`, as registered.
pub struct PermitRelease;
/// `LOCK.PERMITRENEW`, as registered.
pub struct PermitRenew;
/// `LOCK.SEMINFO`, as registered.
pub struct SemInfo;

/// `LOCK.PERMITACQUIRE key permits [LEASE lease-ms] [WAIT timeout-ms]`.
pub fn parse_acquire<'a, A: Arg<'a>>(argv: &[A]) -> Result<AcquireArgs<A>, Refusal> {
    let form = AcquireForm {
        command: PermitAcquire::SPEC.name(),
        leased: true,
        syntax: errors::SYNTAX_PERMIT_ACQUIRE,
    };
    AcquireArgs::parse_with(argv, form)
}

/// `LOCK.PERMITRELEASE key id [id ...]`.
pub fn parse_release<'a, A: Arg<'a>>(argv: &[A]) -> Result<(A, Vec<PermitId>), Refusal> {
    match argv {
        [_, key, ids @ ..] if !ids.is_empty() => Ok((
            *key,
            ids.iter()
                .map(|id| parse_id_hex(id.bytes()))
                .collect::<Result<_, _>>()?,
        )),
        _ => Err(args::arity_error(PermitRelease::SPEC.name())),
    }
}

/// `LOCK.PERMITRENEW key id lease-ms`.
pub fn parse_renew<'a, A: Arg<'a>>(argv: &[A]) -> Result<(A, PermitId, i64), Refusal> {
    match argv {
        [_, key, id, lease] => Ok((
            *key,
            parse_id_hex(id.bytes())?,
            args::lease_ms(lease.bytes())?,
        )),
        _ => Err(args::arity_error(PermitRenew::SPEC.name())),
    }
}

impl Command for PermitAcquire {
    const SPEC: CommandSpec = CommandSpec {
        name: c"lock.permitacquire",
        access: Access::GrowFast,
        key: KeyFlags::READ_UPDATE,
        summary:
            c"Takes permits with a lease (each with an id) of a fair semaphore, optionally waiting",
        complexity: c"O(N log M) where N is the number of permits and M the permits taken",
        arity: -3,
        args: &[
            KEY,
            PERMITS,
            LEASE.token(c"LEASE").optional(),
            WAIT,
            KEEP,
            WAITER,
        ],
    };

    fn run(ctx: Ctx, argv: &[RStr]) -> CommandResult {
        let cmd = parse_acquire(argv)?;
        check_permits_slot(cmd.key)?;
        let now = ctx.now_ms();
        if cmd.lease_ms > 0 {
            args::deadline(now, cmd.lease_ms, config::max_lease_ms())?;
        }
        if let Some(wait_ms) = cmd.wait_ms {
            args::wait_fits(now, wait_ms)?;
        }
        let names = SemaphoreNames::of(cmd.key);
        let (sem, queued) = open_settled(ctx, &names)?;
        let key = cmd.key.as_bytes();
        let ask = Ask::Permits {
            n: cmd.permits,
            leased: true,
        };
        // A waiter id already granted: the same ids again, nothing more.
        if waiting::answer_remembered(ctx, key, cmd.waiter.as_deref(), ask) {
            return Ok(());
        }
        let deadline = lease_deadline(now, cmd.lease_ms);
        let decision =
            semaphore::acquire_leased(sem.value()?, new_ids(cmd.permits), deadline, queued);
        match (carry_out(ctx, &sem, decision), cmd.wait_ms) {
            (Some(ids), _) => {
                let ids: Vec<Vec<u8>> = ids.iter().map(id_hex).collect();
                ctx.reply_array(ids.len());
                for id in &ids {
                    ctx.reply_bulk(id);
                }
                waiting::remember_grant(ctx, key, cmd.keep(), ask, &Wake::Strings(ids));
            }
            (None, Some(timeout_ms)) if ctx.can_block() => {
                wait(ctx, &sem, ask, cmd.lease_ms, timeout_ms, cmd.keep());
            }
            (None, _) => ctx.reply_null(),
        }
        Ok(())
    }
}

impl Command for PermitRelease {
    const SPEC: CommandSpec = CommandSpec {
        name: c"lock.permitrelease",
        access: Access::WriteFast,
        key: KeyFlags::READ_UPDATE,
        summary: c"Gives leased permits back by id; the first waiters are served at once",
        complexity: c"O(N log M) where N is the number of ids and M the permits taken",
        arity: -3,
        args: &[KEY, PERMIT_ID.multiple()],
    };

    fn run(ctx: Ctx, argv: &[RStr]) -> CommandResult {
        let (key, ids) = parse_release(argv)?;
        let names = SemaphoreNames::of(key);
        let (sem, _) = open_settled(ctx, &names)?;
        let scores: Vec<Option<i64>> = ids.iter().map(|id| sem.deadline_of(id)).collect();
        let decision = semaphore::release_leased(sem.value()?, &ids, &scores, ctx.now_ms())?;
        let released = carry_out(ctx, &sem, decision);
        ctx.reply_integer(released);
        Ok(())
    }
}

impl Command for PermitRenew {
    const SPEC: CommandSpec = CommandSpec {
        name: c"lock.permitrenew",
        access: Access::WriteFast,
        key: KeyFlags::UPDATE,
        summary: c"Gives a leased permit a new lease (a watchdog's call)",
        complexity: c"O(log N) where N is the number of permits taken",
        arity: 4,
        args: &[KEY, PERMIT_ID, LEASE],
    };

    fn run(ctx: Ctx, argv: &[RStr]) -> CommandResult {
        let (key, id, lease_ms) = parse_renew(argv)?;
        let now = ctx.now_ms();
        let deadline = args::deadline(now, lease_ms, config::max_lease_ms())?;
        let names = SemaphoreNames::of(key);
        let (sem, _) = open_settled(ctx, &names)?;
        // Expired permits were just taken back: a permit still in the set
        // is live.
        let held = sem_waiting::renew(ctx, &sem, &id, deadline);
        ctx.reply_integer(i64::from(held));
        Ok(())
    }
}

impl Command for SemInfo {
    const SPEC: CommandSpec = CommandSpec {
        name: c"lock.seminfo",
        access: Access::Read,
        key: KeyFlags::READ,
        summary:
            c"Shows a semaphore's free permits, leased permits with their deadlines, and waiters",
        complexity: c"O(N) where N is the number of leased permits shown and waiters",
        arity: 2,
        args: &[KEY],
    };

    fn run(ctx: Ctx, argv: &[RStr]) -> CommandResult {
        const SHOWN: usize = 1_000;
        let cmd = args::KeyOnly::parse(SemInfo::SPEC.name(), argv)?;
        let names = SemaphoreNames::of(cmd.key);
        let sem = SemaphoreKeys::open(ctx, &names, OpenMode::Read)?;
        let available = sem_cmd::available(ctx, &sem)?;
        let now = ctx.now_ms();
        let permits: Vec<(Vec<u8>, i64)> = sem
            .permits(SHOWN)
            .into_iter()
            .filter(|(_, at)| *at > now)
            .collect();
        let waiters = waiting::snapshot(ctx, cmd.key);
        let kept = waiting::kept_places(ctx, cmd.key);
        ctx.reply_map(5);
        ctx.reply_simple(c"available");
        ctx.reply_integer(available);
        ctx.reply_simple(c"ttl_ms");
        ctx.reply_integer(sem.ttl_ms());
        ctx.reply_simple(c"permits");
        ctx.reply_array(permits.len());
        for (member, at) in &permits {
            ctx.reply_array(2);
            ctx.reply_bulk(&hex_member(member));
            ctx.reply_integer(shown_deadline(*at));
        }
        ctx.reply_simple(c"waiters");
        ctx.reply_array(waiters.len());
        for waiter in &waiters {
            ctx.reply_map(4);
            ctx.reply_simple(c"wants");
            ctx.reply_bulk(waiter.ask.name());
            ctx.reply_simple(c"permits");
            ctx.reply_integer(*waiter.ask.permits());
            ctx.reply_simple(c"waited_ms");
            ctx.reply_integer(waiter.waited_ms);
            ctx.reply_simple(c"timeout_ms");
            ctx.reply_integer(waiter.timeout_ms);
        }
        ctx.reply_simple(c"kept");
        ctx.reply_array(kept.len());
        for place in &kept {
            ctx.reply_map(4);
            ctx.reply_simple(c"waiter");
            ctx.reply_bulk(&place.identity);
            ctx.reply_simple(c"wants");
            ctx.reply_bulk(place.ask.name());
            ctx.reply_simple(c"permits");
            ctx.reply_integer(*place.ask.permits());
            ctx.reply_simple(c"kept_until_ms");
            ctx.reply_integer(place.until_ms);
        }
        Ok(())
    }
}

/// A member of the set as an id: hex of its 16 bytes (a member of another
/// length, written by someone else, as hex of its bytes too).
fn hex_member(member: &[u8]) -> Vec<u8> {
    member
        .chunks(16)
        .flat_map(|chunk| {
            let mut id = [0u8; 16];
            id[..chunk.len()].copy_from_slice(chunk);
            let mut hex = id_hex(&id);
            hex.truncate(chunk.len() * 2);
            hex
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::testing::{argv, assert_refused};

    const ID: &str = "000102030405060708090a0b0c0d0e0f";

    #[test]
    fn acquire_takes_a_lease_and_a_wait_in_any_order() {
        let cmd = parse_acquire(&argv(&[
            "LOCK.PERMITACQUIRE",
            "s",
            "2",
            "WAIT",
            "5",
            "LEASE",
            "100",
        ]))
        .unwrap();
        assert_eq!((cmd.permits, cmd.lease_ms, cmd.wait_ms), (2, 100, Some(5)));
        let bare = parse_acquire(&argv(&["LOCK.PERMITACQUIRE", "s", "1"])).unwrap();
        assert_eq!(bare.lease_ms, 0, "never expires");
        assert_refused(
            parse_acquire,
            &[
                (&["LOCK.PERMITACQUIRE", "s"], "'lock.permitacquire'"),
                (&["LOCK.PERMITACQUIRE", "s", "0"], "permits"),
                (&["LOCK.PERMITACQUIRE", "s", "10001"], "at most 10000"),
                (&["LOCK.PERMITACQUIRE", "s", "1", "LEASE", "0"], "lease-ms"),
                (&["LOCK.PERMITACQUIRE", "s", "1", "LEASE"], "syntax"),
                (&["LOCK.PERMITACQUIRE", "s", "1", "TOKEN", "1"], "syntax"),
            ],
        );
    }

    #[test]
    fn release_and_renew_take_hex_ids() {
        let (_, ids) = parse_release(&argv(&["LOCK.PERMITRELEASE", "s", ID, ID])).unwrap();
        assert_eq!(ids.len(), 2);
        assert_eq!(ids[0][15], 15);
        let (_, _, lease) = parse_renew(&argv(&["LOCK.PERMITRENEW", "s", ID, "50"])).unwrap();
        assert_eq!(lease, 50);
        assert_refused(
            parse_release,
            &[
                (&["LOCK.PERMITRELEASE", "s"], "'lock.permitrelease'"),
                (&["LOCK.PERMITRELEASE", "s", "xyz"], "permit id"),
            ],
        );
        assert_refused(
            parse_renew,
            &[
                (&["LOCK.PERMITRENEW", "s", ID], "'lock.permitrenew'"),
                (&["LOCK.PERMITRENEW", "s", ID, "0"], "lease-ms"),
            ],
        );
    }

    #[test]
    fn members_show_as_hex() {
        assert_eq!(hex_member(&[0xab; 16]), b"ab".repeat(16));
        assert_eq!(hex_member(b"\x01\x02"), b"0102".to_vec());
    }
}
