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
use crate::ffi::key::{Key, KeyKind};
use crate::ffi::{Ctx, OwnedStr, RStr};
use crate::rwlock_key::hold_prefix;
use crate::semaphore::{parse_value, PermitId, SemDecision, NON_EXPIRING};
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

/// A semaphore's keys, opened by a command or the queue.
pub struct SemaphoreKeys<'a> {
    value: ValueKey<'a>,
    permits_name: OwnedStr,
    write: bool,
}

impl<'a> SemaphoreKeys<'a> {
    /// Opens `name`'s keys. Refuses either key holding another type.
    pub fn open(ctx: Ctx<'a>, name: RStr<'a>, write: bool) -> Result<SemaphoreKeys<'a>, Refusal> {
        let value = ValueKey::open(ctx, name, write)?;
        let keys = SemaphoreKeys {
            value,
            permits_name: OwnedStr::new(&permits_key_name(name.as_bytes())),
            write,
        };
        keys.with_permits(|set| match set.kind() {
            KeyKind::Empty | KeyKind::SortedSet => Ok(()),
            _ => Err(errors::WRONGTYPE),
        })?;
        Ok(keys)
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

    fn with_permits<T>(&self, f: impl FnOnce(&Key) -> T) -> T {
        let set = Key::open(self.ctx(), self.permits_name.borrow(), self.write);
        f(&set)
    }

    /// Leased permits whose deadline is `now` or earlier, at most
    /// [`RECLAIM_BATCH`].
    pub fn expired(&self, now: i64) -> Vec<Vec<u8>> {
        self.with_permits(|set| {
            set.zset_range_by_score(f64::NEG_INFINITY, now as f64, RECLAIM_BATCH)
                .into_iter()
                .map(|(member, _)| member)
                .collect()
        })
    }

    /// The earliest deadline of a leased permit that expires.
    pub fn next_deadline(&self) -> Option<i64> {
        self.with_permits(|set| {
            set.zset_range_by_score(f64::NEG_INFINITY, (NON_EXPIRING - 1) as f64, 1)
                .first()
                .map(|(_, score)| *score as i64)
        })
    }

    /// The deadline of permit `id`, if it is in the set.
    pub fn deadline_of(&self, id: &PermitId) -> Option<i64> {
        let member = OwnedStr::new(id);
        self.with_permits(|set| set.zset_score(member.borrow()).map(|s| s as i64))
    }

    /// Every leased permit with its deadline, lowest first, at most `limit`.
    pub fn permits(&self, limit: usize) -> Vec<(Vec<u8>, i64)> {
        self.with_permits(|set| {
            set.zset_range_by_score(f64::NEG_INFINITY, f64::INFINITY, limit)
                .into_iter()
                .map(|(member, score)| (member, score as i64))
                .collect()
        })
    }

    /// Gives permit `id` the deadline `at` (it is in the set).
    pub fn set_deadline(&self, id: &PermitId, at: i64) {
        let member = OwnedStr::new(id);
        let score = OwnedStr::from_i64(at);
        self.with_permits(|set| set.zset_add(at as f64, member.borrow()));
        self.ctx().replicate_command(
            c"ZADD",
            &[self.permits_name.borrow(), score.borrow(), member.borrow()],
        );
        self.ctx().signal_modified(self.permits_name.borrow());
    }

    /// Carries out `decision`'s writes on the keys, replicating each.
    pub fn apply<R>(&self, decision: &SemDecision<R>) {
        if let Some(value) = decision.value {
            self.value.set_keep_ttl(value);
        }
        if !decision.remove.is_empty() {
            let members: Vec<OwnedStr> = decision.remove.iter().map(|m| OwnedStr::new(m)).collect();
            self.with_permits(|set| {
                for member in &members {
                    set.zset_rem(member.borrow());
                }
            });
            let mut args = vec![self.permits_name.borrow()];
            args.extend(members.iter().map(OwnedStr::borrow));
            self.ctx().replicate_command(c"ZREM", &args);
        }
        if !decision.add.is_empty() {
            let mut args = vec![self.permits_name.borrow()];
            let added: Vec<(OwnedStr, OwnedStr)> = decision
                .add
                .iter()
                .map(|(id, at)| (OwnedStr::from_i64(*at), OwnedStr::new(id)))
                .collect();
            self.with_permits(|set| {
                for ((_, member), (_, at)) in added.iter().zip(&decision.add) {
                    set.zset_add(*at as f64, member.borrow());
                }
            });
            for (score, member) in &added {
                args.push(score.borrow());
                args.push(member.borrow());
            }
            self.ctx().replicate_command(c"ZADD", &args);
            if let Some(at) = self.value.deadline_ms() {
                self.with_permits(|set| set.set_abs_expire_ms(at));
                self.ctx()
                    .replicate_pexpireat(self.permits_name.borrow(), at);
            }
        }
        if !decision.remove.is_empty() || !decision.add.is_empty() {
            self.ctx().signal_modified(self.permits_name.borrow());
        }
    }
}
