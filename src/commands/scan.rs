//! `LOCK.SCAN cursor [MATCH pattern] [KIND kind] [COUNT count]`
//!
//! Every held object and its waiters, a page at a time, as `SCAN` lists
//! keys: for operators and dashboards ("what is held, by whom, until when,
//! and who waits"). Read-only, keyless (so it runs on replicas, and in a
//! cluster each node lists its own keys).
//!
//! * `cursor`: `0` starts a listing; then the cursor the last reply gave.
//!   The reply's cursor is `0` when the listing is over.
//! * `MATCH pattern`: only keys matching the glob (as `SCAN`'s).
//! * `KIND kind`: only `lock`, `rwlock`, `semaphore`, `permits`, `latch` or
//!   `counter` objects; without it, every kind but `counter` (an integer
//!   string nobody waits on: see `listing.rs` for why it cannot be told
//!   from a semaphore or a latch).
//! * `COUNT count`: the work of one call, as `SCAN`'s: about `count` keys
//!   looked at (default 100), so a call may list nothing and still go on.
//!
//! Reply: `[cursor, [object, ...]]`, each object a map (RESP3) or flat
//! key/value array (RESP2):
//! * `key`, `kind`;
//! * `holders`: maps of `owner`, `mode` (`write`, `read`, or `lock` for a
//!   plain lock, `permit` for a leased permit), `holds` (hold count, or 1
//!   per permit) and `deadline_ms` (when the hold ends, unix ms; -1 never).
//!   Semaphores, latches and counters have no holders (their permits are
//!   anonymous);
//! * `waiters`, in queue order: maps of `owner`, `wants` (`lock`, `read`,
//!   `write`, `permits`, `leased`, `latch`), `n` (permits asked; 1
//!   otherwise), `since_ms` (when it first joined the queue, unix ms,
//!   across the pieces of a sliced wait) and `timeout_ms` (0 = forever);
//! * `kept`, in queue order: the places kept for waiters that left by
//!   their timeout or their connection closing (`docs/waiting.md`), maps of
//!   `owner` (the owner, or the waiter id), `wants`, `n` and
//!   `kept_until_ms` (unix ms), as `LOCK.INFO` shows them: apart from
//!   `waiters`, since nobody is blocked on them and no grant goes to them,
//!   yet they hold a place every grant passes over;
//! * `token`: a lock's or read-write lock's last fencing token, nil when
//!   none; `value`: a semaphore's available permits, a latch's count, a
//!   counter's value, nil for locks.
//!
//! Each object is listed exactly once per listing, however the keyspace
//! changes meanwhile (`scan_cursors.rs` says how, and what it costs). Keys
//! the caller may not read (ACL key patterns) are left out. Holders,
//! waiters and kept places are listed up to [`MAX_LISTED`] each per object.

use std::cell::RefCell;

use crate::args::{arity_error, strict_i64, Arg};
use crate::commands::arg_docs::{SCAN_COUNT, SCAN_CURSOR, SCAN_KIND, SCAN_MATCH};
use crate::counter_key::{self, CounterKey};
use crate::errors::{self, Refusal};
use crate::ffi::command::{Access, Command, CommandResult, CommandSpec, KeyFlags};
use crate::ffi::key::{Key, KeyKind, OpenMode};
use crate::ffi::server::{self, CallerUser};
use crate::ffi::{Ctx, OwnedStr, RStr};
use crate::listing::{self, ObjectKind};
use crate::lock_key::LockKey;
use crate::rwlock_key::RwLockKey;
use crate::scan_cursors::{Lost, ScanCursors};
use crate::semaphore::id_hex;
use crate::semaphore_key::permits_key_name;
use crate::wait_queue::{KeptInfo, WaiterInfo};
use crate::waiting;

/// `COUNT` when none is given.
const DEFAULT_COUNT: u64 = 100;
/// The largest `COUNT` (a call's work must stay bounded).
const MAX_COUNT: u64 = 100_000;
/// Holders, waiters and kept places listed per object, at most (each).
pub const MAX_LISTED: usize = 1_000;
/// A hash with more fields than this is no lock (a lock has one owner; a
/// read-write lock, its readers).
const MAX_LOCK_FIELDS: usize = 10_000;

/// `LOCK.SCAN`, as registered.
pub struct LockScan;

impl Command for LockScan {
    /// `readonly`, no key: it checks the caller's read permission on every
    /// key it lists.
    const SPEC: CommandSpec = CommandSpec {
        name: c"lock.scan",
        access: Access::Read,
        key: KeyFlags::NO_KEY,
        summary: c"Lists held objects, their holders and their waiters, a page at a time",
        complexity: c"O(N) for a call, N the keys looked at (COUNT) and their holders and waiters",
        arity: -2,
        args: &[SCAN_CURSOR, SCAN_MATCH, SCAN_KIND, SCAN_COUNT],
    };

    fn run(ctx: Ctx, argv: &[RStr]) -> CommandResult {
        let args = ScanArgs::parse(LockScan::SPEC.name(), argv)?;
        let (db, now) = (ctx.selected_db(), ctx.now_ms());
        let (id, mut scan) = WALKS.with(|walks| {
            let mut walks = walks.borrow_mut();
            match args.cursor {
                0 => Ok((walks.begin(db, now), 0)),
                id => walks
                    .resume(id, db, now)
                    .map(|walk| (id, walk.scan))
                    .map_err(|lost| match lost {
                        Lost::Unknown => errors::SCAN_CURSOR_UNKNOWN,
                        Lost::OtherDb(db) => errors::scan_cursor_other_db(db),
                    }),
            }
        })?;
        let user = CallerUser::of(ctx);
        let mut found: Vec<Vec<u8>> = Vec::new();
        let mut looked = 0;
        let mut done = false;
        // SCAN's COUNT is a hint: several steps until `count` keys were
        // looked at, or SCAN is through.
        while looked < args.count {
            let Some((next, keys)) =
                server::scan_step(ctx, scan, args.pattern, args.count - looked)
            else {
                break;
            };
            looked += (keys.len() as u64).max(1);
            found.extend(keys);
            scan = next;
            if next == 0 {
                done = true;
                break;
            }
        }
        if done {
            // Objects with waiters whose key does not exist (a semaphore
            // waited on before it was set): not in the keyspace, so SCAN
            // cannot meet them.
            let waited = waiting::queued_keys(ctx);
            found.extend(
                waited
                    .into_iter()
                    .filter(|key| args.pattern.is_none_or(|p| listing::glob_match(p, key))),
            );
        }
        let mut listed = Vec::new();
        for key in found {
            let name = OwnedStr::new(&key);
            if user
                .as_ref()
                .is_some_and(|user| !user.may_read(name.borrow()))
            {
                continue;
            }
            let Some(object) = describe(ctx, name.borrow()) else {
                continue;
            };
            if !object.kind.shown(args.kind) {
                continue;
            }
            let first = WALKS.with(|walks| walks.borrow_mut().first_meeting(id, &key));
            if first {
                listed.push((key, object));
            }
        }
        let next = WALKS.with(|walks| {
            let mut walks = walks.borrow_mut();
            if done {
                walks.finish(id);
                0
            } else {
                if let Ok(walk) = walks.resume(id, db, now) {
                    walk.scan = scan;
                }
                id
            }
        });
        reply(ctx, next, &listed);
        Ok(())
    }
}

thread_local! {
    // Commands run on Redis's main thread only.
    static WALKS: RefCell<ScanCursors> = RefCell::new(ScanCursors::new());
}

/// The live listings and the bytes they keep (`INFO lock`).
pub fn walks_usage() -> (usize, usize) {
    WALKS.with(|walks| walks.borrow().usage())
}

/// `LOCK.SCAN`'s arguments.
#[derive(Debug, PartialEq, Eq)]
struct ScanArgs<'a> {
    cursor: u64,
    pattern: Option<&'a [u8]>,
    kind: Option<ObjectKind>,
    count: u64,
}

impl<'a> ScanArgs<'a> {
    fn parse<A: Arg<'a>>(command: &str, argv: &[A]) -> Result<ScanArgs<'a>, Refusal> {
        let [_, cursor, options @ ..] = argv else {
            return Err(arity_error(command));
        };
        let cursor = strict_i64(cursor.bytes())
            .and_then(|c| u64::try_from(c).ok())
            .ok_or(errors::SCAN_CURSOR_INVALID)?;
        let mut args = ScanArgs {
            cursor,
            pattern: None,
            kind: None,
            count: DEFAULT_COUNT,
        };
        let (mut seen_match, mut seen_kind, mut seen_count) = (false, false, false);
        let mut rest = options;
        while let [option, value, tail @ ..] = rest {
            let option = option.bytes();
            let value = value.bytes();
            if option.eq_ignore_ascii_case(b"MATCH") && !seen_match {
                seen_match = true;
                args.pattern = Some(value);
            } else if option.eq_ignore_ascii_case(b"KIND") && !seen_kind {
                seen_kind = true;
                args.kind = Some(ObjectKind::parse(value).ok_or(errors::SCAN_KIND_UNKNOWN)?);
            } else if option.eq_ignore_ascii_case(b"COUNT") && !seen_count {
                seen_count = true;
                args.count = strict_i64(value)
                    .filter(|&n| n > 0)
                    .ok_or(errors::COUNT_NOT_POSITIVE)?
                    .min(MAX_COUNT as i64) as u64;
            } else {
                return Err(errors::SYNTAX_SCAN);
            }
            rest = tail;
        }
        if !rest.is_empty() {
            return Err(errors::SYNTAX_SCAN);
        }
        Ok(args)
    }
}

/// One listed holder.
struct Holder {
    owner: Vec<u8>,
    mode: &'static [u8],
    holds: i64,
    deadline_ms: i64,
}

/// One listed object.
struct Object {
    kind: ObjectKind,
    holders: Vec<Holder>,
    waiters: Vec<WaiterInfo>,
    kept: Vec<KeptInfo>,
    token: Option<i64>,
    value: Option<i64>,
}

/// What `name` is, if it is an object the listing shows (any kind; the
/// caller filters).
fn describe(ctx: Ctx, name: RStr) -> Option<Object> {
    let key = name.as_bytes();
    if listing::is_part_by_name(key) {
        return None;
    }
    let mut waiters = waiting::snapshot(ctx, name);
    waiters.truncate(MAX_LISTED);
    let mut kept = waiting::kept_places(ctx, name);
    kept.truncate(MAX_LISTED);
    let waited_as = (waiters.first().map(|w| w.ask))
        .or(kept.first().map(|k| k.ask))
        .map(ObjectKind::of_ask);
    let opened = Key::open(ctx, name, OpenMode::Read);
    let mut object = match opened.kind() {
        KeyKind::Hash => {
            drop(opened);
            describe_hash(ctx, name)?
        }
        KeyKind::String => {
            let value = opened.string_get(strict_i64).flatten();
            let has_permits = permits_set(ctx, key).is_some();
            let kind = listing::string_kind(value, waited_as, has_permits)?;
            let holders = if kind == ObjectKind::Permits {
                permit_holders(ctx, key)
            } else {
                Vec::new()
            };
            Object {
                kind,
                holders,
                waiters: Vec::new(),
                kept: Vec::new(),
                token: None,
                value,
            }
        }
        // A semaphore's leased-permit set is part of its semaphore.
        KeyKind::SortedSet if listing::is_permits_set_name(key) => return None,
        KeyKind::SortedSet | KeyKind::Other => return None,
        // No key, but waiters or kept places: listed by what they wait for.
        KeyKind::Empty => Object {
            kind: waited_as?,
            holders: Vec::new(),
            waiters: Vec::new(),
            kept: Vec::new(),
            token: None,
            value: None,
        },
    };
    object.waiters = waiters;
    object.kept = kept;
    Some(object)
}

/// A lock or read-write lock, from its hash.
fn describe_hash(ctx: Ctx, name: RStr) -> Option<Object> {
    let lock = LockKey::open_read(ctx, name).ok()?;
    if lock.key().value_len() > MAX_LOCK_FIELDS {
        return None;
    }
    let entries = lock.entries();
    let kind = listing::hash_kind(&entries)?;
    let deadline = lock.deadline_ms().unwrap_or(-1);
    let holders = match RwLockKey::of(&lock).snapshot() {
        Some(rw) if kind == ObjectKind::RwLock => {
            let mut holders: Vec<Holder> = rw
                .writer
                .map(|w| Holder {
                    owner: w.owner,
                    mode: b"write",
                    holds: w.count,
                    deadline_ms: deadline,
                })
                .into_iter()
                .collect();
            holders.extend(rw.readers.into_iter().map(|r| Holder {
                // A reader's hold ends with its last hold key (-2: gone).
                deadline_ms: r.deadlines.iter().copied().max().unwrap_or(deadline),
                owner: r.owner,
                mode: b"read",
                holds: r.count,
            }));
            holders
        }
        _ => entries
            .into_iter()
            .map(|(owner, count)| Holder {
                owner,
                mode: b"lock",
                holds: strict_i64(&count).unwrap_or(0),
                deadline_ms: deadline,
            })
            .collect(),
    };
    Some(Object {
        kind,
        holders: holders.into_iter().take(MAX_LISTED).collect(),
        waiters: Vec::new(),
        kept: Vec::new(),
        token: last_token(ctx, name),
        value: None,
    })
}

/// The lock's last fencing token, if its counter holds one.
fn last_token(ctx: Ctx, name: RStr) -> Option<i64> {
    let counter = counter_key::counter_name(name).ok()?;
    let value = CounterKey::open(ctx, counter.borrow(), OpenMode::Read)
        .ok()?
        .value();
    value
}

/// The leased-permit set of semaphore `name`, if it exists.
fn permits_set(ctx: Ctx, name: &[u8]) -> Option<OwnedStr> {
    let set = OwnedStr::new(&permits_key_name(name));
    let open = Key::open(ctx, set.borrow(), OpenMode::Read);
    let exists = open.kind() == KeyKind::SortedSet;
    drop(open);
    exists.then_some(set)
}

/// A permit semaphore's leased permits: one holder per permit id.
fn permit_holders(ctx: Ctx, name: &[u8]) -> Vec<Holder> {
    let Some(set) = permits_set(ctx, name) else {
        return Vec::new();
    };
    let set = Key::open(ctx, set.borrow(), OpenMode::Read);
    set.zset_range_by_score(f64::NEG_INFINITY, f64::INFINITY, MAX_LISTED)
        .into_iter()
        .map(|(id, deadline)| Holder {
            owner: <[u8; 16]>::try_from(id.as_slice()).map_or(id.clone(), |id| id_hex(&id)),
            mode: b"permit",
            holds: 1,
            deadline_ms: deadline as i64,
        })
        .collect()
}

/// The reply. Field names are bulk strings, not simple strings: a server
/// copies and checks each simple string a module replies (for `\r\n`),
/// which was a sixth of a listing's instructions, 11 names per object.
fn reply(ctx: Ctx, cursor: u64, listed: &[(Vec<u8>, Object)]) {
    ctx.reply_array(2);
    ctx.reply_bulk(cursor.to_string().as_bytes());
    ctx.reply_array(listed.len());
    for (key, object) in listed {
        ctx.reply_map(7);
        ctx.reply_bulk(b"key");
        ctx.reply_bulk(key);
        ctx.reply_bulk(b"kind");
        ctx.reply_bulk(object.kind.name().as_bytes());
        ctx.reply_bulk(b"holders");
        ctx.reply_array(object.holders.len());
        for holder in &object.holders {
            ctx.reply_map(4);
            ctx.reply_bulk(b"owner");
            ctx.reply_bulk(&holder.owner);
            ctx.reply_bulk(b"mode");
            ctx.reply_bulk(holder.mode);
            ctx.reply_bulk(b"holds");
            ctx.reply_integer(holder.holds);
            ctx.reply_bulk(b"deadline_ms");
            ctx.reply_integer(holder.deadline_ms);
        }
        ctx.reply_bulk(b"waiters");
        ctx.reply_array(object.waiters.len());
        for waiter in &object.waiters {
            ctx.reply_map(5);
            ctx.reply_bulk(b"owner");
            ctx.reply_bulk(&waiter.owner);
            ctx.reply_bulk(b"wants");
            ctx.reply_bulk(waiter.ask.name());
            ctx.reply_bulk(b"n");
            ctx.reply_integer(waiter.ask.amount());
            ctx.reply_bulk(b"since_ms");
            ctx.reply_integer(waiter.since_ms);
            ctx.reply_bulk(b"timeout_ms");
            ctx.reply_integer(waiter.timeout_ms);
        }
        ctx.reply_bulk(b"kept");
        ctx.reply_array(object.kept.len());
        for place in &object.kept {
            ctx.reply_map(4);
            ctx.reply_bulk(b"owner");
            ctx.reply_bulk(&place.identity);
            ctx.reply_bulk(b"wants");
            ctx.reply_bulk(place.ask.name());
            ctx.reply_bulk(b"n");
            ctx.reply_integer(place.ask.amount());
            ctx.reply_bulk(b"kept_until_ms");
            ctx.reply_integer(place.until_ms);
        }
        ctx.reply_bulk(b"token");
        reply_maybe(ctx, object.token);
        ctx.reply_bulk(b"value");
        reply_maybe(ctx, object.value);
    }
}

fn reply_maybe(ctx: Ctx, value: Option<i64>) {
    match value {
        Some(value) => ctx.reply_integer(value),
        None => ctx.reply_null(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<ScanArgs<'static>, Refusal> {
        let argv: Vec<&'static [u8]> = args
            .iter()
            .map(|a| -> &'static [u8] { Box::leak(a.as_bytes().to_vec().into_boxed_slice()) })
            .collect();
        ScanArgs::parse("lock.scan", &argv)
    }

    #[test]
    fn options_come_in_any_order_each_at_most_once() {
        let args = parse(&["LOCK.SCAN", "0"]).unwrap();
        assert_eq!(
            (args.cursor, args.pattern, args.kind, args.count),
            (0, None, None, 100)
        );
        let args = parse(&[
            "LOCK.SCAN",
            "42",
            "count",
            "7",
            "KIND",
            "Latch",
            "MATCH",
            "a*",
        ])
        .unwrap();
        assert_eq!(args.cursor, 42);
        assert_eq!(args.count, 7);
        assert_eq!(args.kind, Some(ObjectKind::Latch));
        assert_eq!(args.pattern, Some(&b"a*"[..]));
        assert_eq!(
            parse(&["LOCK.SCAN", "0", "COUNT", "999999999"])
                .unwrap()
                .count,
            MAX_COUNT
        );
    }

    #[test]
    fn bad_input_is_refused_naming_the_argument() {
        let refused = |args: &[&str]| parse(args).unwrap_err();
        assert!(refused(&["LOCK.SCAN"]).contains("wrong number of arguments for 'lock.scan'"));
        for cursor in ["-1", "x", "01", ""] {
            assert_eq!(refused(&["LOCK.SCAN", cursor]), errors::SCAN_CURSOR_INVALID);
        }
        assert_eq!(
            refused(&["LOCK.SCAN", "0", "KIND", "hash"]),
            errors::SCAN_KIND_UNKNOWN
        );
        for count in ["0", "-3", "x"] {
            assert_eq!(
                refused(&["LOCK.SCAN", "0", "COUNT", count]),
                errors::COUNT_NOT_POSITIVE
            );
        }
        for syntax in [
            &["LOCK.SCAN", "0", "MATCH"][..],
            &["LOCK.SCAN", "0", "MATCH", "a", "MATCH", "b"],
            &["LOCK.SCAN", "0", "TYPE", "hash"],
        ] {
            assert_eq!(refused(syntax), errors::SYNTAX_SCAN, "{syntax:?}");
        }
    }
}
