//! What a key is, for the listing (`LOCK.SCAN`): pure decisions from a
//! key's name and shape, and the glob patterns of `MATCH`.
//!
//! Redisson's objects are plain Redis types, so the listing tells them
//! apart by shape, and where the shape cannot tell, it says so:
//! * a hash with a `mode` field of `read` or `write` is a **read-write
//!   lock**; a hash whose every value is a positive integer (owner -> hold
//!   count) is a **lock**. Any other hash is not a lock object. (An
//!   application hash of positive integers would look like a lock: no
//!   layout says otherwise.)
//! * a string holding an integer is a semaphore's available permits, a
//!   latch's count, or any counter at all (`INCR`): nothing in it says
//!   which. It is a **semaphore** or a **latch** when clients wait on it
//!   (their queue knows the kind), **permits** (Redisson's
//!   `RPermitExpirableSemaphore`) when its leased-permit set
//!   `{name}:timeout` exists, and otherwise a **counter**, which the
//!   listing shows only when asked for by kind, so a cache full of `INCR`
//!   counters does not flood it.
//! * the keys that are parts of another object are not objects of their
//!   own: a read hold's key `{name}:<owner>:rwlock_timeout:<n>`, a fenced
//!   lock's counter `redisson_lock_token:...`, and a sorted set named
//!   `...:timeout` (a semaphore's leased permits).

use crate::args::strict_i64;
use crate::fencing::COUNTER_PREFIX;
use crate::grant_policy::Ask;

/// The kinds the listing names (`KIND` and each object's `kind`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ObjectKind {
    Lock,
    RwLock,
    Semaphore,
    Permits,
    Latch,
    /// An integer string nobody waits on: a semaphore, a latch, or any
    /// counter.
    Counter,
}

impl ObjectKind {
    pub const ALL: [ObjectKind; 6] = [
        ObjectKind::Lock,
        ObjectKind::RwLock,
        ObjectKind::Semaphore,
        ObjectKind::Permits,
        ObjectKind::Latch,
        ObjectKind::Counter,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ObjectKind::Lock => "lock",
            ObjectKind::RwLock => "rwlock",
            ObjectKind::Semaphore => "semaphore",
            ObjectKind::Permits => "permits",
            ObjectKind::Latch => "latch",
            ObjectKind::Counter => "counter",
        }
    }

    /// The kind named `name` (any case).
    pub fn parse(name: &[u8]) -> Option<ObjectKind> {
        ObjectKind::ALL
            .into_iter()
            .find(|kind| kind.name().as_bytes().eq_ignore_ascii_case(name))
    }

    /// The kind of object a waiter's ask waits on.
    pub fn of_ask(ask: Ask) -> ObjectKind {
        match ask {
            Ask::Lock => ObjectKind::Lock,
            Ask::Rw(_) => ObjectKind::RwLock,
            Ask::Permits { leased: false, .. } => ObjectKind::Semaphore,
            Ask::Permits { leased: true, .. } => ObjectKind::Permits,
            Ask::Latch => ObjectKind::Latch,
        }
    }

    /// Whether the listing shows this kind when asked for `filter` (none:
    /// every kind but counters).
    pub fn shown(self, filter: Option<ObjectKind>) -> bool {
        match filter {
            Some(kind) => kind == self,
            None => self != ObjectKind::Counter,
        }
    }
}

/// Whether `key` is, by its name, part of another object: a read hold's
/// key, a fenced lock's counter. (A `...:timeout` name is one only when it
/// is a sorted set: [`is_permits_set_name`].)
pub fn is_part_by_name(key: &[u8]) -> bool {
    is_read_hold_key(key) || is_token_counter(key)
}

/// `{name}:<owner>:rwlock_timeout:<n>`.
fn is_read_hold_key(key: &[u8]) -> bool {
    const MARK: &[u8] = b":rwlock_timeout:";
    let Some(at) = key.windows(MARK.len()).rposition(|w| w == MARK) else {
        return false;
    };
    let n = &key[at + MARK.len()..];
    !n.is_empty() && n.iter().all(u8::is_ascii_digit)
}

/// `redisson_lock_token:...`.
fn is_token_counter(key: &[u8]) -> bool {
    key.strip_prefix(COUNTER_PREFIX)
        .is_some_and(|rest| rest.first() == Some(&b':'))
}

/// Whether a sorted set of this name is a semaphore's leased-permit set.
pub fn is_permits_set_name(key: &[u8]) -> bool {
    key.ends_with(b":timeout")
}

/// A hash's kind, from its fields and values: a read-write lock, a lock,
/// or `None` (not a lock object).
pub fn hash_kind(entries: &[(Vec<u8>, Vec<u8>)]) -> Option<ObjectKind> {
    if entries.is_empty() {
        return None;
    }
    let mode = entries.iter().find(|(field, _)| field == b"mode");
    if let Some((_, value)) = mode {
        return (value == b"read" || value == b"write").then_some(ObjectKind::RwLock);
    }
    entries
        .iter()
        .all(|(_, count)| strict_i64(count).is_some_and(|n| n > 0))
        .then_some(ObjectKind::Lock)
}

/// A string's kind, from its `value` read as an integer (`None`: not an
/// integer, so no object): from the kind of its waiters' queue if anyone
/// waits, else permits when its leased-permit set exists, else a counter.
pub fn string_kind(
    value: Option<i64>,
    waited_as: Option<ObjectKind>,
    has_permits_set: bool,
) -> Option<ObjectKind> {
    value?;
    Some(match waited_as {
        Some(kind @ (ObjectKind::Semaphore | ObjectKind::Permits | ObjectKind::Latch)) => kind,
        _ if has_permits_set => ObjectKind::Permits,
        _ => ObjectKind::Counter,
    })
}

/// Whether `text` matches the glob `pattern` as `SCAN ... MATCH` and
/// `KEYS` read it: `*` any run, `?` any byte, `[...]` a set (`^` negates,
/// `a-z` ranges), `\` quotes the next byte. Used for the objects the
/// listing finds in its queues rather than through `SCAN`.
pub fn glob_match(pattern: &[u8], text: &[u8]) -> bool {
    let (mut p, mut t) = (0, 0);
    // Where to go back to after a `*` that matched too little.
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if let Some((matched, next)) = step(pattern, p, text[t]) {
            if matched {
                p = next;
                t += 1;
                continue;
            }
        } else if pattern.get(p) == Some(&b'*') {
            star = Some((p + 1, t));
            p += 1;
            continue;
        }
        match star {
            Some((after, from)) => {
                p = after;
                t = from + 1;
                star = Some((after, from + 1));
            }
            None => return false,
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

/// One pattern element at `p` against the byte `c`: `Some((matches, next
/// element))`, or `None` at a `*` or the pattern's end.
fn step(pattern: &[u8], p: usize, c: u8) -> Option<(bool, usize)> {
    match *pattern.get(p)? {
        b'*' => None,
        b'?' => Some((true, p + 1)),
        b'\\' if p + 1 < pattern.len() => Some((pattern[p + 1] == c, p + 2)),
        b'[' => {
            let mut i = p + 1;
            let negate = pattern.get(i) == Some(&b'^');
            if negate {
                i += 1;
            }
            let mut found = false;
            while i < pattern.len() && pattern[i] != b']' {
                if pattern[i] == b'\\' && i + 1 < pattern.len() {
                    found |= pattern[i + 1] == c;
                    i += 2;
                } else if i + 2 < pattern.len() && pattern[i + 1] == b'-' && pattern[i + 2] != b']'
                {
                    let (a, b) = (
                        pattern[i].min(pattern[i + 2]),
                        pattern[i].max(pattern[i + 2]),
                    );
                    found |= (a..=b).contains(&c);
                    i += 3;
                } else {
                    found |= pattern[i] == c;
                    i += 1;
                }
            }
            // Past the `]` (a set left open runs to the pattern's end).
            Some((found != negate, (i + 1).min(pattern.len())))
        }
        literal => Some((literal == c, p + 1)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grant_policy::Mode;

    fn entries(pairs: &[(&str, &str)]) -> Vec<(Vec<u8>, Vec<u8>)> {
        pairs
            .iter()
            .map(|(f, v)| (f.as_bytes().to_vec(), v.as_bytes().to_vec()))
            .collect()
    }

    #[test]
    fn hashes_are_locks_read_write_locks_or_nothing() {
        assert_eq!(
            hash_kind(&entries(&[("uuid:1", "2")])),
            Some(ObjectKind::Lock)
        );
        assert_eq!(
            hash_kind(&entries(&[("a:1", "1"), ("b:7", "3")])),
            Some(ObjectKind::Lock),
            "a lock's re-entrant owners"
        );
        assert_eq!(
            hash_kind(&entries(&[("mode", "read"), ("a:1", "1")])),
            Some(ObjectKind::RwLock)
        );
        assert_eq!(
            hash_kind(&entries(&[("mode", "write"), ("a:1", "2")])),
            Some(ObjectKind::RwLock)
        );
        for not_a_lock in [
            &[("name", "ada")][..],
            &[("a:1", "0")],
            &[("a:1", "-1")],
            &[("a:1", "1"), ("b", "x")],
            &[("mode", "other")],
            &[],
        ] {
            assert_eq!(hash_kind(&entries(not_a_lock)), None, "{not_a_lock:?}");
        }
    }

    #[test]
    fn an_integer_string_is_what_its_waiters_or_its_permit_set_say_else_a_counter() {
        let int = |raw: &[u8]| strict_i64(raw);
        assert_eq!(
            string_kind(int(b"3"), None, false),
            Some(ObjectKind::Counter)
        );
        assert_eq!(
            string_kind(int(b"0"), None, true),
            Some(ObjectKind::Permits)
        );
        assert_eq!(
            string_kind(int(b"2"), Some(ObjectKind::Semaphore), false),
            Some(ObjectKind::Semaphore)
        );
        assert_eq!(
            string_kind(int(b"1"), Some(ObjectKind::Latch), true),
            Some(ObjectKind::Latch)
        );
        assert_eq!(
            string_kind(int(b"1"), Some(ObjectKind::Lock), false),
            Some(ObjectKind::Counter),
            "a lock's waiters on a string: the key changed type under them"
        );
        assert_eq!(
            string_kind(int(b"-4"), None, false),
            Some(ObjectKind::Counter)
        );
        assert_eq!(string_kind(int(b"hello"), None, true), None);
        assert_eq!(
            string_kind(int(b"1.5"), Some(ObjectKind::Latch), false),
            None
        );
    }

    #[test]
    fn parts_of_objects_are_not_objects() {
        assert!(is_part_by_name(b"{doc}:u:1:rwlock_timeout:2"));
        assert!(is_part_by_name(b"a{t}:u:1:rwlock_timeout:10"));
        assert!(!is_part_by_name(b"{doc}:u:1:rwlock_timeout:"));
        assert!(!is_part_by_name(b"{doc}:u:1:rwlock_timeout:x"));
        assert!(is_part_by_name(b"redisson_lock_token:{lock}"));
        assert!(!is_part_by_name(b"redisson_lock_tokens"));
        assert!(!is_part_by_name(b"order:42"));
        assert!(is_permits_set_name(b"{sem}:timeout"));
        assert!(!is_permits_set_name(b"sem"));
    }

    #[test]
    fn kinds_have_names_and_come_from_asks() {
        for kind in ObjectKind::ALL {
            assert_eq!(ObjectKind::parse(kind.name().as_bytes()), Some(kind));
        }
        assert_eq!(ObjectKind::parse(b"RWLOCK"), Some(ObjectKind::RwLock));
        assert_eq!(ObjectKind::parse(b"hash"), None);
        assert_eq!(ObjectKind::of_ask(Ask::Lock), ObjectKind::Lock);
        assert_eq!(ObjectKind::of_ask(Ask::Rw(Mode::Read)), ObjectKind::RwLock);
        let permits = |leased| Ask::Permits { n: 2, leased };
        assert_eq!(ObjectKind::of_ask(permits(false)), ObjectKind::Semaphore);
        assert_eq!(ObjectKind::of_ask(permits(true)), ObjectKind::Permits);
        assert_eq!(ObjectKind::of_ask(Ask::Latch), ObjectKind::Latch);
        assert!(ObjectKind::Lock.shown(None));
        assert!(!ObjectKind::Counter.shown(None));
        assert!(ObjectKind::Counter.shown(Some(ObjectKind::Counter)));
        assert!(!ObjectKind::Lock.shown(Some(ObjectKind::Latch)));
    }

    #[test]
    fn globs_match_as_scan_does() {
        let yes = |p: &str, t: &str| assert!(glob_match(p.as_bytes(), t.as_bytes()), "{p} ~ {t}");
        let no = |p: &str, t: &str| assert!(!glob_match(p.as_bytes(), t.as_bytes()), "{p} !~ {t}");
        yes("*", "");
        yes("*", "anything");
        yes("order:*", "order:42");
        no("order:*", "orders:42");
        yes("h?llo", "hallo");
        no("h?llo", "hllo");
        yes("h*llo", "heeeello");
        yes("h[ae]llo", "hello");
        no("h[ae]llo", "hillo");
        yes("h[^e]llo", "hallo");
        no("h[^e]llo", "hello");
        yes("h[a-b]llo", "hbllo");
        yes("h[b-a]llo", "hallo");
        yes("a\\*b", "a*b");
        no("a\\*b", "axb");
        yes("*:{x}*", "lock:{x}:1");
        yes("a*b*c", "aXbYbZc");
        no("a*b*c", "aXbYbZ");
        yes("**", "x");
        no("", "x");
        yes("", "");
    }
}
