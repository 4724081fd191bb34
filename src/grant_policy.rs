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
//! | lock ([`Exclusive`]) | the lock | the head, when the lock is free |
//! | read-write lock ([`ReadWrite`]) | read or write | the run of readers at the head (none while a writer holds), or one writer when nobody holds |
//! | semaphore ([`Permits`]) | `n` permits | the head while permits last, head first (a large request is not starved by small ones behind it) |
//!
//! The lock uses [`Exclusive`] today; the read-write lock and the semaphores
//! plug in the other two, unit-tested here already.

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

/// The lock: one holder. `Free` is whether it is free.
pub struct Exclusive;

impl GrantPolicy for Exclusive {
    type Ask = ();
    type Free = bool;

    fn take(free: &mut bool, _ask: &()) -> bool {
        std::mem::replace(free, false)
    }
}

/// What a waiter of a read-write lock asks for.
#[cfg_attr(not(test), allow(dead_code))] // the read-write lock's, next
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Read,
    Write,
}

/// Who holds a read-write lock.
#[cfg_attr(not(test), allow(dead_code))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RwHolders {
    pub readers: u64,
    pub writer: bool,
}

/// The read-write lock: many readers or one writer. Fair: a reader behind a
/// waiting writer waits (the pass stops at the writer).
#[cfg_attr(not(test), allow(dead_code))]
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

/// A semaphore: `Free` permits available, a waiter asks for `n`.
#[cfg_attr(not(test), allow(dead_code))]
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_free_lock_goes_to_the_head_only() {
        assert_eq!(grant_run::<Exclusive>(true, &[(), (), ()]), 1);
        assert_eq!(grant_run::<Exclusive>(false, &[(), ()]), 0);
        assert_eq!(grant_run::<Exclusive>(true, &[]), 0);
    }

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
    fn permits_go_head_first_while_they_last() {
        assert_eq!(grant_run::<Permits>(4, &[1, 2, 1, 1]), 3);
        // A large request at the head is not overtaken by small ones.
        assert_eq!(grant_run::<Permits>(2, &[3, 1, 1]), 0);
        assert_eq!(grant_run::<Permits>(3, &[3, 1]), 1);
        assert_eq!(grant_run::<Permits>(0, &[1]), 0);
    }
}
