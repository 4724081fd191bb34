//! `COMMAND DOCS` / `COMMAND INFO` metadata and ACL categories for our commands.
//!
//! Each command file declares a [`CommandDoc`]; [`describe`] hands it to
//! `RedisModule_SetCommandInfo` (present since 7.0), which also makes Redis
//! check the arity and lets redis-cli show argument hints. The key spec stays
//! the one Redis derives from `first,last,step = 1,1,1`.
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

fn arg_type(kind: ArgKind) -> raw::RedisModuleCommandArgType {
    match kind {
        ArgKind::Key => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_KEY,
        ArgKind::String => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_STRING,
        ArgKind::Integer => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_INTEGER,
    }
}

/// Sets the docs of a registered command. Redis copies everything it is given.
pub fn describe(command: *mut raw::RedisModuleCommand, doc: &CommandDoc) -> Result<(), String> {
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
    // The array ends with an all-zero entry.
    args.push(unsafe { std::mem::zeroed() });
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
        key_specs: ptr::null_mut(),
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
