//! The `LOCK.*` commands: one file each (or one per object for the small
//! commands of the semaphores, `semaphore.rs` and `permit.rs`, and the
//! latch, `latch.rs`). Each file starts with the commands' reply contract, parses its arguments into a typed struct (unit-tested
//! without Redis), declares its spec (name, flags, ACL categories, key spec,
//! docs) and runs it: open the key, ask the state machine (`lock.rs`), and
//! carry out its decision with `waiting::carry_out`, the one way a decision
//! becomes effects.

pub mod acquire;
pub mod arg_docs;
pub mod cancel;
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
pub mod scan;
pub mod semaphore;

use std::ffi::CStr;

use crate::ffi::command::{self, Registration};
use crate::ffi::Ctx;

/// The releases that brought commands (`COMMAND DOCS`' "since"), as
/// CHANGELOG.md has them. A command not released yet takes the version of
/// the release that will bring it, and is named under "Unreleased" there.
const V0_1: &CStr = c"0.1.0";
const V0_2: &CStr = c"0.2.0";

/// Every command, registered in this order, with the release that brought it.
const COMMANDS: [Registration; 28] = [
    Registration::of::<acquire::LockAcquire>(V0_1),
    Registration::of::<renew::LockRenew>(V0_1),
    Registration::of::<release::LockRelease>(V0_1),
    Registration::of::<force::LockForce>(V0_1),
    Registration::of::<info::LockInfo>(V0_1),
    Registration::of::<fence::LockFence>(V0_2),
    Registration::of::<rw_acquire::LockRAcquire>(V0_2),
    Registration::of::<rw_acquire::LockWAcquire>(V0_2),
    Registration::of::<rw_release::LockRRelease>(V0_2),
    Registration::of::<rw_release::LockWRelease>(V0_2),
    Registration::of::<rw_renew::LockRwRenew>(V0_2),
    Registration::of::<semaphore::SemSet>(V0_2),
    Registration::of::<semaphore::SemAdd>(V0_2),
    Registration::of::<semaphore::SemAcquire>(V0_2),
    Registration::of::<semaphore::SemRelease>(V0_2),
    Registration::of::<semaphore::SemAvailable>(V0_2),
    Registration::of::<semaphore::SemDrain>(V0_2),
    Registration::of::<permit::PermitAcquire>(V0_2),
    Registration::of::<permit::PermitRelease>(V0_2),
    Registration::of::<permit::PermitRenew>(V0_2),
    Registration::of::<permit::SemInfo>(V0_2),
    Registration::of::<latch::LatchSet>(V0_2),
    Registration::of::<latch::CountDown>(V0_2),
    Registration::of::<latch::LatchCount>(V0_2),
    Registration::of::<latch::Await>(V0_2),
    Registration::of::<latch::LatchInfo>(V0_2),
    Registration::of::<scan::LockScan>(V0_2),
    Registration::of::<cancel::LockCancel>(V0_2),
];

/// Registers every command with Redis, with its docs, key spec and ACL
/// categories.
pub fn register(ctx: Ctx) -> Result<(), String> {
    command::register(ctx, &COMMANDS)
}

#[cfg(test)]
mod tests {
    use super::COMMANDS;

    /// `x.y.z` as numbers, for ordering.
    fn version(text: &str) -> (u32, u32, u32) {
        let parts: Vec<u32> = text
            .split('.')
            .map(|p| p.parse().unwrap_or_else(|_| panic!("version {text:?}")))
            .collect();
        assert_eq!(parts.len(), 3, "version {text:?}");
        (parts[0], parts[1], parts[2])
    }

    /// Every command's "since" is a release CHANGELOG.md has cut, no later
    /// than the crate's version; or, for a command not released yet, a
    /// later version, and the command is named under "Unreleased".
    #[test]
    fn every_commands_since_is_a_release_or_the_next_one() {
        let changelog = include_str!("../../CHANGELOG.md");
        let unreleased = changelog
            .split("\n## [Unreleased]")
            .nth(1)
            .and_then(|rest| rest.split("\n## [").next())
            .unwrap_or("");
        let crate_version = version(env!("CARGO_PKG_VERSION"));
        for command in &COMMANDS {
            let (name, since) = (command.name(), command.since());
            if changelog.contains(&format!("\n## [{since}] - ")) {
                assert!(version(since) <= crate_version, "{name} since {since}");
            } else {
                assert!(
                    version(since) > crate_version,
                    "{name}: {since} is no release"
                );
                assert!(
                    unreleased.contains(&name.to_uppercase()),
                    "{name} (since {since}) is not under Unreleased in CHANGELOG.md"
                );
            }
        }
    }
}
