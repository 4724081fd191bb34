//! `COMMAND DOCS` / `COMMAND INFO` metadata and ACL categories for our commands.
//!
//! Each command file declares a [`CommandDoc`]; [`describe`] hands it to
//! `RedisModule_SetCommandInfo` (present since 7.0), which also makes Redis
//! check the arity and lets redis-cli show argument hints.
//!
//! It also gives the command its key spec: argument 1, with flags that say
//! what the command does to it ([`KeyFlags`]). Without one, Redis derives a
//! spec from `first,last,step = 1,1,1` that claims full access (`RW access
//! update`), so ACL key permissions treated every command as reading *and*
//! writing: a `%R~*` user was refused `LOCK.INFO`. `SetCommandInfo` replaces
//! that derived spec (Redis 7.0.15, 8.x and Valkey allow exactly this one to
//! be replaced) and recomputes `first,last,step` from the new spec, so they
//! stay 1,1,1 for cluster routing, `COMMAND GETKEYS` and older clients.
//!
//! ACL categories (`@write`/`@read`/`@fast` and the module's own `@lock`) need
//! `SetCommandACLCategories` / `AddACLCategory`, which Redis 7.0 lacks: they
//! are used only where present, so loading never fails on 7.0 (where module
//! commands simply have no categories).

use std::ffi::CStr;
use std::os::raw::c_int;
use std::ptr;

use crate::ffi::{api, raw};

/// The module's own ACL category: `+@lock` allows every `LOCK.*` command.
pub const ACL_CATEGORY: &CStr = c"lock";

#[derive(Clone, Copy)]
pub enum ArgKind {
    Key,
    String,
    Integer,
}

/// One argument as `COMMAND DOCS` shows it.
pub struct ArgDoc {
    pub name: &'static CStr,
    pub kind: ArgKind,
    /// A leading token, e.g. `WAIT` for `WAIT timeout-ms`.
    pub token: Option<&'static CStr>,
    pub optional: bool,
}

impl ArgDoc {
    pub const fn new(name: &'static CStr, kind: ArgKind) -> Self {
        ArgDoc {
            name,
            kind,
            token: None,
            optional: false,
        }
    }

    pub const fn optional(mut self) -> Self {
        self.optional = true;
        self
    }

    pub const fn token(mut self, token: &'static CStr) -> Self {
        self.token = Some(token);
        self
    }
}

/// A command's documentation.
pub struct CommandDoc {
    pub summary: &'static CStr,
    pub complexity: &'static CStr,
    /// Redis arity: N exact, -N at least N (argv[0] included).
    pub arity: c_int,
    pub args: &'static [ArgDoc],
}

pub const SINCE: &CStr = c"1.0.0";

/// A key spec's flags (`REDISMODULE_CMD_KEY_*`): one of `RO`/`RW`/`OW`/`RM`,
/// plus `ACCESS` when the reply reveals data of the key and at most one of
/// `INSERT`/`UPDATE`/`DELETE`. ACLs grant a key spec with `ACCESS` to `%R~`
/// patterns and one with `INSERT`/`UPDATE`/`DELETE` to `%W~` patterns (both
/// when both are set), exactly as for Redis's own commands.
#[derive(Clone, Copy)]
pub struct KeyFlags(pub u32);

impl KeyFlags {
    /// Reads the key and answers what it holds: `HGETALL`, `PTTL`.
    pub const READ: KeyFlags =
        KeyFlags(raw::REDISMODULE_CMD_KEY_RO | raw::REDISMODULE_CMD_KEY_ACCESS);
    /// Changes the key and answers something read from it: `HINCRBY`.
    pub const READ_UPDATE: KeyFlags = KeyFlags(
        raw::REDISMODULE_CMD_KEY_RW
            | raw::REDISMODULE_CMD_KEY_ACCESS
            | raw::REDISMODULE_CMD_KEY_UPDATE,
    );
    /// Changes the key, answering nothing of its content: `PEXPIRE`.
    pub const UPDATE: KeyFlags =
        KeyFlags(raw::REDISMODULE_CMD_KEY_RW | raw::REDISMODULE_CMD_KEY_UPDATE);
    /// Removes part of the key's content, maybe the key: `HDEL`.
    pub const REMOVE_PART: KeyFlags =
        KeyFlags(raw::REDISMODULE_CMD_KEY_RW | raw::REDISMODULE_CMD_KEY_DELETE);
    /// Deletes the key: `DEL`.
    pub const DELETE_KEY: KeyFlags =
        KeyFlags(raw::REDISMODULE_CMD_KEY_RM | raw::REDISMODULE_CMD_KEY_DELETE);
}

fn arg_type(kind: ArgKind) -> raw::RedisModuleCommandArgType {
    match kind {
        ArgKind::Key => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_KEY,
        ArgKind::String => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_STRING,
        ArgKind::Integer => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_INTEGER,
    }
}

/// The one key spec every command has: the key is argument 1, and only it.
fn key_spec(flags: KeyFlags) -> raw::RedisModuleCommandKeySpec {
    raw::RedisModuleCommandKeySpec {
        notes: ptr::null(),
        flags: u64::from(flags.0),
        begin_search_type: raw::RedisModuleKeySpecBeginSearchType_REDISMODULE_KSPEC_BS_INDEX,
        bs: raw::RedisModuleCommandKeySpec__bindgen_ty_1 {
            index: raw::RedisModuleCommandKeySpec__bindgen_ty_1__bindgen_ty_1 { pos: 1 },
        },
        find_keys_type: raw::RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_RANGE,
        fk: raw::RedisModuleCommandKeySpec__bindgen_ty_2 {
            range: raw::RedisModuleCommandKeySpec__bindgen_ty_2__bindgen_ty_1 {
                lastkey: 0,
                keystep: 1,
                limit: 0,
            },
        },
    }
}

/// Sets the docs and the key spec of a registered command. Redis copies
/// everything it is given.
pub fn describe(
    command: *mut raw::RedisModuleCommand,
    doc: &CommandDoc,
    key_flags: KeyFlags,
) -> Result<(), String> {
    let mut args: Vec<raw::RedisModuleCommandArg> = doc
        .args
        .iter()
        .map(|arg| raw::RedisModuleCommandArg {
            name: arg.name.as_ptr(),
            type_: arg_type(arg.kind),
            key_spec_index: if matches!(arg.kind, ArgKind::Key) {
                0
            } else {
                -1
            },
            token: arg.token.map_or(ptr::null(), CStr::as_ptr),
            summary: ptr::null(),
            since: ptr::null(),
            flags: if arg.optional {
                raw::REDISMODULE_CMD_ARG_OPTIONAL as c_int
            } else {
                0
            },
            deprecated_since: ptr::null(),
            subargs: ptr::null_mut(),
            display_text: ptr::null(),
        })
        .collect();
    // Both arrays end with an all-zero entry.
    args.push(unsafe { std::mem::zeroed() });
    let mut key_specs = [key_spec(key_flags), unsafe { std::mem::zeroed() }];
    let version = raw::RedisModuleCommandInfoVersion {
        version: 1,
        sizeof_historyentry: std::mem::size_of::<raw::RedisModuleCommandHistoryEntry>(),
        sizeof_keyspec: std::mem::size_of::<raw::RedisModuleCommandKeySpec>(),
        sizeof_arg: std::mem::size_of::<raw::RedisModuleCommandArg>(),
    };
    let info = raw::RedisModuleCommandInfo {
        version: &version,
        summary: doc.summary.as_ptr(),
        complexity: doc.complexity.as_ptr(),
        since: SINCE.as_ptr(),
        history: ptr::null_mut(),
        tips: ptr::null(),
        arity: doc.arity,
        key_specs: key_specs.as_mut_ptr(),
        args: args.as_mut_ptr(),
    };
    match unsafe { api!(RedisModule_SetCommandInfo)(command, &info) } {
        status if status == raw::REDISMODULE_OK as c_int => Ok(()),
        _ => Err("RedisModule_SetCommandInfo refused the command docs".to_string()),
    }
}

/// Creates the `lock` ACL category where the server supports module categories.
pub fn add_acl_category(ctx: *mut raw::RedisModuleCtx) -> bool {
    match unsafe { raw::RedisModule_AddACLCategory } {
        Some(add) => (unsafe { add(ctx, ACL_CATEGORY.as_ptr()) }) == raw::REDISMODULE_OK as c_int,
        None => false,
    }
}

/// Puts a command in `categories` (and in `lock` when `own_category`), where
/// the server supports setting module command categories.
pub fn set_acl_categories(
    command: *mut raw::RedisModuleCommand,
    categories: &CStr,
    own_category: bool,
) {
    let Some(set) = (unsafe { raw::RedisModule_SetCommandACLCategories }) else {
        return;
    };
    let mut all = categories.to_bytes().to_vec();
    if own_category {
        all.push(b' ');
        all.extend_from_slice(ACL_CATEGORY.to_bytes());
    }
    let Ok(all) = std::ffi::CString::new(all) else {
        return;
    };
    unsafe { set(command, all.as_ptr()) };
}
