//! Wait and hold times per kind, and the most contended keys, in fixed
//! memory: behind `INFO lock`'s `lock_times` and `lock_hot_keys`. No FFI.
//!
//! * **Wait time**: from joining a queue to the grant, for every waiter the
//!   module queues (`LOCK.* ... WAIT`, `LOCK.AWAIT`), per kind of object.
//!   A wait sliced into pieces, or taken back from a kept place, counts
//!   from when it first joined (`docs/waiting.md`). Waits that time out
//!   are not grants: they are counted by `lock_waits_timed_out`, and in the
//!   hot keys' wait time (which adds the time each piece spent queued).
//! * **Hold time**: from a lock (or read-write lock) going from free to
//!   held to it going free again, when the module sees both: it sees every
//!   start it makes (a `LOCK.*` acquire, a hand-off) and every end it makes
//!   (a `LOCK.*` release or force, which a hand-off follows). A lock taken
//!   by Redisson's script was not seen starting, and one released by
//!   Redisson's script or ending by its lease was not seen ending (even when
//!   a waiter is then handed the lock: the end is no decision of the
//!   module's): neither is measured. Starts wait for their end
//!   in a table of [`HOLD_SLOTS`] slots by key hash: two keys held at once
//!   in one slot keep only the later start, so with more locks held at once
//!   than slots some holds go unmeasured, never mismeasured by another key.
//!   A start whose end was never seen is overwritten by the key's next
//!   start.
//! * **Hot keys**: Space-Saving tables (`hot_keys.rs`) by waiters and by
//!   time waited.
//!
//! `CONFIG RESETSTAT` forgets them all, as `stats_reset.rs` notices it.

use std::cell::RefCell;
use std::sync::LazyLock;
use std::time::Instant;

use crate::histogram::Histogram;
use crate::hot_keys::{HotKey, HotKeys};
use crate::listing::ObjectKind;
use crate::stats::Tally;
use crate::stats_reset::{Checked, ResetWatch};

/// The kinds whose waits are measured, in `INFO` order.
pub const WAIT_KINDS: [ObjectKind; 5] = [
    ObjectKind::Lock,
    ObjectKind::RwLock,
    ObjectKind::Semaphore,
    ObjectKind::Permits,
    ObjectKind::Latch,
];
/// The kinds whose holds are measured.
pub const HOLD_KINDS: [ObjectKind; 2] = [ObjectKind::Lock, ObjectKind::RwLock];
/// Slots of the table of holds waiting for their end (24 bytes each).
pub const HOLD_SLOTS: usize = 4096;

/// A start waiting for its end: the key's hash with bit 1 saying which
/// kind (set: a read-write lock), and when (`None`: an empty slot). The
/// start keeps the clock's own reading, so that an acquire pays for one
/// clock read and nothing more (the conversion to microseconds is left to
/// the end).
#[derive(Clone, Copy, Default)]
struct HoldStart {
    tag: u64,
    at: Option<Instant>,
}

/// Bit 1 of a start's tag: the hold is a read-write lock's.
const RW_BIT: u64 = 2;

struct Timings {
    /// Something was recorded since start or the last reset, and the
    /// command statistics have not been marked since (`stats_reset.rs`).
    unmarked: bool,
    waits: [Histogram; 5],
    holds: [Histogram; 2],
    starts: Box<[HoldStart; HOLD_SLOTS]>,
    by_waiters: HotKeys,
    by_wait_time: HotKeys,
    reset: ResetWatch,
}

impl Timings {
    fn new() -> Timings {
        Timings {
            unmarked: true,
            waits: std::array::from_fn(|_| Histogram::new()),
            holds: std::array::from_fn(|_| Histogram::new()),
            starts: Box::new([HoldStart::default(); HOLD_SLOTS]),
            by_waiters: HotKeys::new(),
            by_wait_time: HotKeys::new(),
            reset: ResetWatch::new(),
        }
    }

    fn forget(&mut self) {
        self.waits.iter_mut().for_each(Histogram::reset);
        self.holds.iter_mut().for_each(Histogram::reset);
        self.starts.fill(HoldStart::default());
        self.by_waiters.reset();
        self.by_wait_time.reset();
    }
}

thread_local! {
    // Redis calls commands, callbacks, timers and INFO on its main thread
    // only (a crash report's INFO may come from another thread: it finds
    // that thread's tables empty, and shows nothing wrong). Borrows never
    // span a call into Redis.
    static TIMINGS: RefCell<Timings> = RefCell::new(Timings::new());
}
static ORIGIN: LazyLock<Instant> = LazyLock::new(Instant::now);

/// Runs `f` on the tables; the default when they are in use (a crash
/// report mid-update).
fn with_timings<T: Default>(f: impl FnOnce(&mut Timings) -> T) -> T {
    TIMINGS
        .try_with(|t| {
            t.try_borrow_mut()
                .map(|mut t| f(&mut t))
                .unwrap_or_default()
        })
        .unwrap_or_default()
}

/// Microseconds on a monotonic clock (for durations only).
pub fn now_us() -> u64 {
    ORIGIN.elapsed().as_micros() as u64
}

fn kind_index(kinds: &[ObjectKind], kind: ObjectKind) -> Option<usize> {
    kinds.iter().position(|&k| k == kind)
}

/// Whether the command statistics must be marked now that something is
/// recorded (once after start and after each reset): the caller asks for
/// it (`resets.rs`).
fn needs_mark(t: &mut Timings) -> bool {
    std::mem::take(&mut t.unmarked)
}

/// A client started waiting for `key` of database `db`. True: mark the
/// command statistics (`resets::mark_soon`).
pub fn wait_started(db: i32, key: &[u8]) -> bool {
    with_timings(|t| {
        t.by_waiters.add(db, key, 1);
        needs_mark(t)
    })
}

/// A wait of `kind` on `key` of database `db` ended or paused: one piece of
/// it (a request, `in_queue_us` long) left the queue, granted after
/// `granted_after_us` since the waiter first joined (across the pieces of a
/// sliced wait and kept places), or not granted (`None`: timed out, gone,
/// cancelled, taken over by its next piece). The hot keys add the piece's
/// time, the histogram the whole wait when granted. True: mark the command
/// statistics.
pub fn wait_ended(
    kind: ObjectKind,
    db: i32,
    key: &[u8],
    in_queue_us: u64,
    granted_after_us: Option<u64>,
) -> bool {
    with_timings(|t| {
        if let Some(waited_us) = granted_after_us {
            if let Some(i) = kind_index(&WAIT_KINDS, kind) {
                t.waits[i].record(waited_us);
            }
        }
        t.by_wait_time.add(db, key, in_queue_us);
        needs_mark(t)
    })
}

/// A cheap hash of the key (it runs on every acquire and release): FNV-1a
/// style over the key eight bytes at a time, then its length and the
/// database. Never 0. A collision only loses a sample (an end meets
/// another key's start, which it leaves alone).
fn hold_hash(db: i32, key: &[u8]) -> u64 {
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut chunks = key.chunks_exact(8);
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        hash = (hash ^ u64::from_le_bytes(word))
            .wrapping_mul(PRIME)
            .rotate_left(23);
    }
    for &byte in chunks.remainder() {
        hash = (hash ^ u64::from(byte)).wrapping_mul(PRIME);
    }
    hash = (hash ^ (db as u64) ^ ((key.len() as u64) << 32)).wrapping_mul(PRIME);
    (hash ^ (hash >> 29)) | 1
}

/// A lock decision with a keyspace event was carried out on `key`: a lock
/// or read-write lock went from free to held (a start, `tally` says which
/// kind) or went free (an end). True: mark the command statistics.
///
/// This runs on every acquire of a free lock: one clock read, a hash of
/// the key and a store (about 150 instructions of the 11,000 of a
/// `LOCK.ACQUIRE`, `docs/performance.md`).
pub fn lock_event(db: i32, key: &[u8], became_held: bool, tally: Tally) -> bool {
    let hash = hold_hash(db, key) & !RW_BIT;
    let slot = (hash as usize >> 2) % HOLD_SLOTS;
    let now = Instant::now();
    with_timings(|t| {
        if became_held {
            let rw = matches!(tally, Tally::Granted(_) | Tally::HandedOffAs(_));
            t.starts[slot] = HoldStart {
                tag: hash | if rw { RW_BIT } else { 0 },
                at: Some(now),
            };
        } else {
            let start = std::mem::take(&mut t.starts[slot]);
            match start.at {
                Some(at) if start.tag & !RW_BIT == hash => {
                    let held = now.saturating_duration_since(at).as_micros() as u64;
                    t.holds[usize::from(start.tag & RW_BIT != 0)].record(held);
                }
                _ => t.starts[slot] = start, // another key's start: left alone
            }
        }
        needs_mark(t)
    })
}

/// `LOCK.INFO` ran (for noticing `CONFIG RESETSTAT`).
pub fn lock_info_ran() {
    with_timings(|t| t.reset.ran());
}

/// Compares with the server's count of `LOCK.INFO` calls; forgets
/// everything if statistics were reset since the last check.
pub fn check_reset(server_calls: u64) -> Checked {
    with_timings(|t| {
        let mut checked = t.reset.check(server_calls);
        if checked.reset {
            t.forget();
            // Marked again when something is recorded: until then there is
            // nothing a reset could make stale.
            t.unmarked = true;
            checked.run_once = false;
        }
        checked
    })
}

/// Count, p50, p90, p99, p99.9 and max of one histogram, in microseconds.
pub struct Summary {
    pub count: u64,
    pub percentiles: [(&'static str, u64); 5],
}

fn summary(h: &Histogram) -> Summary {
    Summary {
        count: h.count(),
        percentiles: [
            ("p50", h.percentile(500)),
            ("p90", h.percentile(900)),
            ("p99", h.percentile(990)),
            ("p999", h.percentile(999)),
            ("max", h.max()),
        ],
    }
}

/// What `INFO lock` shows; `None` when the tables are in use (a crash
/// report mid-update).
pub struct Report {
    pub waits: Vec<(ObjectKind, Summary)>,
    pub holds: Vec<(ObjectKind, Summary)>,
    pub by_waiters: Vec<HotKey>,
    pub by_wait_time: Vec<HotKey>,
}

/// The hot keys shown, per table.
pub const HOT_KEYS_SHOWN: usize = 5;

pub fn report() -> Option<Report> {
    with_timings(|t| {
        Some(Report {
            waits: WAIT_KINDS
                .iter()
                .zip(&t.waits)
                .map(|(&k, h)| (k, summary(h)))
                .collect(),
            holds: HOLD_KINDS
                .iter()
                .zip(&t.holds)
                .map(|(&k, h)| (k, summary(h)))
                .collect(),
            by_waiters: t.by_waiters.top(HOT_KEYS_SHOWN),
            by_wait_time: t.by_wait_time.top(HOT_KEYS_SHOWN),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grant_policy::Mode;

    // One test touches the global tables, so tests cannot race on them.
    #[test]
    fn holds_waits_and_hot_keys_are_recorded_and_forgotten_on_reset() {
        check_reset(0);
        // A lock held and released: one hold measured; the first record
        // asks for the command statistics to be marked, once.
        assert!(lock_event(0, b"h1", true, Tally::Acquired));
        assert!(!lock_event(0, b"h1", false, Tally::Released));
        // A read-write lock: its own histogram.
        lock_event(0, b"rw", true, Tally::Granted(Mode::Read));
        lock_event(0, b"rw", false, Tally::Released);
        // An end without a seen start (taken by Redisson's script).
        lock_event(0, b"unseen", false, Tally::Released);
        // Same key in another database: another object.
        lock_event(0, b"k", true, Tally::Acquired);
        lock_event(1, b"k", false, Tally::Released);
        wait_started(0, b"hot");
        wait_started(0, b"hot");
        // A wait granted after 50 ms in two pieces (the first timed out
        // after 20 ms, its place kept): the histogram has the whole wait,
        // the hot key the time in the queue.
        wait_ended(ObjectKind::Lock, 0, b"hot", 20_000, None);
        wait_ended(ObjectKind::Lock, 0, b"hot", 25_000, Some(50_000));
        wait_ended(ObjectKind::Lock, 0, b"hot", 10_000, None);
        wait_ended(ObjectKind::Latch, 0, b"l", 7, Some(7));
        let r = report().unwrap();
        assert_eq!(r.holds[0].1.count, 1, "lock holds");
        assert_eq!(r.holds[1].1.count, 1, "read-write holds");
        assert_eq!(r.waits[0].1.count, 1, "only granted waits");
        assert_eq!(r.waits[0].1.percentiles[4], ("max", 50_000));
        assert_eq!(r.waits[4].1.count, 1, "latch waits");
        assert_eq!(r.by_waiters[0].key, b"hot");
        assert_eq!(r.by_waiters[0].weight, 2);
        assert_eq!(
            r.by_wait_time[0].weight, 55_000,
            "timed-out waits count too"
        );
        // A reset seen: all forgotten, and marked again at the next record.
        lock_info_ran();
        assert!(check_reset(0).reset);
        assert!(wait_started(0, b"x"));
        assert!(!check_reset(1).reset);
        let r = report().unwrap();
        assert!(r.waits.iter().chain(&r.holds).all(|(_, s)| s.count == 0));
        assert!(r.by_wait_time.is_empty());
        // The start of `k` in database 0 is gone too.
        lock_event(0, b"k", false, Tally::Released);
        assert_eq!(report().unwrap().holds[0].1.count, 0);
    }
}
