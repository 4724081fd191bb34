//! Fencing tokens: the decisions, with no FFI.
//!
//! A lease cannot stop a holder that paused past it (GC, swap, a slow
//! network) from writing after someone else took the lock. A fencing token
//! can: every grant made with `LOCK.ACQUIRE ... TOKEN` returns a number
//! greater than every token the lock handed out before, and the protected
//! resource refuses a write whose token is lower than one it has already
//! seen (`LOCK.FENCE`, [`fence`]).
//!
//! ## Where tokens live
//! Redisson's `RFencedLock` layout: the counter is a plain string key,
//! `redisson_lock_token:{<key>}` (`redisson_lock_token:<key>` when the key
//! already has a `{`, Redisson's `prefixName` rule), raised on every grant
//! made with `TOKEN`, re-entry included. Redisson's script `INCR`s the same
//! key, so both share one sequence. The counter is in the lock key's cluster
//! slot only when the key's braces leave the hash tag alone; [`counter_key`]
//! refuses the keys where they do not.
//!
//! ## The token rule
//! A token is two numbers in one integer below 2^53:
//!
//! ```text
//! token = seq * 16 + node              (node in 0..16, the low 4 bits)
//! seq   = max(counter / 16 + 1,        the lock's counter, whoever wrote it
//!             now_ms * 128,            a floor taken from the server's clock
//!             last_seq[lock] + 1)      the highest seq this process issued
//!                                      for this lock (kept in 256 slots)
//! ```
//!
//! **Why no two grants of a lock share a token.**
//! * *Two grants by one node*, whatever happens to the counter in between
//!   (`DEL`, `FLUSHALL`, expiry, a script that does all that in one frozen
//!   millisecond): `seq` is above the process's high-water mark for the lock,
//!   so one node's `seq`s for a lock strictly increase for as long as the
//!   process runs. The marks live in 256 slots chosen by a hash of the
//!   counter's name and database: locks that share a slot only make each
//!   other's tokens larger. Across a restart the process is down for more
//!   than a millisecond, so the clock floor alone is above every `seq` it
//!   issued before (assumption 2 below).
//! * *Two nodes acting as master at once* (a split brain: an old master not
//!   demoted yet next to the replica Sentinel or the cluster promoted): their
//!   `node` numbers differ, so their tokens differ whatever their counters
//!   and clocks say. The node number is `lock.node-id` when the operator sets
//!   it (give every node of a replication group its own: then this holds for
//!   every pair), and otherwise derived from the replication IDs (see
//!   [`auto_node_id`]): a promoted replica takes a number different from the
//!   master it followed, which is the pair a failover creates.
//!
//! **Why tokens do not go backwards.**
//! * While the counter lives, `counter / 16 + 1` makes the next token greater
//!   than the counter, whichever node or Redisson's `INCR` wrote it (and
//!   Redisson's `INCR` after a module grant gives `token + 1`, greater).
//! * When the counter is lost (a failover that lost writes, an older RDB,
//!   `DEL`, expiry), the floor takes over: the last token was issued at a
//!   time `t_last` with `seq <= t_last * 128 + k`, `k` being how far that
//!   lock's grants ran ahead of the clock (more than 128 grants of one lock
//!   in one ms: re-entry in a tight pipeline, a script granting in a loop).
//!   Any grant at a later time `t` has `seq >= t * 128`, greater as soon as
//!   `t - t_last > k / 128` ms. A failover takes seconds
//!   (`cluster-node-timeout`, Sentinel's `down-after-milliseconds`).
//!
//! Assumptions, and what breaks them:
//! 1. **Clocks agree to better than a failover takes.** A new master's clock
//!    must read later than the old master's did at its last grant, for its
//!    tokens to be greater when the counter was lost too. NTP keeps clocks
//!    within milliseconds. (Uniqueness does not need this.)
//! 2. **A node's clock does not step back past a restart.** A process
//!    restarted with its clock set back can reissue, with its own node
//!    number, a `seq` it used before the restart if the counter was lost as
//!    well. While the process runs, a clock stepped back changes nothing.
//! 3. **Node numbers differ between nodes that act as master at once.** Set
//!    by the operator (`lock.node-id`), that is a configuration rule, and the
//!    guarantee. Derived automatically it is best effort: a promoted replica
//!    avoids the number its master derived from the ID the replica followed,
//!    but a master restarted from its AOF gets a new replication ID, and so
//!    does a master when it creates its backlog for a first replica; then
//!    the numbers of two masters at once (a restarted master and the replica
//!    promoted meanwhile) match with probability 1/15. The chaos test hit it
//!    once in 30 runs.
//! 4. **The counter outlives the time its token encodes** ([`counter_expiry`]).
//! 5. **Tokens come from the module.** Redisson's `RFencedLock` script `INCR`s
//!    the same counter: its tokens are greater than the last, but two masters
//!    in a split brain can `INCR` to the same number, and `counter + 1` may
//!    equal another node's token. Mixed deployments keep "greater than the
//!    last seen on this node", not uniqueness across nodes.
//!
//! **Size.** Tokens are about `3.7e15` (2026) and stay below 2^53 until the
//! year 2109, so they are exact in a double: in JavaScript, JSON parsers and,
//! above all, Lua, where Redis turns integer replies into doubles (Redisson's
//! own fenced script returns its token through Lua, and a script that passes
//! a token from `LOCK.ACQUIRE` to `LOCK.FENCE` would round it). That is why
//! the node number has 4 bits and the floor 128 `seq`s per ms, not more.
//! Tokens issued by the earlier rule (`max(counter + 1, now_ms * 1024)`,
//! about `1.8e15`) are all below the new ones, so an upgrade keeps order.
//!
//! The cluster's config epoch is not used: it orders failovers, but says
//! nothing about how far the old master's counter went, unless it is part of
//! every token, and it exists only in cluster mode.
//!
//! ## Counters do not pile up
//! A counter gets an expiry `lock.token-retention-ms` (1 day by default; 0 =
//! none, Redisson's behaviour) after the later of its lock's deadline and the
//! time its token encodes, so short-lived lock names leave nothing behind,
//! and the floor keeps the next token greater once it is gone. The module
//! never shortens a counter's life: one without expiry (Redisson's) keeps
//! none, and a later expiry someone set stays.

use crate::errors::{self, Refusal};
/// Redisson's prefix for a fenced lock's counter key.
pub const COUNTER_PREFIX: &[u8] = b"redisson_lock_token";

/// `seq` values per millisecond of the floor: `now_ms * 128` leaves room for
/// 128 grants of one lock per ms before its `seq`s run ahead of the clock.
pub const SEQ_PER_MS: i64 = 128;

/// The node number takes the low 4 bits of a token.
pub const NODE_BITS: u32 = 4;

/// How many node numbers there are: `lock.node-id` is `0..NODES`.
pub const NODES: i64 = 1 << NODE_BITS;

/// Writes the name of `lock`'s token counter into `name`, by Redisson's
/// `prefixName` rule, or says why it cannot be in the lock key's cluster slot.
///
/// Redis hashes the part between the first `{` and the next `}` when that is
/// non-empty, the whole key otherwise. `redisson_lock_token:{<key>}` hashes as
/// `<key>` when the key has no braces at all, and `redisson_lock_token:<key>`
/// keeps the key's own hash tag when it has a valid one. Every other key (a
/// `{` without a closing `}`, an empty `{}`, a `}` without `{`) would put the
/// counter in another slot, as would the empty key: refused, even outside a cluster, so a key that
/// works on one server works on a cluster too.
pub fn counter_key(lock: &[u8], name: &mut Vec<u8>) -> Result<(), Refusal> {
    let valid_tag = hash_tag_kept(lock).map_err(|why| refused(lock, why))?;
    name.clear();
    name.extend_from_slice(COUNTER_PREFIX);
    name.push(b':');
    if valid_tag {
        name.extend_from_slice(lock);
    } else {
        name.push(b'{');
        name.extend_from_slice(lock);
        name.push(b'}');
    }
    Ok(())
}

/// Whether a key named from `key` by Redisson's rules (`prefixName`,
/// `suffixName`) lands in `key`'s cluster slot: `Ok(true)` when `key` has a
/// valid hash tag (kept as it is), `Ok(false)` when it has no braces at all
/// (they are added around it), and otherwise why not (a `{` without a
/// closing `}`, an empty `{}`, a `}` without `{`, the empty key).
pub fn hash_tag_kept(key: &[u8]) -> Result<bool, &'static str> {
    match key.iter().position(|&b| b == b'{') {
        // `{}` would be an empty hash tag.
        None if key.is_empty() => Err("is empty"),
        None if !key.contains(&b'}') => Ok(false),
        None => Err("has a '}' without a '{'"),
        Some(open) => match key[open + 1..].iter().position(|&b| b == b'}') {
            Some(len) if len > 0 => Ok(true),
            Some(_) => Err("has an empty hash tag '{}'"),
            None => Err("has a '{' without a closing '}'"),
        },
    }
}

fn refused(lock: &[u8], why: &str) -> Refusal {
    errors::counter_elsewhere(lock, why)
}

/// Why a token cannot be issued; nothing is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenError {
    /// The next token would not fit an `i64` (the counter is near `i64::MAX`).
    Overflow,
}

/// The floor every `seq` is at least: the clock, [`SEQ_PER_MS`] per ms.
pub fn floor(now_ms: i64) -> i64 {
    now_ms.max(0).saturating_mul(SEQ_PER_MS)
}

/// A token made: the token, and its `seq` (the node's new high-water mark).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Issued {
    pub token: i64,
    pub seq: i64,
}

/// The next token of node `node` (`0..NODES`): greater than the counter,
/// its `seq` at least the clock's floor and above `last_seq`, the highest
/// `seq` this process issued (see the rule at the top of this file).
pub fn next_token(
    counter: Option<i64>,
    now_ms: i64,
    last_seq: i64,
    node: i64,
) -> Result<Issued, TokenError> {
    let after_counter = match counter {
        Some(value) => value.div_euclid(NODES) + 1,
        None => 0,
    };
    let seq = after_counter
        .max(floor(now_ms))
        .max(last_seq.checked_add(1).ok_or(TokenError::Overflow)?);
    let token = seq
        .checked_mul(NODES)
        .and_then(|t| t.checked_add(node.rem_euclid(NODES)))
        .ok_or(TokenError::Overflow)?;
    Ok(Issued { token, seq })
}

/// The node number derived from the replication IDs, when `lock.node-id` is
/// not set: a hash of this node's `master_replid` (its own replication ID
/// when it is a master), moved on by one when it equals the hash of
/// `master_replid2`.
///
/// A replica promoted by Sentinel, `REPLICAOF NO ONE` or a cluster failover
/// gets a new random ID and keeps the old master's as `master_replid2`: the
/// two differ however the hashes fall, as long as the old master derived
/// its number from that same ID. A master restarted, or one that created
/// its backlog after it derived its number, has another ID: then the two
/// differ with probability 14/15 only (`lock.node-id` is the guarantee).
pub fn auto_node_id(replid: &[u8], replid2: Option<&[u8]>) -> i64 {
    let own = hash_node(replid);
    match replid2.filter(|id| !is_null_replid(id)) {
        Some(previous) if hash_node(previous) == own => (own + 1) % NODES,
        _ => own,
    }
}

/// A replication ID folded to a node number.
fn hash_node(id: &[u8]) -> i64 {
    (hash_bytes(id) % NODES as u64) as i64
}

/// A small, stable hash (FNV-1a's constants, eight bytes at a step), for
/// node numbers and high-water slots: it runs on every fenced grant.
pub fn hash_bytes(bytes: &[u8]) -> u64 {
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    let step = |hash: u64, word: u64| (hash ^ word).wrapping_mul(PRIME).rotate_left(23);
    let mut chunks = bytes.chunks_exact(8);
    let mut hash = chunks.by_ref().fold(0xcbf2_9ce4_8422_2325, |hash, chunk| {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        step(hash, u64::from_le_bytes(word))
    });
    for &byte in chunks.remainder() {
        hash = step(hash, u64::from(byte));
    }
    // Spread the high bits down: callers take the hash modulo small numbers.
    (hash ^ (hash >> 32)).wrapping_mul(PRIME) ^ (hash >> 29)
}

/// Redis shows "no previous ID" as forty zeros.
fn is_null_replid(id: &[u8]) -> bool {
    id.is_empty() || id.iter().all(|&b| b == b'0')
}

/// A string key's expiry, as read before a write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expiry {
    /// The key does not exist.
    Absent,
    /// It exists without expiry.
    Never,
    /// It expires at this unix ms.
    At(i64),
}

/// The counter's expiry after issuing `token` for a lock whose lease ends at
/// `lock_deadline`: `None` = no expiry.
///
/// With a retention, the counter lives `retention_ms` past the later of the
/// lease and the moment the clock passes the token (`token / 16 / 128 + 1`), so
/// the floor alone is above it once the counter is gone, rounded up to a
/// whole second: grants in the same second leave the expiry as it is, which
/// saves rewriting it. It is never made shorter than it was: a counter
/// without expiry keeps none, a later expiry stays. Without retention (0),
/// the module sets no expiry of its own.
pub fn counter_expiry(
    token: i64,
    lock_deadline: i64,
    before: Expiry,
    retention_ms: i64,
) -> Option<i64> {
    if retention_ms <= 0 {
        return match before {
            Expiry::At(at) => Some(at),
            Expiry::Absent | Expiry::Never => None,
        };
    }
    let clock_passes_token = (token / NODES / SEQ_PER_MS).saturating_add(1);
    let wanted = round_up_to_second(
        lock_deadline
            .max(clock_passes_token)
            .saturating_add(retention_ms),
    );
    match before {
        Expiry::Absent => Some(wanted),
        Expiry::Never => None,
        Expiry::At(at) => Some(at.max(wanted)),
    }
}

fn round_up_to_second(ms: i64) -> i64 {
    match ms % 1000 {
        0 => ms,
        rest => ms.saturating_add(1000 - rest),
    }
}

/// What `LOCK.FENCE` decides for `token`, given the highest token the
/// resource has seen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fence {
    /// Not older than any seen: the write may go on; record `token` if it is
    /// higher than what was seen.
    Pass { record: bool },
    /// Older than `seen`: refuse the write.
    Stale { seen: i64 },
}

/// Redisson's rule for resources: accept a token greater than or equal to
/// the last one seen (a holder writes several times with its token), refuse
/// a lower one. Equal passes safely because no two grants share a token
/// (the rule at the top of this file): an equal token is the same grant
/// writing again, never another holder, so the fence needs no owner.
pub fn fence(seen: Option<i64>, token: i64) -> Fence {
    match seen {
        Some(seen) if token < seen => Fence::Stale { seen },
        Some(seen) => Fence::Pass {
            record: token > seen,
        },
        None => Fence::Pass { record: true },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counter_key(lock: &[u8]) -> Result<Vec<u8>, Refusal> {
        let mut name = Vec::new();
        super::counter_key(lock, &mut name).map(|()| name)
    }

    /// Redis's cluster hash tag: what part of `key` the slot is computed on.
    fn hashed(key: &[u8]) -> &[u8] {
        if let Some(open) = key.iter().position(|&b| b == b'{') {
            if let Some(len) = key[open + 1..].iter().position(|&b| b == b'}') {
                if len > 0 {
                    return &key[open + 1..open + 1 + len];
                }
            }
        }
        key
    }

    #[test]
    fn counter_names_follow_redissons_prefix_name_rule() {
        assert_eq!(
            counter_key(b"lock").unwrap(),
            b"redisson_lock_token:{lock}".to_vec()
        );
        assert_eq!(
            counter_key(b"{orders}:42").unwrap(),
            b"redisson_lock_token:{orders}:42".to_vec()
        );
        assert_eq!(
            counter_key(b"a:{b}:c").unwrap(),
            b"redisson_lock_token:a:{b}:c".to_vec()
        );
    }

    #[test]
    fn every_accepted_key_shares_its_slot_with_its_counter() {
        for key in [
            &b"lock"[..],
            b"{orders}:42",
            b"x{y}z{w}",
            b"a{b}}",
            b"\x00bin",
        ] {
            let counter = counter_key(key).unwrap();
            assert_eq!(hashed(&counter), hashed(key), "{key:?}");
        }
    }

    #[test]
    fn keys_whose_braces_would_move_the_counter_are_refused() {
        for (key, why) in [
            (&b"a{b"[..], "without a closing"),
            (b"{}x", "empty hash tag"),
            (b"a}b", "without a '{'"),
            (b"", "is empty"),
        ] {
            let err = counter_key(key).unwrap_err();
            assert!(err.starts_with("ERR TOKEN"), "{err}");
            assert!(err.contains(why), "{err}");
            // Without the refusal the counter would indeed land elsewhere.
            let mut naive = b"redisson_lock_token:".to_vec();
            if key.contains(&b'{') {
                naive.extend_from_slice(key);
            } else {
                naive.extend_from_slice(&[b"{", key, b"}"].concat());
            }
            assert_ne!(hashed(&naive), hashed(key));
        }
    }

    const NOW: i64 = 1_700_000_000_000;

    /// A node in tests: its counter view, its high-water mark, its number.
    struct Node {
        last_seq: i64,
        id: i64,
    }

    impl Node {
        fn new(id: i64) -> Node {
            Node { last_seq: 0, id }
        }

        fn grant(&mut self, counter: &mut Option<i64>, now: i64) -> i64 {
            let issued = next_token(*counter, now, self.last_seq, self.id).unwrap();
            self.last_seq = self.last_seq.max(issued.seq);
            *counter = Some(issued.token);
            issued.token
        }
    }

    #[test]
    fn a_token_is_above_the_counter_and_the_clock_and_carries_the_node() {
        let t = next_token(None, NOW, 0, 5).unwrap();
        assert_eq!(
            t,
            Issued {
                token: NOW * 128 * 16 + 5,
                seq: NOW * 128
            }
        );
        assert_eq!(next_token(Some(5), NOW, 0, 5).unwrap(), t, "Redisson's 5");
        let ahead = (NOW * 128 + 7) * 16 + 9;
        let next = next_token(Some(ahead), NOW, 0, 5).unwrap();
        assert_eq!(next.token, (NOW * 128 + 8) * 16 + 5);
        assert!(next.token > ahead);
        // Redisson's INCR after a module grant gives a greater token, and the
        // module's next grant is greater again.
        let incr = next.token + 1;
        assert!(next_token(Some(incr), NOW, next.seq, 5).unwrap().token > incr);
        assert_eq!(
            next_token(None, -5, 0, 0).unwrap().token,
            16,
            "a clock before 1970: seq 1, positive"
        );
    }

    #[test]
    fn two_masters_with_one_counter_in_one_ms_give_different_tokens() {
        // A split brain: the old master and the promoted replica share the
        // replicated counter and read the same clock.
        let counter = Some((NOW * 128) * 16 + 3);
        let (old, new) = (
            auto_node_id(b"aaaa", None),
            auto_node_id(b"bbbb", Some(b"aaaa")),
        );
        let a = next_token(counter, NOW, 0, old).unwrap();
        let b = next_token(counter, NOW, 0, new).unwrap();
        assert_eq!(a.seq, b.seq, "the same seq...");
        assert_ne!(a.token, b.token, "...but not the same token");
    }

    #[test]
    fn a_counter_deleted_in_the_same_ms_gives_no_token_twice() {
        let mut node = Node::new(9);
        let mut seen = std::collections::HashSet::new();
        for round in 0..3_000 {
            let mut counter = if round % 3 == 0 { None } else { Some(17) };
            assert!(seen.insert(node.grant(&mut counter, NOW)), "round {round}");
        }
    }

    #[test]
    fn tokens_grow_through_bursts_and_a_clock_stepped_back() {
        let mut node = Node::new(1);
        let mut counter = None;
        let mut last = 0;
        // 5,000 grants in one frozen ms, then the clock steps back 10 s.
        for now in std::iter::repeat_n(NOW, 5_000).chain(std::iter::repeat_n(NOW - 10_000, 10)) {
            let token = node.grant(&mut counter, now);
            assert!(token > last);
            last = token;
        }
    }

    #[test]
    fn a_lost_counter_is_made_up_for_by_a_later_clock() {
        // The old master's last token, after a burst running 3 ms ahead.
        let last = (NOW * 128 + 3 * 128) * 16 + 15;
        // The new master has an older counter; its clock is 4 ms later.
        let new = auto_node_id(b"new", Some(b"old"));
        assert!(next_token(Some(12), NOW + 4, 0, new).unwrap().token > last);
        assert!(next_token(None, NOW + 4, 0, new).unwrap().token > last);
    }

    #[test]
    fn a_counter_near_the_top_overflows_rather_than_wrapping() {
        for counter in [i64::MAX, i64::MAX - 5, i64::MAX / 16 * 16] {
            assert_eq!(
                next_token(Some(counter), NOW, 0, 3),
                Err(TokenError::Overflow),
                "{counter}"
            );
        }
        assert_eq!(
            next_token(None, NOW, i64::MAX, 3),
            Err(TokenError::Overflow)
        );
        // The last token that fits.
        let top = next_token(Some(i64::MAX - 31), NOW, 0, 15).unwrap();
        assert_eq!(top.token, i64::MAX);
    }

    #[test]
    fn a_promoted_replica_never_takes_its_old_masters_number() {
        let hex = |n: u64| format!("{n:040x}");
        for n in 1..5_000u64 {
            let (master, promoted) = (hex(n * 7919), hex(n * 104_729 + 1));
            let old = auto_node_id(master.as_bytes(), None);
            let new = auto_node_id(promoted.as_bytes(), Some(master.as_bytes()));
            assert_ne!(old, new, "{master} -> {promoted}");
            assert!((0..NODES).contains(&new));
        }
        let zeros = "0".repeat(40);
        assert_eq!(
            auto_node_id(b"abc", Some(zeros.as_bytes())),
            auto_node_id(b"abc", None),
            "forty zeros mean no previous ID"
        );
    }

    #[test]
    fn tokens_stay_exact_in_a_double_until_2109() {
        let year_2109 = 4_386_000_000_000; // ms, early 2109
        let token = next_token(None, year_2109, 0, 15).unwrap().token;
        assert!(token < 1 << 53, "{token}");
    }

    #[test]
    fn tokens_of_the_earlier_rule_are_below_every_new_one() {
        let earlier = NOW * 1024 + 5_000; // max(counter + 1, now_ms * 1024)
        assert!(next_token(Some(earlier), NOW, 0, 0).unwrap().token > earlier);
        assert!(next_token(None, NOW, 0, 0).unwrap().token > earlier);
    }

    #[test]
    fn counters_expire_after_the_lease_and_the_token_time() {
        let day = 86_400_000;
        let token = NOW * 128 * 16 + 7;
        assert_eq!(
            counter_expiry(token, NOW + 30_000, Expiry::Absent, day),
            Some(NOW + 30_000 + day),
            "NOW is a whole second"
        );
        assert_eq!(
            counter_expiry(token, NOW + 30_001, Expiry::Absent, day),
            Some(NOW + 31_000 + day),
            "rounded up to the second"
        );
        // A token ahead of the clock keeps the counter until the clock passes it.
        let ahead = (NOW + 60_000) * 128 * 16;
        assert_eq!(
            counter_expiry(ahead, NOW + 30_000, Expiry::Absent, day),
            Some(NOW + 61_000 + day)
        );
        // Never shorter than before.
        assert_eq!(
            counter_expiry(token, NOW, Expiry::At(NOW + 2 * day), day),
            Some(NOW + 2 * day)
        );
        assert_eq!(counter_expiry(token, NOW, Expiry::Never, day), None);
        // Retention 0: no expiry of the module's own.
        assert_eq!(counter_expiry(token, NOW, Expiry::Absent, 0), None);
        assert_eq!(
            counter_expiry(token, NOW, Expiry::At(NOW + 5), 0),
            Some(NOW + 5)
        );
        assert_eq!(
            counter_expiry(i64::MAX, i64::MAX, Expiry::Absent, day),
            Some(i64::MAX)
        );
    }

    #[test]
    fn a_fence_passes_equal_and_newer_tokens_and_refuses_older_ones() {
        assert_eq!(fence(None, 3), Fence::Pass { record: true });
        assert_eq!(fence(Some(3), 3), Fence::Pass { record: false });
        assert_eq!(fence(Some(3), 4), Fence::Pass { record: true });
        assert_eq!(fence(Some(3), 2), Fence::Stale { seen: 3 });
    }
}
