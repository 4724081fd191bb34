//! Who is granted what when something frees: one policy per kind of object,
//! over the one FIFO wait queue every kind shares (`wait_queue.rs`). No FFI.
//!
//! A policy says, for one waiter, whether what it asks for can be given from
//! what the object has free right now, and what is left if so. The queue is
//! served from its head in one pass and stops at the first waiter that
//! cannot be served, so nobody behind it overtakes it ([`grant_run`]):
//!
//! | kind | a waiter asks for | granted in one pass |
//! |---|---|---|
//! | lock ([`Ask::Lock`], a writer to [`ReadWrite`]) | the lock | the head, when the lock is free |
//! | read-write lock ([`ReadWrite`]) | read or write | the run of readers at the head (none while a writer holds), or one writer when nobody holds |
//! | semaphore ([`Permits`]) | `n` permits | the head while permits last, head first (a large request is not starved by small ones behind it) |
//!
//! | count-down latch ([`Opened`]) | the latch to open | every waiter, once the count is zero |
//!
//! The queue is served with [`ReadWrite`] for the lock and the read-write
//! lock alike (a lock waiter asks as a writer, [`Ask`]), with [`Permits`]
//! for both kinds of semaphore and with [`Opened`] for a latch.

/// A kind of object's grant policy.
pub trait GrantPolicy {
    /// What one waiter asks for.
    type Ask;
    /// What the object has free right now.
    type Free;

    /// Takes what `ask` needs out of `free`; false (and `free` unchanged)
    /// when it cannot be granted now.
    fn take(free: &mut Self::Free, ask: &Self::Ask) -> bool;
}

/// How many waiters, from the head of `queue`, one pass grants, starting
/// from `free`: FIFO, stopping at the first that cannot be granted.
pub fn grant_run<'a, P: GrantPolicy>(
    mut free: P::Free,
    queue: impl IntoIterator<Item = &'a P::Ask>,
) -> usize
where
    P::Ask: 'a,
{
    queue
        .into_iter()
        .take_while(|ask| P::take(&mut free, ask))
        .count()
}

/// A read-write lock's two holds, the one Read/Write of the module: what a
/// read-write lock's waiter asks for, what a command takes, and the value
/// of the lock's `mode` field (Redisson's layout, `rwlock.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Read,
    Write,
}

impl Mode {
    /// The `mode` field's value as Redisson writes it (`read` | `write`).
    pub fn parse(raw: &[u8]) -> Option<Mode> {
        match raw {
            b"read" => Some(Mode::Read),
            b"write" => Some(Mode::Write),
            _ => None,
        }
    }

    /// As the `mode` field holds it and `LOCK.INFO` shows it.
    pub fn text(self) -> &'static [u8] {
        match self {
            Mode::Read => b"read",
            Mode::Write => b"write",
        }
    }
}

/// Who holds a read-write lock.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RwHolders {
    pub readers: u64,
    pub writer: bool,
}

/// The read-write lock: many readers or one writer. Fair: a reader behind a
/// waiting writer waits (the pass stops at the writer).
pub struct ReadWrite;

impl GrantPolicy for ReadWrite {
    type Ask = Mode;
    type Free = RwHolders;

    fn take(held: &mut RwHolders, ask: &Mode) -> bool {
        match ask {
            Mode::Read if !held.writer => {
                held.readers += 1;
                true
            }
            Mode::Write if !held.writer && held.readers == 0 => {
                held.writer = true;
                true
            }
            Mode::Read | Mode::Write => false,
        }
    }
}

/// What one waiter of the shared queue asks for: the lock, a read-write
/// lock's read or write hold, permits of a semaphore, or a latch to open.
/// This is where the kinds' asks are named: a new kind adds its variant
/// (and its name for `LOCK.INFO`); the projections below see any other
/// kind's ask as one they cannot grant. A lock's queue is served with
/// [`ReadWrite`]: a lock waiter is a writer (it needs nobody holding), so a
/// queue of lock waiters is served one at a time, head first, when the lock
/// is free.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ask {
    Lock,
    /// A read-write lock's read or write hold.
    Rw(Mode),
    /// `n` permits of a semaphore; `leased`: with ids and a lease
    /// (`LOCK.PERMITACQUIRE`).
    Permits {
        n: i64,
        leased: bool,
    },
    /// A count-down latch to reach zero.
    Latch,
}

/// What asks of another kind than their queue's are seen as: nothing can
/// be granted them (a key of one type cannot be another kind's).
static UNGRANTABLE: i64 = i64::MAX;

impl Ask {
    /// How [`ReadWrite`] sees it (other kinds' asks: as writers, who are
    /// then refused the lock, `waiting/lock.rs`).
    pub fn mode(&self) -> &Mode {
        match self {
            Ask::Rw(mode) => mode,
            _ => &Mode::Write,
        }
    }

    /// How [`Permits`] sees it: how many permits.
    pub fn permits(&self) -> &i64 {
        match self {
            Ask::Permits { n, .. } => n,
            _ => &UNGRANTABLE,
        }
    }

    /// How [`Opened`] sees it.
    pub fn opening(&self) -> &bool {
        match self {
            Ask::Latch => &true,
            _ => &false,
        }
    }

    /// As `LOCK.INFO` and `LOCK.SEMINFO` name it.
    /// How much it asks for: the permits of a permits ask, else 1.
    pub fn amount(self) -> i64 {
        match self {
            Ask::Permits { n, .. } => n,
            _ => 1,
        }
    }

    pub fn name(self) -> &'static [u8] {
        match self {
            Ask::Lock => b"lock",
            Ask::Rw(mode) => mode.text(),
            Ask::Permits { leased: false, .. } => b"permits",
            Ask::Permits { leased: true, .. } => b"leased",
            Ask::Latch => b"latch",
        }
    }
}

/// A semaphore: `Free` permits available, a waiter asks for `n`.
pub struct Permits;

impl GrantPolicy for Permits {
    type Ask = i64;
    type Free = i64;

    fn take(available: &mut i64, wanted: &i64) -> bool {
        if *wanted <= *available {
            *available -= wanted;
            true
        } else {
            false
        }
    }
}

/// A count-down latch: `Free` is whether it is open (its count is zero);
/// a waiter asks for it to be (`true`; a waiter of another kind, `false`,
/// is never served).
pub struct Opened;

impl GrantPolicy for Opened {
    type Ask = bool;
    type Free = bool;

    fn take(open: &mut bool, latch_waiter: &bool) -> bool {
        *open && *latch_waiter
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_release_grants_the_readers_up_to_the_next_writer_in_one_pass() {
        use Mode::{Read, Write};
        let queue = [Read, Read, Read, Write, Read];
        assert_eq!(grant_run::<ReadWrite>(RwHolders::default(), &queue), 3);
        // A writer at the head gets it alone.
        assert_eq!(
            grant_run::<ReadWrite>(RwHolders::default(), &[Write, Read]),
            1
        );
        // While readers hold, a writer at the head waits, and so does
        // everybody behind it: no reader overtakes a waiting writer.
        let reading = RwHolders {
            readers: 2,
            writer: false,
        };
        assert_eq!(grant_run::<ReadWrite>(reading, &[Write, Read]), 0);
        assert_eq!(grant_run::<ReadWrite>(reading, &[Read, Read, Write]), 2);
        let writing = RwHolders {
            readers: 0,
            writer: true,
        };
        assert_eq!(grant_run::<ReadWrite>(writing, &[Read, Read]), 0);
    }

    #[test]
    fn lock_waiters_are_served_as_writers_one_at_a_time() {
        let asks = [Ask::Lock, Ask::Lock, Ask::Rw(Mode::Read)];
        let modes: Vec<Mode> = asks.iter().map(|a| *a.mode()).collect();
        assert_eq!(grant_run::<ReadWrite>(RwHolders::default(), &modes), 1);
        let held = RwHolders {
            readers: 0,
            writer: true,
        };
        assert_eq!(grant_run::<ReadWrite>(held, &modes), 0);
    }

    #[test]
    fn permits_go_head_first_while_they_last() {
        assert_eq!(grant_run::<Permits>(4, &[1, 2, 1, 1]), 3);
        // A large request at the head is not overtaken by small ones.
        assert_eq!(grant_run::<Permits>(2, &[3, 1, 1]), 0);
        assert_eq!(grant_run::<Permits>(3, &[3, 1]), 1);
        assert_eq!(grant_run::<Permits>(0, &[1]), 0);
        let asks = [Ask::Permits { n: 1, leased: true }, Ask::Lock];
        let wanted: Vec<i64> = asks.iter().map(|a| *a.permits()).collect();
        assert_eq!(
            grant_run::<Permits>(100, &wanted),
            1,
            "a waiter of another kind is never given permits"
        );
    }

    #[test]
    fn an_open_latch_lets_every_waiter_go_and_a_closed_one_none() {
        assert_eq!(grant_run::<Opened>(true, &[true, true, true]), 3);
        assert_eq!(grant_run::<Opened>(false, &[true, true]), 0);
    }
}
