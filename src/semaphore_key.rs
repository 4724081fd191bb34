//! A semaphore's keys: the one place that reads and writes them.
//!
//! The available permits are the string `name` (`value_key.rs`); leased
//! permits are members of the sorted set `{name}:timeout` (Redisson's
//! `suffixName`), each member a permit id's 16 raw bytes scored by its
//! deadline on the server's clock. [`SemaphoreKeys::apply`] carries out a
//! [`SemDecision`] and replicates each effect as a plain command:
//!
//! | effect | replicated as |
//! |---|---|
//! | new value | `SET name n KEEPTTL` |
//! | permits added | `ZADD {name}:timeout at id`, then `PEXPIREAT {name}:timeout at` when `name` has an expiry (Redisson copies it) |
//! | permits removed | `ZREM {name}:timeout id...` |
//! | a lease changed | `ZADD {name}:timeout at id` |

use crate::errors::{self, Refusal};
use crate::fencing;
use crate::ffi::key::{Key, KeyKind, OpenMode};
use crate::ffi::{Ctx, OwnedStr, RStr};
use crate::rwlock_key::hold_prefix;
use crate::semaphore::{parse_value, PermitId, SemDecision};
use crate::value_key::ValueKey;

/// The most expired permits one reclaim takes (a set filled by someone
/// else could be huge; the rest go at the next look, a moment later).
pub const RECLAIM_BATCH: usize = 1_000;

/// The name of `name`'s leased-permit set: `{name}:timeout`.
pub fn permits_key_name(name: &[u8]) -> Vec<u8> {
    let mut key = hold_prefix(name);
    key.extend_from_slice(b":timeout");
    key
}

/// Refuses a semaphore name whose leased-permit set would be in another
/// cluster slot (Redisson's `suffixName` keeps the slot only for a name
/// without braces or with a valid hash tag). Refused on every server, so a
/// name that works on one works on a cluster too.
pub fn check_permits_slot(name: RStr) -> Result<(), Refusal> {
    fencing::hash_tag_kept(name.as_bytes())
        .map(|_| ())
        .map_err(|why| errors::permits_elsewhere(name.as_bytes(), why))
}

/// The semaphores whose leased-permit set `key` may be: `name` for
/// `{name}:timeout`, and `name` for `name:timeout` when `name` has a `{`
/// (`{a}:timeout` is both `a`'s and `{a}`'s).
pub fn semaphores_of_permits_key(key: &[u8]) -> Vec<&[u8]> {
    let Some(prefix) = key.strip_suffix(b":timeout") else {
        return Vec::new();
    };
    let mut names = Vec::new();
    if let [b'{', name @ .., b'}'] = prefix {
        if !name.contains(&b'{') {
            names.push(name);
        }
    }
    if prefix.contains(&b'{') {
        names.push(prefix);
    }
    names
}

/// The names of a semaphore's two keys. The set's name is made, not given:
/// whoever opens the keys holds this for as long as they are open.
pub struct SemaphoreNames<'a> {
    value: RStr<'a>,
    permits: OwnedStr,
}

impl<'a> SemaphoreNames<'a> {
    pub fn of(name: RStr<'a>) -> SemaphoreNames<'a> {
        SemaphoreNames {
            value: name,
            permits: OwnedStr::new(&permits_key_name(name.as_bytes())),
        }
    }
}

/// A semaphore's keys, opened by a command or the queue: one handle each
/// for the whole call (Redis keeps a handle valid when the set it holds is
/// emptied and deleted, and a later write recreates it).
pub struct SemaphoreKeys<'a> {
    value: ValueKey<'a>,
    permits: Key<'a>,
}

impl<'a> SemaphoreKeys<'a> {
    /// Opens the keys of `names`. Refuses either key holding another type.
    pub fn open(
        ctx: Ctx<'a>,
        names: &'a SemaphoreNames<'a>,
        mode: OpenMode,
    ) -> Result<SemaphoreKeys<'a>, Refusal> {
        let value = ValueKey::open(ctx, names.value, mode)?;
        let permits = Key::open(ctx, names.permits.borrow(), mode);
        match permits.kind() {
            KeyKind::Empty | KeyKind::SortedSet => Ok(SemaphoreKeys { value, permits }),
            _ => Err(errors::WRONGTYPE),
        }
    }

    pub fn name(&self) -> RStr<'a> {
        self.value.name()
    }

    pub fn ctx(&self) -> Ctx<'a> {
        self.value.ctx()
    }

    /// Available permits (`None`: no semaphore).
    pub fn value(&self) -> Result<Option<i64>, Refusal> {
        self.value.get(parse_value)
    }

    /// Creates the value `count` with the absolute expiry `at` (`LOCK.SEMSET
    /// ... PX`), replicated as `SET name count PXAT at`.
    pub fn create_with_expiry(&self, count: i64, at: Option<i64>) {
        self.value.set_with_expiry(count, at);
    }

    /// Remaining time to live of the value key, as `PTTL` answers.
    pub fn ttl_ms(&self) -> i64 {
        self.value.ttl_ms()
    }

    fn permits_name(&self) -> RStr<'a> {
        self.permits.name()
    }

    /// Whether no leased permit is held.
    pub fn no_leases(&self) -> bool {
        self.permits.kind() == KeyKind::Empty
    }

    /// Leased permits whose deadline is `now` or earlier, at most
    /// [`RECLAIM_BATCH`].
    pub fn expired(&self, now: i64) -> Vec<Vec<u8>> {
        self.permits
            .zset_range_by_score(f64::NEG_INFINITY, now as f64, RECLAIM_BATCH)
            .into_iter()
            .map(|(member, _)| member)
            .collect()
    }

    /// The earliest deadline in the set (the never-expiring score when only
    /// such permits are left); `None` when no permit is leased.
    pub fn earliest_deadline(&self) -> Option<i64> {
        self.permits
            .zset_range_by_score(f64::NEG_INFINITY, f64::INFINITY, 1)
            .first()
            .map(|(_, score)| *score as i64)
    }

    /// The deadline of permit `id`, if it is in the set.
    pub fn deadline_of(&self, id: &PermitId) -> Option<i64> {
        let member = OwnedStr::new(id);
        self.permits.zset_score(member.borrow()).map(|s| s as i64)
    }

    /// Every leased permit with its deadline, lowest first, at most `limit`.
    pub fn permits(&self, limit: usize) -> Vec<(Vec<u8>, i64)> {
        self.permits
            .zset_range_by_score(f64::NEG_INFINITY, f64::INFINITY, limit)
            .into_iter()
            .map(|(member, score)| (member, score as i64))
            .collect()
    }

    /// Gives permit `id` the deadline `at` (it is in the set).
    pub fn set_deadline(&self, id: &PermitId, at: i64) {
        let member = OwnedStr::new(id);
        let score = OwnedStr::from_i64(at);
        self.permits.zset_add(at as f64, member.borrow());
        self.ctx().replicate_command(
            c"ZADD",
            &[self.permits_name(), score.borrow(), member.borrow()],
        );
        self.ctx().signal_modified(self.permits_name());
    }

    /// Carries out `decision`'s writes on the keys, replicating each.
    pub fn apply<R>(&self, decision: &SemDecision<R>) {
        if let Some(value) = decision.value {
            self.value.set_keep_ttl(value);
        }
        if !decision.remove.is_empty() {
            let members: Vec<OwnedStr> = decision.remove.iter().map(|m| OwnedStr::new(m)).collect();
            for member in &members {
                self.permits.zset_rem(member.borrow());
            }
            let mut args = vec![self.permits_name()];
            args.extend(members.iter().map(OwnedStr::borrow));
            self.ctx().replicate_command(c"ZREM", &args);
        }
        if !decision.add.is_empty() {
            let mut args = vec![self.permits_name()];
            let added: Vec<(OwnedStr, OwnedStr)> = decision
                .add
                .iter()
                .map(|(id, at)| (OwnedStr::from_i64(*at), OwnedStr::new(id)))
                .collect();
            for ((_, member), (_, at)) in added.iter().zip(&decision.add) {
                self.permits.zset_add(*at as f64, member.borrow());
            }
            for (score, member) in &added {
                args.push(score.borrow());
                args.push(member.borrow());
            }
            self.ctx().replicate_command(c"ZADD", &args);
            if let Some(at) = self.value.deadline_ms() {
                self.permits.set_abs_expire_ms(at);
                self.ctx().replicate_pexpireat(self.permits_name(), at);
            }
        }
        if !decision.remove.is_empty() || !decision.add.is_empty() {
            self.ctx().signal_modified(self.permits_name());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_permit_set_leads_back_to_its_semaphore() {
        for name in [&b"s"[..], b"{s}", b"a{b}c", b"x:y"] {
            let key = permits_key_name(name);
            assert!(semaphores_of_permits_key(&key).contains(&name), "{name:?}");
        }
        assert!(
            semaphores_of_permits_key(b"s:timeout").is_empty(),
            "not a permit set"
        );
        assert!(semaphores_of_permits_key(b"{s}:other").is_empty());
    }
}
