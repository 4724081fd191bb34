//! The `LOCK.*` commands: one file each. Each file starts with the command's
//! reply contract, parses its arguments into a typed struct (unit-tested
//! without Redis), declares its spec (name, flags, ACL categories, key spec,
//! docs) and runs it: open the key, ask the state machine (`lock.rs`), and
//! carry out its decision with `handoff::carry_out`, the one way a decision
//! becomes effects.

pub mod acquire;
pub mod fence;
pub mod force;
pub mod info;
pub mod release;
pub mod renew;
pub mod rw_acquire;
pub mod rw_release;
pub mod rw_renew;

use crate::ffi::command::{self, Registration};
use crate::ffi::Ctx;

/// Every command, registered in this order.
const COMMANDS: [Registration; 11] = [
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
];

/// Registers every command with Redis, with its docs, key spec and ACL
/// categories.
pub fn register(ctx: Ctx) -> Result<(), String> {
    command::register(ctx, &COMMANDS)
}
