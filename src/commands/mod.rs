//! The `LOCK.*` commands: one file each, each parsing its arguments, opening
//! the key, asking the state machine (`lock.rs`) and carrying out its decision.
//! Each file starts with the command's reply contract.

pub mod acquire;
pub mod force;
pub mod info;
pub mod release;
pub mod renew;

use std::ffi::CStr;

use crate::command_docs::{self, CommandDoc, KeyFlags};
use crate::events;
use crate::ffi::{command_entry, create_command, raw, Ctx};
use crate::handoff;
use crate::lock::Event;
use crate::lock_key::LockKey;

/// After a decision's write: emit its keyspace notification and, when the lock
/// was left free, hand it to the first waiter or announce that it is free.
pub fn announce(ctx: &Ctx, key: &LockKey, event: Option<Event>) {
    let Some(event) = event else { return };
    events::notify(ctx, key.name(), event);
    if event.frees_lock() {
        handoff::grant_or_announce(ctx, key);
    }
}

command_entry!(acquire_entry => acquire::run);
command_entry!(renew_entry => renew::run);
command_entry!(release_entry => release::run);
command_entry!(force_entry => force::run);
command_entry!(info_entry => info::run);

/// A command as registered: name, entry point, flags, ACL categories, what
/// it does to its key, docs.
type Registration = (
    &'static str,
    raw::RedisModuleCmdFunc,
    &'static str,
    &'static CStr,
    KeyFlags,
    &'static CommandDoc,
);

/// Every command.
///
/// `deny-oom` only on acquire, so that under memory pressure locks can still be
/// released, renewed and forced. Everything but `LOCK.INFO` is O(1): `fast`.
/// The ACL categories repeat what the flags say because Redis does not derive
/// them for module commands; they are applied where the server supports it.
///
/// The key flags follow Redis's own commands (`src/commands/*.json`), since
/// ACL `%R~` / `%W~` patterns go by them:
/// * acquire `RW access update`: it answers the holder's remaining lease (as
///   `PTTL`, `RO access`) and counts a hold up (as `HINCRBY`);
/// * renew `RW update`: it resets the expiry and answers 1/0 (as `PEXPIRE`);
/// * release `RW delete`: it removes one hold and, with the last, the key (as
///   `HDEL`); its nil/0/1 reveals no content;
/// * force `RM delete`: it deletes the key (as `DEL`);
/// * info `RO access`: it shows the hash (as `HGETALL`).
const COMMANDS: [Registration; 5] = [
    (
        acquire::NAME,
        Some(acquire_entry),
        "write deny-oom fast",
        c"write fast",
        KeyFlags::READ_UPDATE,
        &acquire::DOC,
    ),
    (
        renew::NAME,
        Some(renew_entry),
        "write fast",
        c"write fast",
        KeyFlags::UPDATE,
        &renew::DOC,
    ),
    (
        release::NAME,
        Some(release_entry),
        "write fast",
        c"write fast",
        KeyFlags::REMOVE_PART,
        &release::DOC,
    ),
    (
        force::NAME,
        Some(force_entry),
        "write fast",
        c"write fast",
        KeyFlags::DELETE_KEY,
        &force::DOC,
    ),
    (
        info::NAME,
        Some(info_entry),
        "readonly",
        c"read",
        KeyFlags::READ,
        &info::DOC,
    ),
];

/// Registers every command with Redis, with its docs, key spec and ACL
/// categories.
pub fn register(ctx: *mut raw::RedisModuleCtx) -> Result<(), String> {
    let own_category = command_docs::add_acl_category(ctx);
    for (name, entry, flags, categories, key_flags, doc) in COMMANDS {
        let command = create_command(ctx, name, entry, flags)?;
        command_docs::describe(command, doc, key_flags).map_err(|e| format!("{name}: {e}"))?;
        command_docs::set_acl_categories(command, categories, own_category);
    }
    Ok(())
}
