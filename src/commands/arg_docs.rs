//! The arguments as `COMMAND DOCS` shows them (and redis-cli hints them),
//! each described once here and shared by every command that takes it, so
//! that `WAIT timeout-ms` reads the same for a lock, a semaphore and a
//! permit.

use crate::ffi::command::{ArgDoc, ArgKind};

/// Every command's first argument: the one key it works on.
pub const KEY: ArgDoc = ArgDoc::new(c"key", ArgKind::Key);
/// Who holds a lock: Redisson's `<client id>:<thread id>`.
pub const OWNER: ArgDoc = ArgDoc::new(c"owner", ArgKind::String);
/// A lease in milliseconds.
pub const LEASE: ArgDoc = ArgDoc::new(c"lease-ms", ArgKind::Integer);
/// `WAIT timeout-ms`: wait in the fair queue (0 = forever).
pub const WAIT: ArgDoc = ArgDoc::new(c"timeout-ms", ArgKind::Integer)
    .token(c"WAIT")
    .optional();
/// `KEEP grace-ms`: how long a waiter's place is kept after it leaves.
pub const KEEP: ArgDoc = ArgDoc::new(c"grace-ms", ArgKind::Integer)
    .token(c"KEEP")
    .optional();
/// `WAITER waiter-id`: an ownerless waiter's identity, one per acquisition.
pub const WAITER: ArgDoc = ArgDoc::new(c"waiter-id", ArgKind::String)
    .token(c"WAITER")
    .optional();
/// `PX ttl-ms`: the key's time to live.
pub const PX_TTL: ArgDoc = ArgDoc::new(c"ttl-ms", ArgKind::Integer)
    .token(c"PX")
    .optional();
/// A number of a semaphore's permits.
pub const PERMITS: ArgDoc = ArgDoc::new(c"permits", ArgKind::Integer);
/// A leased permit's id: 32 hex characters.
pub const PERMIT_ID: ArgDoc = ArgDoc::new(c"id", ArgKind::String);
