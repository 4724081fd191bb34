//! Commands: their specs (name, flags, ACL categories, key spec, docs), their
//! registration, and the entry point Redis calls.
//!
//! Each command file implements [`Command`], its spec next to its code;
//! [`register`] gives every spec to Redis:
//! * `RedisModule_CreateCommand` with key positions 1,1,1 (cluster routing,
//!   `COMMAND GETKEYS`, older clients);
//! * `RedisModule_SetCommandInfo` (7.0+) with the docs (so Redis checks the
//!   arity and redis-cli shows hints) and the key spec. Without a key spec
//!   Redis derives one from 1,1,1 that claims full access (`RW access
//!   update`), so ACL `%R~` users were refused even `LOCK.INFO`;
//!   `SetCommandInfo` replaces that derived spec (7.0.15, 8.x and Valkey
//!   allow exactly this one to be replaced) and keeps 1,1,1;
//! * ACL categories (`@write`/`@read`/`@fast` and the module's own `@lock`)
//!   through `SetCommandACLCategories` / `AddACLCategory`, which Redis 7.0
//!   lacks: used where present, so loading never fails on 7.0.

use crate::errors::{self, Refusal};
use std::ffi::{CStr, CString};
use std::os::raw::c_int;
use std::ptr;

use super::{api, raw, Ctx, RStr, OK};

/// The module's own ACL category: `+@lock` allows every `LOCK.*` command.
pub const ACL_CATEGORY: &CStr = c"lock";

#[derive(Clone, Copy)]
pub enum ArgKind {
    Key,
    String,
    Integer,
    /// A flag word alone, like `TOKEN` (give it as the argument's token too).
    PureToken,
}

/// One argument as `COMMAND DOCS` shows it.
pub struct ArgDoc {
    pub name: &'static CStr,
    pub kind: ArgKind,
    /// A leading token, e.g. `WAIT` for `WAIT timeout-ms`.
    pub token: Option<&'static CStr>,
    pub optional: bool,
    /// It may be given more than once (`id [id ...]`).
    pub multiple: bool,
}

impl ArgDoc {
    pub const fn new(name: &'static CStr, kind: ArgKind) -> Self {
        ArgDoc {
            name,
            kind,
            token: None,
            optional: false,
            multiple: false,
        }
    }

    pub const fn multiple(mut self) -> Self {
        self.multiple = true;
        self
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

/// What a command is to Redis: its flags and, following from them, its ACL
/// categories besides `@lock` (`readonly` gives `@read`, `write` gives
/// `@write`, `fast` gives `@fast`, as Redis derives them for its own
/// commands), so that the two can never disagree.
#[derive(Clone, Copy)]
pub enum Access {
    /// `readonly`: reads the key, with work that grows with its content.
    Read,
    /// `readonly fast`.
    ReadFast,
    /// `write fast`: changes or removes, never adds much memory.
    WriteFast,
    /// `write deny-oom fast`: may add data, so refused when Redis is out of
    /// memory (as `SET` is).
    GrowFast,
}

impl Access {
    /// The command flags Redis is given.
    pub const fn flags(self) -> &'static CStr {
        match self {
            Access::Read => c"readonly",
            Access::ReadFast => c"readonly fast",
            Access::WriteFast => c"write fast",
            Access::GrowFast => c"write deny-oom fast",
        }
    }

    /// The ACL categories besides `@lock`.
    pub const fn acl_categories(self) -> &'static CStr {
        match self {
            Access::Read => c"read",
            Access::ReadFast => c"read fast",
            Access::WriteFast | Access::GrowFast => c"write fast",
        }
    }
}

/// A key spec's flags (`REDISMODULE_CMD_KEY_*`): one of `RO`/`RW`/`OW`/`RM`,
/// plus `ACCESS` when the reply reveals data of the key and at most one of
/// `INSERT`/`UPDATE`/`DELETE`. ACLs grant a key spec with `ACCESS` to `%R~`
/// patterns and one with `INSERT`/`UPDATE`/`DELETE` to `%W~` patterns (both
/// when both are set), exactly as for Redis's own commands.
#[derive(Clone, Copy)]
pub struct KeyFlags(u32);

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
    /// The command takes no key (`LOCK.SCAN`, like `SCAN`): key positions
    /// 0, no key spec; it checks key permissions itself.
    pub const NO_KEY: KeyFlags = KeyFlags(0);
    /// Deletes the key: `DEL`.
    pub const DELETE_KEY: KeyFlags =
        KeyFlags(raw::REDISMODULE_CMD_KEY_RM | raw::REDISMODULE_CMD_KEY_DELETE);
}

/// Everything Redis is told about a command.
pub struct CommandSpec {
    /// `lock.acquire`...
    pub name: &'static CStr,
    /// Command flags, and the ACL categories that follow from them.
    pub access: Access,
    /// What the command does to its one key, argument 1.
    pub key: KeyFlags,
    pub summary: &'static CStr,
    pub complexity: &'static CStr,
    /// Redis arity: N exact, -N at least N (`argv[0]` included).
    pub arity: c_int,
    pub args: &'static [ArgDoc],
}

impl CommandSpec {
    /// The command's name as a Rust string (for messages). A `const fn`,
    /// so that the compiler folds it for a spec it knows (every parse names
    /// its command: no UTF-8 check per call).
    pub const fn name(&self) -> &'static str {
        match std::str::from_utf8(self.name.to_bytes()) {
            Ok(name) => name,
            Err(_) => "lock.*",
        }
    }
}

/// What a command handler returns: `Ok` once it has replied, or the error
/// to reply with (in which case it has not replied and changed nothing).
pub type CommandResult = Result<(), Refusal>;

/// A `LOCK.*` command.
pub trait Command {
    const SPEC: CommandSpec;
    /// Runs the command for `argv` (`argv[0]` is its name) and replies.
    fn run(ctx: Ctx, argv: &[RStr]) -> CommandResult;
}

/// A command ready to register: its spec, its entry point, and the release
/// that brought it (`COMMAND DOCS`' "since").
pub struct Registration {
    spec: &'static CommandSpec,
    entry: raw::RedisModuleCmdFunc,
    since: &'static CStr,
}

impl Registration {
    pub const fn of<C: Command>(since: &'static CStr) -> Registration {
        Registration {
            spec: &C::SPEC,
            entry: Some(entry::<C>),
            since,
        }
    }

    /// The command's name, as registered.
    #[cfg(test)]
    pub fn name(&self) -> &'static str {
        self.spec.name()
    }

    /// The release that brought the command.
    #[cfg(test)]
    pub fn since(&self) -> &'static str {
        self.since.to_str().unwrap_or("")
    }
}

/// The argument vector of a call, as borrowed strings (no copy).
///
/// # Safety
/// `argv` must hold `argc` valid, non-null strings that outlive `'a`, as
/// Redis guarantees for a command's (and a blocked command's) arguments.
pub(crate) unsafe fn args<'a>(
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
) -> &'a [RStr<'a>] {
    if argv.is_null() || argc <= 0 {
        return &[];
    }
    // SAFETY: RStr is a transparent non-null string pointer, and Redis's argv
    // entries are non-null.
    unsafe { std::slice::from_raw_parts(argv.cast::<RStr<'a>>(), argc as usize) }
}

/// The entry point Redis calls for command `C`: replies `C`'s error, and
/// turns a panic into an error reply rather than unwinding into C (which
/// would abort the server).
extern "C" fn entry<C: Command>(
    ctx: *mut raw::RedisModuleCtx,
    argv: *mut *mut raw::RedisModuleString,
    argc: c_int,
) -> c_int {
    // SAFETY: Redis passes the command's context and its `argc` arguments.
    let Some(ctx) = (unsafe { Ctx::from_raw(ctx) }) else {
        return OK;
    };
    // SAFETY: Redis's argv holds `argc` non-null strings that live for the
    // whole command call, which `'a` (the context's) does not outlast.
    let args = unsafe { args(argv, argc) };
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| C::run(ctx, args))) {
        Ok(Ok(())) => {}
        Ok(Err(refusal)) => ctx.reply_error(refusal.text()),
        Err(_) => {
            ctx.log_warning("lock module: a command handler panicked; replied with an error");
            ctx.reply_error(errors::INTERNAL.text());
        }
    }
    OK
}

/// Registers every command with Redis, with its docs, key spec and ACL
/// categories.
pub fn register(ctx: Ctx, commands: &[Registration]) -> Result<(), String> {
    let own_category = add_acl_category(ctx);
    for Registration { spec, entry, since } in commands {
        let name = spec.name();
        let (first, last, step) = if spec.key.0 == 0 {
            (0, 0, 0)
        } else {
            (1, 1, 1)
        };
        // SAFETY: a load-time context; Redis copies the name and flags.
        let status = unsafe {
            api!(RedisModule_CreateCommand)(
                ctx.as_ptr(),
                spec.name.as_ptr(),
                *entry,
                spec.access.flags().as_ptr(),
                first,
                last,
                step,
            )
        };
        if status != OK {
            return Err(format!("could not create command {name}"));
        }
        // SAFETY: the load-time context and a NUL-terminated name; Redis
        // only looks the name up, and returns NULL if it is unknown.
        let command = unsafe { api!(RedisModule_GetCommand)(ctx.as_ptr(), spec.name.as_ptr()) };
        if command.is_null() {
            return Err(format!("could not find command {name} just created"));
        }
        describe(command, spec, since).map_err(|e| format!("{name}: {e}"))?;
        set_acl_categories(command, spec.access.acl_categories(), own_category);
    }
    Ok(())
}

fn arg_type(kind: ArgKind) -> raw::RedisModuleCommandArgType {
    match kind {
        ArgKind::Key => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_KEY,
        ArgKind::String => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_STRING,
        ArgKind::Integer => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_INTEGER,
        ArgKind::PureToken => raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_PURE_TOKEN,
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
fn describe(
    command: *mut raw::RedisModuleCommand,
    spec: &CommandSpec,
    since: &CStr,
) -> Result<(), String> {
    let mut args: Vec<raw::RedisModuleCommandArg> = spec
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
            flags: (if arg.optional {
                raw::REDISMODULE_CMD_ARG_OPTIONAL as c_int
            } else {
                0
            }) | (if arg.multiple {
                raw::REDISMODULE_CMD_ARG_MULTIPLE as c_int
            } else {
                0
            }),
            deprecated_since: ptr::null(),
            subargs: ptr::null_mut(),
            display_text: ptr::null(),
        })
        .collect();
    // Both arrays end with an all-zero entry.
    // SAFETY: RedisModuleCommandArg is plain C data (integers, nullable
    // pointers, nullable fn pointers), for which all-zero is valid and is
    // the documented terminator.
    args.push(unsafe { std::mem::zeroed() });
    // SAFETY: likewise for RedisModuleCommandKeySpec.
    let terminator: raw::RedisModuleCommandKeySpec = unsafe { std::mem::zeroed() };
    let mut key_specs = if spec.key.0 == 0 {
        vec![terminator]
    } else {
        vec![key_spec(spec.key), terminator]
    };
    let version = raw::RedisModuleCommandInfoVersion {
        version: 1,
        sizeof_historyentry: std::mem::size_of::<raw::RedisModuleCommandHistoryEntry>(),
        sizeof_keyspec: std::mem::size_of::<raw::RedisModuleCommandKeySpec>(),
        sizeof_arg: std::mem::size_of::<raw::RedisModuleCommandArg>(),
    };
    let info = raw::RedisModuleCommandInfo {
        version: &version,
        summary: spec.summary.as_ptr(),
        complexity: spec.complexity.as_ptr(),
        since: since.as_ptr(),
        history: ptr::null_mut(),
        tips: ptr::null(),
        arity: spec.arity,
        key_specs: key_specs.as_mut_ptr(),
        args: args.as_mut_ptr(),
    };
    // SAFETY: every pointer in `info` lives until the call returns; Redis copies.
    match unsafe { api!(RedisModule_SetCommandInfo)(command, &info) } {
        OK => Ok(()),
        _ => Err("RedisModule_SetCommandInfo refused the command docs".to_string()),
    }
}

/// Creates the `lock` ACL category where the server supports module categories.
fn add_acl_category(ctx: Ctx) -> bool {
    // SAFETY: reads an optional function pointer of the table
    // RedisModule_Init filled (NULL on servers without it: Redis 7.0); nothing
    // writes it later.
    match unsafe { raw::RedisModule_AddACLCategory } {
        // SAFETY: the load-time context (categories can only be added while
        // loading) and a NUL-terminated name, which Redis copies.
        Some(add) => (unsafe { add(ctx.as_ptr(), ACL_CATEGORY.as_ptr()) }) == OK,
        None => false,
    }
}

/// Puts a command in `categories` (and in `lock` when `own_category`), where
/// the server supports setting module command categories.
fn set_acl_categories(
    command: *mut raw::RedisModuleCommand,
    categories: &CStr,
    own_category: bool,
) {
    // SAFETY: reads an optional function pointer of the table
    // RedisModule_Init filled (NULL on servers without it: Redis 7.0); nothing
    // writes it later.
    let Some(set) = (unsafe { raw::RedisModule_SetCommandACLCategories }) else {
        return;
    };
    let mut all = categories.to_bytes().to_vec();
    if own_category {
        all.push(b' ');
        all.extend_from_slice(ACL_CATEGORY.to_bytes());
    }
    let Ok(all) = CString::new(all) else {
        return;
    };
    // SAFETY: `command` is the non-null handle GetCommand returned for one
    // of our commands during this load, and `all` a NUL-terminated string
    // alive during the call; Redis parses it without keeping it.
    unsafe { set(command, all.as_ptr()) };
}
