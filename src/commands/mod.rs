//! The `LOCK.*` commands: one file each (or one per object for the small
//! commands of the semaphores, `semaphore.rs` and `permit.rs`, and the
//! latch, `latch.rs`). Each file starts with the commands' reply contract, parses its arguments into a typed struct (unit-tested
//! without Redis), declares its spec (name, flags, ACL categories, key spec,
//! docs) and runs it: open the key, ask the state machine (`lock.rs`), and
//! carry out its decision with `waiting::carry_out`, the one way a decision
//! becomes effects.

pub mod acquire;
pub mod arg_docs;
pub mod fence;
pub mod force;
pub mod info;
pub mod latch;
pub mod permit;
pub mod release;
pub mod renew;
pub mod rw_acquire;
pub mod rw_release;
pub mod rw_renew;
pub mod semaphore;

use crate::ffi::command::{self, Registration};
use crate::ffi::Ctx;

/// Every command, registered in this order.
const COMMANDS: [Registration; 26] = [
    Registration::of::<acquire::LockAcquire>(),
    Registration::of::<renew::LockRenew>(),
    Registration::of::<release::LockRelease>(),
    Registration::of::<force::LockForce>(),
    Registration::of::<info::LockInfo>(),
    Registration::of::<fence::LockFence>(),
    Registration::of::<rw_acquire::LockRAcquire>(),
    Registration::of::<rw_acquire::LockWAcquire>(),
    Registration::of::<rw_release::LockRRelease>(),
    Registration::of::<rw_release::LockWRelease>(),
    Registration::of::<rw_renew::LockRwRenew>(),
    Registration::of::<semaphore::SemSet>(),
    Registration::of::<semaphore::SemAdd>(),
    Registration::of::<semaphore::SemAcquire>(),
    Registration::of::<semaphore::SemRelease>(),
    Registration::of::<semaphore::SemAvailable>(),
    Registration::of::<semaphore::SemDrain>(),
    Registration::of::<permit::PermitAcquire>(),
    Registration::of::<permit::PermitRelease>(),
    Registration::of::<permit::PermitRenew>(),
    Registration::of::<permit::SemInfo>(),
    Registration::of::<latch::LatchSet>(),
    Registration::of::<latch::CountDown>(),
    Registration::of::<latch::LatchCount>(),
    Registration::of::<latch::Await>(),
    Registration::of::<latch::LatchInfo>(),
];

/// Registers every command with Redis, with its docs, key spec and ACL
/// categories.
pub fn register(ctx: Ctx) -> Result<(), String> {
    command::register(ctx, &COMMANDS)
}
