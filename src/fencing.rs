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
//! ## Why tokens never go backwards
//! A counter alone is not enough: a failover to a replica that missed the
//! last grants, a restart from an older RDB, a `DEL` of the counter or its
//! expiry would all restart it below tokens already handed out (Redisson's
//! `INCR` does exactly that). So every token is also at least a **floor taken
//! from the server's clock**, `unix ms x 1024`:
//!
//! ```text
//! token = max(counter + 1, now_ms * 1024)
//! ```
//!
//! * While the counter survives, `counter + 1` makes each token greater than
//!   the last, whatever the clock does.
//! * When it is lost, the last token handed out was at most
//!   `t_last * 1024 + k`, where `t_last` is the time of the last grant and `k`
//!   how far grants ran ahead of the clock (more than 1,024 grants of one lock
//!   in one ms: a Lua script re-entering in a loop, with time frozen).
//!   Any grant at a later time `t` gives at least `t * 1024`, which is greater
//!   as soon as `t - t_last > k / 1024` ms. A failover takes seconds
//!   (`cluster-node-timeout`, Sentinel's `down-after-milliseconds`), a restart
//!   takes at least as long as the process is down.
//! * The floor is taken on **every** grant, not only when a node becomes a
//!   master or loads data: that covers every way to lose the counter (a
//!   promotion, an older RDB, `DEL`, `FLUSHALL`, expiry) with one rule and no
//!   state to keep across restarts.
//!
//! Assumptions, and what breaks them:
//! 1. **Clocks agree to better than a failover takes.** The new master's clock
//!    must read later than the old master's did at its last grant. NTP keeps
//!    them within milliseconds; a replica whose clock is behind by more than
//!    the failover took can reissue tokens the old master used, if the
//!    counter was lost too.
//! 2. **A node's clock does not step back past a lost counter.** Setting a
//!    clock back by an hour and then losing the counter (DEL, failover with
//!    lost writes) can reissue the last hour's tokens. While the counter
//!    lives, a clock stepped back changes nothing.
//! 3. **The counter outlives the time its token encodes.** A token issued
//!    with a clock running ahead, or by a burst of more than 1,024 grants in a
//!    ms, is above `now * 1024` for a while; the counter is kept at least
//!    until the clock has passed it ([`counter_expiry`]).
//!
//! The cluster's config epoch is not used: it orders failovers, but says
//! nothing about how far the old master's counter went, unless it is part of
//! every token (its top bits), which would leave 12 bits after the clock's 51,
//! 4,096 failovers over a cluster's life, and tie tokens to cluster mode.
//!
//! Tokens are about `1.8e15` today (below 2^53 until the year 2248, so they
//! stay exact in JavaScript and JSON doubles), not 1, 2, 3 as Redisson's.
//!
//! ## Counters do not pile up
//! A counter gets an expiry `lock.token-retention-ms` (1 day by default; 0 =
//! none, Redisson's behaviour) after the later of its lock's deadline and the
//! time its token encodes, so short-lived lock names leave nothing behind,
//! and the floor keeps the next token greater once it is gone. The module
//! never shortens a counter's life: one without expiry (Redisson's) keeps
//! none, and a later expiry someone set stays.

/// Redisson's prefix for a fenced lock's counter key.
pub const COUNTER_PREFIX: &[u8] = b"redisson_lock_token";

/// Tokens per millisecond of the floor: `now_ms * 1024` leaves room for
/// 1,024 grants of one lock per ms before tokens run ahead of the clock.
pub const TOKENS_PER_MS: i64 = 1024;

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
pub fn counter_key(lock: &[u8], name: &mut Vec<u8>) -> Result<(), String> {
    let valid_tag = match lock.iter().position(|&b| b == b'{') {
        // `{}` would be an empty hash tag.
        None if lock.is_empty() => return Err(refused(lock, "is empty")),
        None if !lock.contains(&b'}') => false,
        None => return Err(refused(lock, "has a '}' without a '{'")),
        Some(open) => match lock[open + 1..].iter().position(|&b| b == b'}') {
            Some(len) if len > 0 => true,
            Some(_) => return Err(refused(lock, "has an empty hash tag '{}'")),
            None => return Err(refused(lock, "has a '{' without a closing '}'")),
        },
    };
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

fn refused(lock: &[u8], why: &str) -> String {
    format!(
        "ERR TOKEN needs the token counter in the lock's cluster slot, and key '{}' {why}: \
         use a key without braces or with a non-empty hash tag such as '{{orders}}:42'",
        String::from_utf8_lossy(lock).escape_debug()
    )
}

/// Why a token cannot be issued; nothing is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TokenError {
    /// The counter (or fence) holds `i64::MAX`.
    Overflow,
}

/// The floor every token is at least: the clock, `TOKENS_PER_MS` per ms.
pub fn floor(now_ms: i64) -> i64 {
    now_ms.max(0).saturating_mul(TOKENS_PER_MS)
}

/// The next token: greater than the counter, and at least the clock's floor.
pub fn next_token(counter: Option<i64>, now_ms: i64) -> Result<i64, TokenError> {
    let after_counter = match counter {
        Some(value) => value.checked_add(1).ok_or(TokenError::Overflow)?,
        None => 1,
    };
    Ok(after_counter.max(floor(now_ms)))
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
/// lease and the moment the clock passes the token (`token / 1024 + 1`), so
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
    let clock_passes_token = (token / TOKENS_PER_MS).saturating_add(1);
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
/// a lower one.
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

    fn counter_key(lock: &[u8]) -> Result<Vec<u8>, String> {
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

    #[test]
    fn a_token_is_above_the_counter_and_the_clock() {
        assert_eq!(next_token(None, NOW), Ok(NOW * 1024));
        assert_eq!(next_token(Some(5), NOW), Ok(NOW * 1024), "Redisson's 5");
        let ahead = NOW * 1024 + 7;
        assert_eq!(next_token(Some(ahead), NOW), Ok(ahead + 1));
        assert_eq!(next_token(Some(i64::MAX), NOW), Err(TokenError::Overflow));
        assert_eq!(next_token(None, -5), Ok(1), "a clock before 1970");
    }

    #[test]
    fn tokens_grow_through_bursts_and_a_clock_stepped_back() {
        let mut counter = None;
        let mut last = 0;
        // 5,000 grants in one frozen ms, then the clock steps back 10 s.
        for now in std::iter::repeat_n(NOW, 5_000).chain(std::iter::repeat_n(NOW - 10_000, 10)) {
            let token = next_token(counter, now).unwrap();
            assert!(token > last);
            last = token;
            counter = Some(token);
        }
    }

    #[test]
    fn a_lost_counter_is_made_up_for_by_a_later_clock() {
        // The old master's last token, after a burst running 3 ms ahead.
        let last = NOW * 1024 + 3 * 1024;
        // The new master has an older counter; its clock is 4 ms later.
        assert!(next_token(Some(12), NOW + 4).unwrap() > last);
        assert!(next_token(None, NOW + 4).unwrap() > last);
    }

    #[test]
    fn counters_expire_after_the_lease_and_the_token_time() {
        let day = 86_400_000;
        let token = NOW * 1024;
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
        let ahead = (NOW + 60_000) * 1024;
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
