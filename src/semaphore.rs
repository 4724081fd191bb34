//! The semaphores' decisions, pure: Redisson's `RSemaphore` and
//! `RPermitExpirableSemaphore` as a state machine. No FFI.
//!
//! A semaphore is a string `name` holding the permits available. Leased
//! permits (`LOCK.PERMITACQUIRE`) are also members of the sorted set
//! `{name}:timeout`, scored by their deadline on the server's clock
//! (`value_key.rs`, `semaphore_key.rs` read and write them). Every decision
//! here says what to write, what to publish on `redisson_sc:{name}`, and
//! whether permits were freed (then the wait queue is served:
//! `waiting/semaphore.rs`).
//!
//! Fairness is the queue's (`grant_policy::Permits`): a command that finds
//! clients queued does not take permits before them, even when enough are
//! free for it, because they are kept for the head of the queue.

use crate::args::strict_i64;
use crate::decision::{Decision, Event, Publish};
use crate::errors::{self, Refusal};
use crate::stats::Tally;

/// The score of a permit without a lease: Redisson's `nonExpirableTimeout`.
pub const NON_EXPIRING: i64 = 922_337_203_685_477;

/// A permit's id: 16 random bytes, as current Redisson makes them.
pub type PermitId = [u8; 16];

/// Where permit ids come from: xoshiro256**, seeded once from Redis's own
/// random bytes. Redisson draws its ids from `ThreadLocalRandom`; ids only
/// need to be unique (128 bits from a 256-bit state), and drawing each from
/// Redis's generator (SHA-256 in counter mode) was a fifth of the cost of
/// a leased acquire.
pub struct IdSource {
    state: [u64; 4],
}

impl IdSource {
    /// A source seeded with `seed` (all zero is replaced: it would only
    /// ever give zeros).
    pub fn new(seed: [u8; 32]) -> IdSource {
        let mut state = [0u64; 4];
        for (word, bytes) in state.iter_mut().zip(seed.chunks_exact(8)) {
            let mut b = [0u8; 8];
            b.copy_from_slice(bytes);
            *word = u64::from_le_bytes(b);
        }
        if state == [0; 4] {
            state = [1, 2, 3, 4];
        }
        IdSource { state }
    }

    fn next_u64(&mut self) -> u64 {
        let s = &mut self.state;
        let result = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// A new permit id.
    pub fn next_id(&mut self) -> PermitId {
        let mut id = [0u8; 16];
        id[..8].copy_from_slice(&self.next_u64().to_le_bytes());
        id[8..].copy_from_slice(&self.next_u64().to_le_bytes());
        id
    }
}

/// The value of a semaphore key: a decimal integer.
pub fn parse_value(raw: &[u8]) -> Result<i64, Refusal> {
    strict_i64(raw).ok_or(errors::SEMAPHORE_NOT_INTEGER)
}

/// A permit id as clients see it: 32 lowercase hex characters.
pub fn id_hex(id: &PermitId) -> Vec<u8> {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    id.iter()
        .flat_map(|b| [HEX[usize::from(b >> 4)], HEX[usize::from(b & 15)]])
        .collect()
}

/// A permit id argument: 32 hex characters (either case).
pub fn parse_id_hex(raw: &[u8]) -> Result<PermitId, Refusal> {
    fn nibble(c: u8) -> Option<u8> {
        match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            b'A'..=b'F' => Some(c - b'A' + 10),
            _ => None,
        }
    }
    if raw.len() != 32 {
        return Err(errors::PERMIT_ID_INVALID);
    }
    let mut id = [0u8; 16];
    for (i, pair) in raw.chunks(2).enumerate() {
        match (nibble(pair[0]), nibble(pair[1])) {
            (Some(hi), Some(lo)) => id[i] = hi << 4 | lo,
            _ => return Err(errors::PERMIT_ID_INVALID),
        }
    }
    Ok(id)
}

/// A permit's deadline as `LOCK.SEMINFO` shows it: -1 for never.
pub fn shown_deadline(score: i64) -> i64 {
    if score >= NON_EXPIRING {
        -1
    } else {
        score
    }
}

/// What a decision does to the semaphore's keys, and what follows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SemDecision<R> {
    /// The new number of available permits (`None`: unchanged).
    pub value: Option<i64>,
    /// Leased permits to add, with their deadlines.
    pub add: Vec<(PermitId, i64)>,
    /// Leased permits to remove (set members: an id's bytes).
    pub remove: Vec<Vec<u8>>,
    /// Publish this count on `redisson_sc:{name}`.
    pub publish: Option<i64>,
    /// Permits were freed: serve the queue.
    pub freed: bool,
    pub tally: Tally,
    pub reply: R,
}

/// Freed permits serve the queue; the count is announced after the queue
/// took its share (Redisson's waiters read it as what is left for them).
impl<R> Decision for SemDecision<R> {
    type Reply = R;

    fn tally(&self) -> Tally {
        self.tally
    }

    fn event(&self) -> Option<Event> {
        None
    }

    fn serves(&self) -> bool {
        self.freed
    }

    fn publishes(&self) -> Publish {
        match self.publish {
            Some(_) => Publish::Always,
            None => Publish::Never,
        }
    }

    fn into_reply(self) -> R {
        self.reply
    }
}

impl<R> SemDecision<R> {
    /// Changes nothing; answers `reply`.
    pub fn nothing(reply: R) -> Self {
        SemDecision {
            value: None,
            add: Vec::new(),
            remove: Vec::new(),
            publish: None,
            freed: false,
            tally: Tally::Nothing,
            reply,
        }
    }

    /// Sets the value to `value` and announces it; `freed` says whether a
    /// waiter may be served now.
    fn set(value: i64, reply: R) -> Self {
        SemDecision {
            value: Some(value),
            publish: Some(value),
            freed: value > 0,
            ..SemDecision::nothing(reply)
        }
    }
}

/// `LOCK.SEMSET`: sets the permits when the semaphore does not exist.
/// Reply: whether it did.
pub fn set_permits(value: Option<i64>, permits: i64) -> SemDecision<bool> {
    match value {
        None => SemDecision::set(permits, true),
        Some(_) => SemDecision::nothing(false),
    }
}

/// `LOCK.SEMADD`: adds `delta` (maybe negative) to the permits; a missing
/// semaphore has 0. Reply: the new count.
pub fn add_permits(value: Option<i64>, delta: i64) -> Result<SemDecision<i64>, Refusal> {
    let new = value
        .unwrap_or(0)
        .checked_add(delta)
        .ok_or(errors::PERMITS_OVERFLOW)?;
    Ok(SemDecision::set(new, new))
}

/// `LOCK.SEMRELEASE`: gives `permits` back. Reply: the new count.
pub fn release(value: Option<i64>, permits: i64) -> Result<SemDecision<i64>, Refusal> {
    add_permits(value, permits)
}

/// `LOCK.SEMDRAIN`: takes every available permit, leaving 0 (a value below
/// zero, left by `LOCK.SEMADD`, is set to 0 too, as Redisson's
/// `drainPermits`). Reply: the value it found (0 when missing).
pub fn drain(value: Option<i64>) -> SemDecision<i64> {
    match value {
        Some(v) if v != 0 => SemDecision {
            value: Some(0),
            ..SemDecision::nothing(v)
        },
        _ => SemDecision::nothing(0),
    }
}

/// Whether `permits` can be taken now from `value`, with `queued` clients
/// ahead (they are served first).
fn takes(value: Option<i64>, permits: i64, queued: bool) -> Option<i64> {
    let available = value.unwrap_or(0);
    (!queued && available >= permits).then(|| available - permits)
}

/// Whether permits were taken (`LOCK.SEMACQUIRE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Took(pub bool);

/// `LOCK.SEMACQUIRE` (and a waiter's grant): takes `permits` when they are
/// free and nobody queues ahead. Reply: whether it did.
pub fn acquire(value: Option<i64>, permits: i64, queued: bool) -> SemDecision<Took> {
    match takes(value, permits, queued) {
        Some(left) => SemDecision {
            value: Some(left),
            tally: Tally::PermitsAcquired,
            ..SemDecision::nothing(Took(true))
        },
        None => SemDecision {
            tally: Tally::PermitsContended,
            ..SemDecision::nothing(Took(false))
        },
    }
}

/// `LOCK.PERMITACQUIRE` (and a waiter's grant): takes one permit per id in
/// `ids`, each leased until `deadline`. Reply: the ids, or `None`.
pub fn acquire_leased(
    value: Option<i64>,
    ids: Vec<PermitId>,
    deadline: i64,
    queued: bool,
) -> SemDecision<Option<Vec<PermitId>>> {
    let permits = i64::try_from(ids.len()).unwrap_or(i64::MAX);
    match takes(value, permits, queued) {
        Some(left) => SemDecision {
            value: Some(left),
            add: ids.iter().map(|id| (*id, deadline)).collect(),
            tally: Tally::PermitsAcquired,
            ..SemDecision::nothing(Some(ids))
        },
        None => SemDecision {
            tally: Tally::PermitsContended,
            ..SemDecision::nothing(None)
        },
    }
}

/// `LOCK.PERMITRELEASE`: gives back the permits `ids`, whose deadlines
/// (`None`: not in the set) are `scores`. Every id must be a live permit,
/// or nothing is released. Reply: how many were.
pub fn release_leased(
    value: Option<i64>,
    ids: &[PermitId],
    scores: &[Option<i64>],
    now: i64,
) -> Result<SemDecision<i64>, Refusal> {
    if let Some((id, _)) = ids
        .iter()
        .zip(scores)
        .find(|(_, score)| !score.is_some_and(|at| at > now))
    {
        return Err(errors::permit_not_held(&id_hex(id)));
    }
    let mut unique = ids.to_vec();
    unique.sort_unstable();
    unique.dedup();
    let released = i64::try_from(unique.len()).unwrap_or(i64::MAX);
    let mut decision = release(value, released)?;
    decision.remove = unique.iter().map(|id| id.to_vec()).collect();
    decision.reply = released;
    Ok(decision)
}

/// Expired permits found in the set (deadline reached): they leave it and
/// their permits come back. Reply: how many.
pub fn reclaim(value: Option<i64>, expired: Vec<Vec<u8>>) -> Result<SemDecision<usize>, Refusal> {
    if expired.is_empty() {
        return Ok(SemDecision::nothing(0));
    }
    let count = expired.len();
    let added = add_permits(value, i64::try_from(count).unwrap_or(i64::MAX))?;
    Ok(SemDecision {
        value: added.value,
        add: Vec::new(),
        remove: expired,
        // Redisson announces a reclaim only when permits are available after it.
        publish: added.publish.filter(|v| *v > 0),
        freed: added.freed,
        tally: Tally::PermitsReclaimed(count as u64),
        reply: count,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_000;

    #[test]
    fn ids_are_distinct_and_differ_by_seed() {
        let mut source = IdSource::new([7; 32]);
        let ids: std::collections::HashSet<PermitId> =
            (0..10_000).map(|_| source.next_id()).collect();
        assert_eq!(ids.len(), 10_000);
        assert_ne!(
            IdSource::new([1; 32]).next_id(),
            IdSource::new([2; 32]).next_id()
        );
        assert_ne!(
            IdSource::new([0; 32]).next_id(),
            [0; 16],
            "never stuck at zero"
        );
    }

    #[test]
    fn ids_round_trip_as_hex() {
        let id: PermitId = [
            0, 1, 2, 0xab, 0xcd, 0xef, 0x10, 0x7f, 9, 8, 7, 6, 5, 4, 3, 255,
        ];
        let hex = id_hex(&id);
        assert_eq!(hex, b"000102abcdef107f09080706050403ff".to_vec());
        assert_eq!(parse_id_hex(&hex), Ok(id));
        assert_eq!(parse_id_hex(b"000102ABCDEF107F09080706050403FF"), Ok(id));
        for bad in [
            &b""[..],
            b"00",
            b"000102abcdef107f09080706050403f",
            b"zz0102abcdef107f09080706050403ff",
        ] {
            assert_eq!(parse_id_hex(bad), Err(errors::PERMIT_ID_INVALID));
        }
    }

    #[test]
    fn set_only_when_missing_and_announces_the_count() {
        let d = set_permits(None, 4);
        assert_eq!(
            (d.value, d.publish, d.freed, d.reply),
            (Some(4), Some(4), true, true)
        );
        assert_eq!(set_permits(Some(1), 4), SemDecision::nothing(false));
        assert!(!set_permits(None, 0).freed, "no permits, nobody to serve");
    }

    #[test]
    fn adding_may_lower_and_refuses_overflow() {
        assert_eq!(add_permits(None, 3).map(|d| d.reply), Ok(3));
        let lower = add_permits(Some(2), -5).unwrap();
        assert_eq!((lower.value, lower.freed), (Some(-3), false));
        assert_eq!(
            add_permits(Some(i64::MAX), 1),
            Err(errors::PERMITS_OVERFLOW)
        );
    }

    #[test]
    fn acquire_takes_only_what_is_free_and_never_ahead_of_the_queue() {
        assert_eq!(acquire(Some(3), 2, false).value, Some(1));
        assert_eq!(acquire(Some(3), 2, false).reply, Took(true));
        assert_eq!(acquire(Some(3), 2, false).tally, Tally::PermitsAcquired);
        let not_taken = SemDecision {
            tally: Tally::PermitsContended,
            ..SemDecision::nothing(Took(false))
        };
        assert_eq!(acquire(Some(1), 2, false), not_taken);
        assert_eq!(acquire(None, 1, false), not_taken);
        assert_eq!(
            acquire(Some(5), 1, true),
            not_taken,
            "clients queue: the permits are theirs first"
        );
    }

    #[test]
    fn leased_permits_are_added_with_their_deadline() {
        let ids = vec![[1; 16], [2; 16]];
        let d = acquire_leased(Some(2), ids.clone(), 5_000, false);
        assert_eq!(d.value, Some(0));
        assert_eq!(d.add, vec![([1; 16], 5_000), ([2; 16], 5_000)]);
        assert_eq!(d.reply, Some(ids.clone()));
        assert_eq!(acquire_leased(Some(1), ids, 5_000, false).reply, None);
    }

    #[test]
    fn a_leased_release_needs_every_id_live_or_changes_nothing() {
        let ids = [[1; 16], [2; 16]];
        let d = release_leased(Some(0), &ids, &[Some(NOW + 1), Some(NOW + 5)], NOW).unwrap();
        assert_eq!((d.value, d.reply, d.freed), (Some(2), 2, true));
        assert_eq!(d.remove, vec![vec![1; 16], vec![2; 16]]);
        let expired = release_leased(Some(0), &ids, &[Some(NOW + 1), Some(NOW)], NOW);
        assert_eq!(expired, Err(errors::permit_not_held(&id_hex(&[2; 16]))));
        assert!(release_leased(Some(0), &ids, &[None, Some(NOW + 1)], NOW).is_err());
        let twice = release_leased(Some(0), &[[1; 16], [1; 16]], &[Some(NOW + 1); 2], NOW);
        assert_eq!(twice.map(|d| d.reply), Ok(1), "one permit, named twice");
    }

    #[test]
    fn reclaimed_permits_come_back_and_are_announced_when_available() {
        let d = reclaim(Some(0), vec![vec![1; 16]]).unwrap();
        assert_eq!(
            (d.value, d.publish, d.freed, d.reply),
            (Some(1), Some(1), true, 1)
        );
        assert_eq!(d.remove, vec![vec![1; 16]]);
        assert_eq!(d.tally, Tally::PermitsReclaimed(1));
        assert_eq!(
            (d.serves(), d.publishes()),
            (true, Publish::Always),
            "served first, then announced"
        );
        let still_short = reclaim(Some(-3), vec![vec![1; 16]]).unwrap();
        assert_eq!((still_short.publish, still_short.freed), (None, false));
        assert_eq!(reclaim(Some(2), vec![]).unwrap(), SemDecision::nothing(0));
    }

    #[test]
    fn drain_takes_what_is_there() {
        assert_eq!(drain(Some(3)).value, Some(0));
        assert_eq!(drain(Some(3)).reply, 3);
        assert_eq!(drain(None), SemDecision::nothing(0));
        assert_eq!(drain(Some(0)), SemDecision::nothing(0));
        let negative = drain(Some(-2));
        assert_eq!(
            (negative.value, negative.reply),
            (Some(0), -2),
            "as Redisson's"
        );
    }

    #[test]
    fn non_expiring_permits_show_no_deadline() {
        assert_eq!(shown_deadline(NON_EXPIRING), -1);
        assert_eq!(shown_deadline(NOW), NOW);
    }
}
