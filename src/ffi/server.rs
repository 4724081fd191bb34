//! The server as a whole: module options, `INFO` sections, reading server
//! info, applying module configs.

use std::ffi::CStr;
use std::os::raw::c_int;
use std::ptr::NonNull;

use super::{api, raw, Ctx, OK};

/// Module options, set once at load.
pub struct ModuleOptions(u32);

impl ModuleOptions {
    /// Redis does not signal a key as modified just because we opened it for
    /// writing: the module signals real writes itself.
    pub const NO_IMPLICIT_SIGNAL_MODIFIED: ModuleOptions =
        ModuleOptions(raw::REDISMODULE_OPTION_NO_IMPLICIT_SIGNAL_MODIFIED);
    /// The module supports replicas loading a full sync asynchronously
    /// (`repl-diskless-load swapdb`).
    pub const HANDLE_REPL_ASYNC_LOAD: ModuleOptions =
        ModuleOptions(raw::REDISMODULE_OPTIONS_HANDLE_REPL_ASYNC_LOAD);

    pub const fn and(self, other: ModuleOptions) -> ModuleOptions {
        ModuleOptions(self.0 | other.0)
    }
}

/// Sets the module's options (replacing any set before).
pub fn set_module_options(ctx: Ctx, options: ModuleOptions) {
    // SAFETY: a load-time context.
    unsafe { api!(RedisModule_SetModuleOptions)(ctx.as_ptr(), options.0 as c_int) };
}

/// Applies the module configs registered so far (their defaults, then
/// redis.conf / `MODULE LOADEX` values). `Err` if Redis refused a value.
pub fn load_configs(ctx: Ctx) -> Result<(), String> {
    // SAFETY: a load-time context (Redis 7.0+).
    if unsafe { api!(RedisModule_LoadConfigs)(ctx.as_ptr()) } == OK {
        Ok(())
    } else {
        Err("lock module: a lock.* config value was refused (see the line above)".to_string())
    }
}

/// One `INFO` section as the server reports it, read once; freed on drop.
pub struct ServerInfo<'a> {
    ctx: Ctx<'a>,
    info: NonNull<raw::RedisModuleServerInfoData>,
}

impl<'a> ServerInfo<'a> {
    /// Reads `INFO <section>`; `None` if the server gives nothing.
    pub fn read(ctx: Ctx<'a>, section: &CStr) -> Option<ServerInfo<'a>> {
        // SAFETY: a valid context; the info object is freed on drop.
        let info = unsafe { api!(RedisModule_GetServerInfo)(ctx.as_ptr(), section.as_ptr()) };
        NonNull::new(info).map(|info| ServerInfo { ctx, info })
    }

    /// One field's value, `None` when the section has no such field.
    pub fn field(&self, name: &CStr) -> Option<String> {
        // SAFETY: a live info object; the value lives as long as it does,
        // and is copied out here.
        let value =
            unsafe { api!(RedisModule_ServerInfoGetFieldC)(self.info.as_ptr(), name.as_ptr()) };
        (!value.is_null()).then(|| {
            // SAFETY: a NUL-terminated string owned by the info object.
            unsafe { CStr::from_ptr(value) }
                .to_string_lossy()
                .into_owned()
        })
    }
}

impl Drop for ServerInfo<'_> {
    fn drop(&mut self) {
        // SAFETY: made by GetServerInfo with this context, freed once.
        unsafe { api!(RedisModule_FreeServerInfo)(self.ctx.as_ptr(), self.info.as_ptr()) };
    }
}

/// What the server says about its version, read at load before anything
/// else (`server_version.rs` decides). Every function is looked up, not
/// assumed: this runs on servers too old for the module, where a missing one
/// must not crash the server.
pub fn probe_version(ctx: Ctx) -> crate::server_version::Probe {
    // SAFETY: reads function pointers of the table RedisModule_Init filled;
    // nothing writes it afterwards.
    let (version, info, field, free) = unsafe {
        (
            raw::RedisModule_GetServerVersion,
            raw::RedisModule_GetServerInfo,
            raw::RedisModule_ServerInfoGetFieldC,
            raw::RedisModule_FreeServerInfo,
        )
    };
    let mut probe = crate::server_version::Probe {
        // SAFETY: takes no arguments and only returns a constant.
        api_version: version.map(|version| unsafe { version() }),
        ..Default::default()
    };
    if info.is_some() && field.is_some() && free.is_some() {
        if let Some(server) = ServerInfo::read(ctx, c"server") {
            probe.redis_version = server.field(c"redis_version");
            probe.server_name = server.field(c"server_name");
            probe.valkey_version = server.field(c"valkey_version");
        }
    }
    probe
}

/// One field of `INFO <section>` as the server reports it.
pub fn info_field(ctx: Ctx, section: &CStr, field: &CStr) -> Option<String> {
    ServerInfo::read(ctx, section)?.field(field)
}

/// A server config's value as `CONFIG GET` reports it, `None` if it cannot
/// be read (no such config, or `CONFIG` renamed or disabled).
pub fn config_get(ctx: Ctx, name: &CStr) -> Option<Vec<u8>> {
    // SAFETY: "cc" matches the two C strings; the reply is freed below.
    let reply = unsafe {
        api!(RedisModule_Call)(
            ctx.as_ptr(),
            c"CONFIG".as_ptr(),
            c"cc".as_ptr(),
            c"GET".as_ptr(),
            name.as_ptr(),
        )
    };
    let reply = NonNull::new(reply)?;
    // SAFETY: a live reply; elements and strings belong to it and are
    // copied out before it is freed.
    let value = unsafe {
        let value = (api!(RedisModule_CallReplyType)(reply.as_ptr())
            == raw::REDISMODULE_REPLY_ARRAY as c_int)
            .then(|| api!(RedisModule_CallReplyArrayElement)(reply.as_ptr(), 1))
            .filter(|element| !element.is_null())
            .and_then(|element| {
                let mut len = 0usize;
                let ptr = api!(RedisModule_CallReplyStringPtr)(element, &mut len);
                (!ptr.is_null()).then(|| std::slice::from_raw_parts(ptr.cast::<u8>(), len).to_vec())
            });
        api!(RedisModule_FreeCallReply)(reply.as_ptr());
        value
    };
    value
}

/// One step of `SCAN` over the selected database, as the server runs it
/// (its `MATCH` glob, its `COUNT` of work, its skipping of expired keys):
/// the next cursor (0 at the end) and the keys found. `None` if the server
/// refused (it does not for a valid cursor).
pub fn scan_step(
    ctx: Ctx,
    cursor: u64,
    pattern: Option<&[u8]>,
    count: u64,
) -> Option<(u64, Vec<Vec<u8>>)> {
    let cursor = cursor.to_string();
    let count = count.to_string();
    let mut args: Vec<&[u8]> = vec![cursor.as_bytes()];
    if let Some(pattern) = pattern {
        args.extend([&b"MATCH"[..], pattern]);
    }
    args.extend([&b"COUNT"[..], count.as_bytes()]);
    let args: Vec<super::OwnedStr> = args.into_iter().map(super::OwnedStr::new).collect();
    let argv: Vec<*mut raw::RedisModuleString> = args.iter().map(|a| a.borrow().as_ptr()).collect();
    // SAFETY: "v" takes the argv array and its length, both alive for the
    // call; the reply is freed below.
    let reply = unsafe {
        api!(RedisModule_Call)(
            ctx.as_ptr(),
            c"SCAN".as_ptr(),
            c"v".as_ptr(),
            argv.as_ptr(),
            argv.len(),
        )
    };
    let reply = NonNull::new(reply)?;
    // SAFETY: a live reply; its elements and strings belong to it and are
    // copied out before it is freed.
    let step = unsafe {
        let bytes = |element: *mut raw::RedisModuleCallReply| -> Option<Vec<u8>> {
            if element.is_null() {
                return None;
            }
            let mut len = 0usize;
            let ptr = api!(RedisModule_CallReplyStringPtr)(element, &mut len);
            (!ptr.is_null()).then(|| std::slice::from_raw_parts(ptr.cast::<u8>(), len).to_vec())
        };
        let array = raw::REDISMODULE_REPLY_ARRAY as c_int;
        let step = (api!(RedisModule_CallReplyType)(reply.as_ptr()) == array)
            .then(|| {
                let next = bytes(api!(RedisModule_CallReplyArrayElement)(reply.as_ptr(), 0))?;
                let next: u64 = std::str::from_utf8(&next).ok()?.parse().ok()?;
                let keys = api!(RedisModule_CallReplyArrayElement)(reply.as_ptr(), 1);
                if keys.is_null() || api!(RedisModule_CallReplyType)(keys) != array {
                    return None;
                }
                let n = api!(RedisModule_CallReplyLength)(keys);
                let keys = (0..n)
                    .filter_map(|i| bytes(api!(RedisModule_CallReplyArrayElement)(keys, i)))
                    .collect();
                Some((next, keys))
            })
            .flatten();
        api!(RedisModule_FreeCallReply)(reply.as_ptr());
        step
    };
    step
}

/// The user of the client behind `ctx`, to check key permissions against
/// (`None` when it cannot be found: a user deleted meanwhile).
pub struct CallerUser {
    user: NonNull<raw::RedisModuleUser>,
}

impl CallerUser {
    pub fn of(ctx: Ctx) -> Option<CallerUser> {
        // SAFETY: a command's context; the name is freed right after the
        // lookup, which copies nothing from it but the user pointer.
        let user = unsafe {
            let name = api!(RedisModule_GetCurrentUserName)(ctx.as_ptr());
            if name.is_null() {
                return None;
            }
            let user = api!(RedisModule_GetModuleUserFromUserName)(name);
            api!(RedisModule_FreeString)(ctx.as_ptr(), name);
            user
        };
        NonNull::new(user).map(|user| CallerUser { user })
    }

    /// Whether the user may read `key` (its key patterns, `%R~` included),
    /// as a command whose key spec reads the key would be checked.
    pub fn may_read(&self, key: super::RStr) -> bool {
        // SAFETY: a live user (freed on drop, used within the command that
        // looked it up) and a valid string.
        unsafe {
            api!(RedisModule_ACLCheckKeyPermissions)(
                self.user.as_ptr(),
                key.as_ptr(),
                raw::REDISMODULE_CMD_KEY_ACCESS as c_int,
            ) == OK
        }
    }
}

impl Drop for CallerUser {
    fn drop(&mut self) {
        // SAFETY: made by GetModuleUserFromUserName, freed once (this frees
        // the handle, not the ACL user).
        unsafe { api!(RedisModule_FreeModuleUser)(self.user.as_ptr()) };
    }
}

/// Asks every replica to acknowledge its replication offset now
/// (`REPLCONF GETACK *` into the replication stream, not the AOF), as
/// Redis's own `WAIT` does; replicas otherwise acknowledge once a second.
pub fn request_replica_acks(ctx: Ctx) {
    // SAFETY: "ccA" matches the two C strings; 'A' keeps it out of the AOF.
    let status = unsafe {
        api!(RedisModule_Replicate)(
            ctx.as_ptr(),
            c"REPLCONF".as_ptr(),
            c"ccA".as_ptr(),
            c"GETACK".as_ptr(),
            c"*".as_ptr(),
        )
    };
    if status != OK {
        ctx.log_warning("lock module: could not ask replicas for an acknowledgement");
    }
}

/// A context of the module's own, for calls outside any command (the INFO
/// callback has none): made once at load, never freed (one per load).
static DETACHED: std::sync::atomic::AtomicPtr<raw::RedisModuleCtx> =
    std::sync::atomic::AtomicPtr::new(std::ptr::null_mut());

/// Makes the module's own context (at load).
pub fn keep_detached_context(ctx: Ctx) {
    // SAFETY: a load-time context; the detached context Redis returns lives
    // until freed, which it never is.
    let detached = unsafe { api!(RedisModule_GetDetachedThreadSafeContext)(ctx.as_ptr()) };
    DETACHED.store(detached, std::sync::atomic::Ordering::Relaxed);
}

/// Runs `f` with the module's own context, on Redis's main thread (where
/// INFO callbacks run); `None` before it was made.
pub fn with_detached<T>(f: impl FnOnce(Ctx) -> T) -> Option<T> {
    let ptr = DETACHED.load(std::sync::atomic::Ordering::Relaxed);
    // SAFETY: made at load and never freed; used on the main thread only.
    unsafe { Ctx::from_raw(ptr) }.map(f)
}

/// Runs `command key` (one key argument, its reply dropped) as the module
/// itself: for `LOCK.INFO` run once to mark the command statistics
/// (`stats_reset.rs`).
pub fn call_quietly(ctx: Ctx, command: &CStr, key: &CStr) {
    // SAFETY: "c" takes the one C string; the reply is freed at once.
    unsafe {
        let reply =
            api!(RedisModule_Call)(ctx.as_ptr(), command.as_ptr(), c"c".as_ptr(), key.as_ptr());
        if !reply.is_null() {
            api!(RedisModule_FreeCallReply)(reply);
        }
    }
}

/// Writes the module's `INFO` sections.
pub struct InfoWriter {
    ctx: *mut raw::RedisModuleInfoCtx,
}

impl InfoWriter {
    /// Starts section `<module>_<name>`.
    pub fn section(&mut self, name: &str) {
        raw::add_info_section(self.ctx, Some(name));
    }

    pub fn field_u64(&mut self, name: &str, value: u64) {
        raw::add_info_field_unsigned_long_long(self.ctx, name, value);
    }

    pub fn field_str(&mut self, name: &str, value: &str) {
        raw::add_info_field_str(self.ctx, name, value);
    }
}

/// Provides the module's `INFO` sections.
pub trait InfoProvider {
    /// `for_crash_report`: INFO is written into a crash report, from a
    /// server that may be in any state: read only, call nothing.
    fn write_info(info: &mut InfoWriter, for_crash_report: bool);
}

/// Makes `P` the module's `INFO` callback (replacing the crate's default).
pub fn register_info<P: InfoProvider>(ctx: Ctx) {
    raw::register_info_function(ctx.as_ptr(), Some(info_callback::<P>));
}

extern "C" fn info_callback<P: InfoProvider>(ctx: *mut raw::RedisModuleInfoCtx, crash: c_int) {
    if ctx.is_null() {
        return;
    }
    // INFO also runs in crash reports: never unwind from here.
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        P::write_info(&mut InfoWriter { ctx }, crash != 0)
    }));
}
