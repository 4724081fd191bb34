//! A read-write lock's keys: the one place that reads and writes them.
//!
//! Reads produce the [`RwView`] (and, for releases and renewals, the other
//! holders' deadlines) that `rwlock.rs` decides on; [`RwLockKey::apply`]
//! carries out its [`Effect`]s on the hash and the per-hold strings **and
//! replicates each as a plain command** with absolute values:
//!
//! | effect | replicated as |
//! |---|---|
//! | `SetMode(m)` / `SetCount(f, n)` | `HSET name mode m` / `HSET name f n` |
//! | `DelField(f)` | `HDEL name f` |
//! | `SetHold { n, at }` | `SET <hold n> 1 PXAT at` |
//! | `DelHold(n)` | `DEL <hold n>` |
//! | `RenewHolds { count, at }` | `PEXPIREAT <hold i> at` for each live hold |
//! | `ExpireAt(at)` | `PEXPIREAT name at` |
//! | `Delete` | `DEL name`, and `DEL` of every live hold key |
//!
//! Hold keys are named by Redisson's rule (`rwlock.rs`). An owner's holds
//! are numbered 1..=count; counts beyond [`MAX_HOLDS_SCANNED`] are not
//! looked at one by one (their keys expire on their own).

use crate::errors::Refusal;
use crate::ffi::key::{Key, KeyKind, OpenMode};
use crate::ffi::{with_decimal, Ctx, OwnedStr, RStr};
use crate::grant_policy::Mode;
use crate::lock_key::LockKey;
use crate::rwlock::{parse_count, Effect, Field, OtherHolds, RwView, Shape};

/// The most holds per owner looked at one by one (a count written by
/// someone else could be anything up to `i64::MAX`).
pub const MAX_HOLDS_SCANNED: i64 = 1_000;

/// The suffix of a writer's field.
const WRITE_SUFFIX: &[u8] = b":write";

/// The hash field holding the mode.
const MODE: &[u8] = b"mode";

thread_local! {
    // Made once: every fresh lock writes them (a new string per write would
    // cost an allocation each, for the write and for its replication).
    static MODE_FIELD: OwnedStr = OwnedStr::new(MODE);
    static READ: OwnedStr = OwnedStr::new(Mode::Read.text());
    static WRITE: OwnedStr = OwnedStr::new(Mode::Write.text());
}

/// Runs `f` with the Redis strings `mode` and `mode`'s value.
fn with_mode<T>(mode: Mode, f: impl FnOnce(RStr, RStr) -> T) -> T {
    let value = match mode {
        Mode::Read => &READ,
        Mode::Write => &WRITE,
    };
    MODE_FIELD.with(|field| value.with(|value| f(field.borrow(), value.borrow())))
}

/// The prefix of every hold key of `name`: `{name}`, or `name` when it has
/// a `{` (Redisson's `suffixName`).
pub fn hold_prefix(name: &[u8]) -> Vec<u8> {
    if name.contains(&b'{') {
        name.to_vec()
    } else {
        let mut prefix = Vec::with_capacity(name.len() + 2);
        prefix.push(b'{');
        prefix.extend_from_slice(name);
        prefix.push(b'}');
        prefix
    }
}

/// The key of `owner`'s read hold number `n` on `name`.
pub fn hold_key(name: &[u8], owner: &[u8], n: i64) -> Vec<u8> {
    let mut key = hold_prefix(name);
    key.push(b':');
    key.extend_from_slice(owner);
    key.extend_from_slice(b":rwlock_timeout:");
    key.extend_from_slice(n.to_string().as_bytes());
    key
}

/// The writer's field of `owner`: `<owner>:write`.
pub fn write_field(owner: &[u8]) -> Vec<u8> {
    let mut field = owner.to_vec();
    field.extend_from_slice(WRITE_SUFFIX);
    field
}

/// One holder, as `LOCK.INFO` shows it.
pub struct Holder {
    pub owner: Vec<u8>,
    pub count: i64,
    /// Read holds: each hold's deadline (-2: its key is gone).
    pub deadlines: Vec<i64>,
}

/// Everything about a read-write lock, for `LOCK.INFO`.
pub struct Snapshot {
    pub mode: Mode,
    pub readers: Vec<Holder>,
    pub writer: Option<Holder>,
}

/// A read-write lock's hash, seen through the [`LockKey`] a command or the
/// queue opened (one handle per key: a second handle on a key the first
/// one deletes would point at freed memory).
pub struct RwLockKey<'k, 'a> {
    ctx: Ctx<'a>,
    key: &'k Key<'a>,
}

impl<'k, 'a> RwLockKey<'k, 'a> {
    pub fn of(lock: &'k LockKey<'a>) -> RwLockKey<'k, 'a> {
        RwLockKey {
            ctx: lock.ctx(),
            key: lock.key(),
        }
    }

    pub fn name(&self) -> RStr<'a> {
        self.key.name()
    }

    pub fn exists(&self) -> bool {
        self.key.kind() == KeyKind::Hash
    }

    /// Free, a read-write lock in some mode, or another hash.
    pub fn shape(&self) -> Shape {
        if !self.exists() {
            return Shape::Free;
        }
        match MODE_FIELD.with(|mode| self.key.hash_get(mode.borrow(), Mode::parse)) {
            Some(Some(mode)) => Shape::Rw(mode),
            _ => Shape::Other,
        }
    }

    /// Remaining lease, as `PTTL` answers.
    pub fn ttl_ms(&self) -> i64 {
        self.key.pttl()
    }

    fn count(&self, field: &[u8]) -> Result<i64, Refusal> {
        let field = OwnedStr::new(field);
        match self.key.hash_get(field.borrow(), parse_count) {
            None => Ok(0),
            Some(Ok(count)) => Ok(count),
            Some(Err(e)) => Err(e.refusal()),
        }
    }

    /// What the state machine needs to decide for `owner`.
    pub fn view(&self, owner: RStr) -> Result<RwView, Refusal> {
        let shape = self.shape();
        if shape != Shape::Rw(Mode::Read) && shape != Shape::Rw(Mode::Write) {
            return Ok(RwView {
                shape,
                reads: 0,
                writes: 0,
                ttl_ms: self.ttl_ms(),
            });
        }
        Ok(RwView {
            shape,
            reads: self.count(owner.as_bytes())?,
            writes: self.count(&write_field(owner.as_bytes()))?,
            ttl_ms: self.ttl_ms(),
        })
    }

    /// How many hold the lock, for the queue's grant pass: readers (fields
    /// that are neither the mode nor a writer's) and whether a writer holds.
    /// A plain lock's hash counts as a writer.
    pub fn holders(&self) -> (u64, bool) {
        match self.shape() {
            Shape::Free => (0, false),
            Shape::Other => (0, true),
            Shape::Rw(mode) => {
                let readers = self
                    .key
                    .hash_entries()
                    .iter()
                    .filter(|(field, _)| field != MODE && !field.ends_with(WRITE_SUFFIX))
                    .count() as u64;
                (readers, mode == Mode::Write)
            }
        }
    }

    /// The deadline of a hold key, `None` when it is gone.
    fn hold_deadline(&self, key: &[u8]) -> Option<i64> {
        let name = OwnedStr::new(key);
        let hold = Key::open(self.ctx, name.borrow(), OpenMode::Read);
        match hold.kind() {
            KeyKind::Empty => None,
            // A hold without expiry (someone else wrote it) lives forever.
            _ => Some(hold.abs_expire_ms().unwrap_or(i64::MAX)),
        }
    }

    /// The latest deadline among `owner`'s holds `1..=count`.
    fn latest_hold(&self, owner: &[u8], count: i64) -> Option<i64> {
        let name = self.name().as_bytes();
        (1..=count.min(MAX_HOLDS_SCANNED))
            .filter_map(|n| self.hold_deadline(&hold_key(name, owner, n)))
            .max()
    }

    /// The other holders' live read holds and whether another owner writes,
    /// for `owner`'s release or renewal; and `owner`'s own latest hold among
    /// its first `own_count`.
    pub fn others(&self, owner: &[u8], own_count: i64) -> (OtherHolds, Option<i64>) {
        let own_write = write_field(owner);
        let mut others = OtherHolds::default();
        for (field, value) in self.key.hash_entries() {
            if field == MODE || field == owner {
                continue;
            }
            if field.ends_with(WRITE_SUFFIX) {
                others.writer |= field != own_write;
                continue;
            }
            if let Ok(count) = parse_count(&value) {
                let latest = self.latest_hold(&field, count);
                others.latest_read = others.latest_read.max(latest);
            }
        }
        (others, self.latest_hold(owner, own_count))
    }

    /// Readers, writer and holds, for `LOCK.INFO` (`None`: not a
    /// read-write lock).
    pub fn snapshot(&self) -> Option<Snapshot> {
        let Shape::Rw(mode) = self.shape() else {
            return None;
        };
        let name = self.name().as_bytes();
        let mut snapshot = Snapshot {
            mode,
            readers: Vec::new(),
            writer: None,
        };
        for (field, value) in self.key.hash_entries() {
            if field == MODE {
                continue;
            }
            let count = parse_count(&value).unwrap_or(0);
            if let Some(owner) = field.strip_suffix(WRITE_SUFFIX) {
                snapshot.writer = Some(Holder {
                    owner: owner.to_vec(),
                    count,
                    deadlines: Vec::new(),
                });
                continue;
            }
            let deadlines = (1..=count.min(MAX_HOLDS_SCANNED))
                .map(|n| self.hold_deadline(&hold_key(name, &field, n)).unwrap_or(-2))
                .collect();
            snapshot.readers.push(Holder {
                owner: field,
                count,
                deadlines,
            });
        }
        Some(snapshot)
    }

    /// Carries out `effects` for `owner` and replicates them.
    pub fn apply(&self, owner: RStr, effects: &[Effect]) {
        if effects.is_empty() {
            return;
        }
        let (ctx, name) = (self.ctx, self.name());
        let field_name = |field: Field| match field {
            Field::Read => OwnedStr::new(owner.as_bytes()),
            Field::Write => OwnedStr::new(&write_field(owner.as_bytes())),
        };
        let mut rest = effects;
        while let [effect, ref tail @ ..] = *rest {
            rest = tail;
            match effect {
                // A fresh lock: mode and first count in one HSET.
                Effect::SetMode(mode) if matches!(tail.first(), Some(Effect::SetCount(..))) => {
                    let Some(&Effect::SetCount(field, count)) = tail.first() else {
                        continue;
                    };
                    rest = &tail[1..];
                    let field = field_name(field);
                    with_mode(mode, |mode_field, mode| {
                        with_decimal(count, |value| {
                            let pairs = ((mode_field, mode), (field.borrow(), value));
                            self.key.hash_set(pairs.0 .0, pairs.0 .1);
                            self.key.hash_set(pairs.1 .0, pairs.1 .1);
                            ctx.replicate_hset2(name, pairs.0, pairs.1);
                        })
                    });
                }
                Effect::SetMode(mode) => with_mode(mode, |field, value| {
                    self.key.hash_set(field, value);
                    ctx.replicate_hset(name, field, value);
                }),
                Effect::SetCount(field, count) => {
                    let field = field_name(field);
                    with_decimal(count, |value| {
                        self.key.hash_set(field.borrow(), value);
                        ctx.replicate_hset(name, field.borrow(), value);
                    });
                }
                Effect::DelField(field) => {
                    let field = field_name(field);
                    self.key.hash_del(field.borrow());
                    ctx.replicate_hdel(name, field.borrow());
                }
                Effect::SetHold { n, at } => {
                    let hold = OwnedStr::new(&hold_key(name.as_bytes(), owner.as_bytes(), n));
                    let key = Key::open(ctx, hold.borrow(), OpenMode::Write);
                    with_decimal(1, |one| {
                        key.string_set(one);
                        key.set_abs_expire_ms(at);
                        ctx.replicate_set(hold.borrow(), one, Some(at));
                    });
                    ctx.signal_modified(hold.borrow());
                }
                Effect::DelHold(n) => {
                    self.delete_hold(&hold_key(name.as_bytes(), owner.as_bytes(), n));
                }
                Effect::RenewHolds { count, at } => {
                    for n in 1..=count.min(MAX_HOLDS_SCANNED) {
                        let hold = OwnedStr::new(&hold_key(name.as_bytes(), owner.as_bytes(), n));
                        let key = Key::open(ctx, hold.borrow(), OpenMode::Write);
                        if key.kind() != KeyKind::Empty {
                            key.set_abs_expire_ms(at);
                            ctx.replicate_pexpireat(hold.borrow(), at);
                        }
                    }
                }
                Effect::ExpireAt(at) => {
                    self.key.set_abs_expire_ms(at);
                    ctx.replicate_pexpireat(name, at);
                }
                Effect::Delete => {
                    let readers: Vec<(Vec<u8>, i64)> = self
                        .key
                        .hash_entries()
                        .into_iter()
                        .filter(|(field, _)| field != MODE && !field.ends_with(WRITE_SUFFIX))
                        .filter_map(|(field, value)| Some((field, parse_count(&value).ok()?)))
                        .collect();
                    self.key.delete();
                    ctx.replicate_del(name);
                    for (reader, count) in readers {
                        for n in 1..=count.min(MAX_HOLDS_SCANNED) {
                            self.delete_hold(&hold_key(name.as_bytes(), &reader, n));
                        }
                    }
                }
            }
        }
        ctx.signal_modified(name);
    }

    fn delete_hold(&self, key: &[u8]) {
        let hold = OwnedStr::new(key);
        let opened = Key::open(self.ctx, hold.borrow(), OpenMode::Write);
        if opened.kind() != KeyKind::Empty {
            opened.delete();
            self.ctx.replicate_del(hold.borrow());
            self.ctx.signal_modified(hold.borrow());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hold_keys_follow_redissons_suffix_rule() {
        assert_eq!(hold_key(b"doc", b"u:1", 2), b"{doc}:u:1:rwlock_timeout:2");
        assert_eq!(hold_key(b"a{t}", b"u:1", 1), b"a{t}:u:1:rwlock_timeout:1");
        assert_eq!(write_field(b"u:1"), b"u:1:write");
    }
}
