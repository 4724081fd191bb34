//! Subscriptions: keyspace notifications and server events.

use std::ffi::CStr;
use std::os::raw::{c_char, c_int, c_void};

use super::context::NotifyClass;
use super::{api, in_callback, raw, Ctx, RStr, OK};

/// Hears keyspace notifications (whatever `notify-keyspace-events` says:
/// module subscribers get every event of the classes they asked for).
pub trait KeyspaceListener {
    fn notified(ctx: Ctx, event: &[u8], key: RStr);
}

/// Subscribes `L` to keyspace notifications of `classes`.
///
/// Any context of the module will do, at any time, not only at load: Redis
/// adds a subscriber to its list (a second subscription of the same class
/// would call `L` twice per event: callers keep track). From then on Redis
/// builds a module context for every event of those classes, whatever the
/// key, before `L` can look at it: the price of hearing a class.
pub fn subscribe_keyspace<L: KeyspaceListener>(
    ctx: Ctx,
    classes: NotifyClass,
) -> Result<(), String> {
    // SAFETY: the call's valid context; the callback is ours below.
    let status = unsafe {
        api!(RedisModule_SubscribeToKeyspaceEvents)(ctx.as_ptr(), classes.0, Some(on_keyspace::<L>))
    };
    if status == OK {
        Ok(())
    } else {
        Err("could not subscribe to keyspace events".to_string())
    }
}

/// Whether this server can take a keyspace subscription back
/// (`RedisModule_UnsubscribeFromKeyspaceEvents`: Redis 8.2 and later; not
/// Redis 7.x, nor Valkey up to 9.1).
pub fn can_unsubscribe_keyspace() -> bool {
    // SAFETY: reads a function pointer RedisModule_Init set (or left None);
    // nothing writes it afterwards.
    unsafe { raw::RedisModule_UnsubscribeFromKeyspaceEvents }.is_some()
}

/// Takes back the subscription [`subscribe_keyspace`] made for `L` and
/// exactly these `classes` (Redis matches the mask and the callback).
/// `Err` where the server cannot ([`can_unsubscribe_keyspace`]) or found no
/// such subscription.
///
/// Never call it while Redis may be walking its subscriber list (inside a
/// keyspace notification, ours or another module's): Redis frees the
/// subscriber at once, and the walk may be holding it as its next one. A
/// timer's callback is safe.
pub fn unsubscribe_keyspace<L: KeyspaceListener>(
    ctx: Ctx,
    classes: NotifyClass,
) -> Result<(), String> {
    // SAFETY: as in `can_unsubscribe_keyspace`.
    let Some(unsubscribe) = (unsafe { raw::RedisModule_UnsubscribeFromKeyspaceEvents }) else {
        return Err("this server cannot unsubscribe from keyspace events".to_string());
    };
    // SAFETY: the call's valid context; the callback is the one subscribed.
    let status = unsafe { unsubscribe(ctx.as_ptr(), classes.0, Some(on_keyspace::<L>)) };
    if status == OK {
        Ok(())
    } else {
        Err("no such keyspace subscription".to_string())
    }
}

extern "C" fn on_keyspace<L: KeyspaceListener>(
    ctx: *mut raw::RedisModuleCtx,
    _type: c_int,
    event: *const c_char,
    key: *mut raw::RedisModuleString,
) -> c_int {
    // SAFETY: Redis passes a context, a C string event name and the key.
    let (ctx, key) = unsafe { (Ctx::from_raw(ctx), RStr::from_raw(key)) };
    in_callback(ctx, "a keyspace notification", |ctx| {
        let Some(key) = key else {
            return;
        };
        let event = if event.is_null() {
            &[][..]
        } else {
            // SAFETY: a non-null event name, a NUL-terminated C string
            // Redis keeps alive during the notification.
            unsafe { CStr::from_ptr(event) }.to_bytes()
        };
        L::notified(ctx, event, key);
    });
    OK
}

/// A server event, decoded.
#[derive(Debug)]
pub enum ServerEvent<'a> {
    /// `FLUSHDB` (`Some(db)`) or `FLUSHALL` (`None`) has emptied the data.
    Flushed { db: Option<i32> },
    /// This server has just become a replica.
    BecameReplica,
    /// The server became a master (promoted, `REPLICAOF NO ONE`).
    BecameMaster,
    /// `CONFIG SET` changed these configs (canonical names).
    ConfigChanged { names: &'a [&'a [u8]] },
    /// A replica loaded a full sync into a temporary database
    /// (`repl-diskless-load swapdb`) and swapped it in.
    SwappedIn,
}

/// Which server event to subscribe to.
#[derive(Clone, Copy, Debug)]
pub enum ServerEventKind {
    Flush,
    RoleChange,
    ConfigChange,
    AsyncLoad,
}

/// Hears the server events it subscribed to.
pub trait ServerEventListener {
    fn on_server_event(ctx: Ctx, event: ServerEvent);
}

/// Subscribes `L` to `kind`. `Err` if the server does not offer it.
pub fn subscribe_server_event<L: ServerEventListener>(
    ctx: Ctx,
    kind: ServerEventKind,
) -> Result<(), String> {
    let id = match kind {
        ServerEventKind::Flush => raw::REDISMODULE_EVENT_FLUSHDB,
        ServerEventKind::RoleChange => raw::REDISMODULE_EVENT_REPLICATION_ROLE_CHANGED,
        ServerEventKind::ConfigChange => raw::REDISMODULE_EVENT_CONFIG,
        ServerEventKind::AsyncLoad => raw::REDISMODULE_EVENT_REPL_ASYNC_LOAD,
    };
    let event = raw::RedisModuleEvent { id, dataver: 1 };
    // SAFETY: a load-time context; the callback is ours below.
    let status = unsafe {
        api!(RedisModule_SubscribeToServerEvent)(ctx.as_ptr(), event, Some(on_server_event::<L>))
    };
    if status == OK {
        Ok(())
    } else {
        Err(format!("could not subscribe to the {kind:?} server event"))
    }
}

extern "C" fn on_server_event<L: ServerEventListener>(
    ctx: *mut raw::RedisModuleCtx,
    event: raw::RedisModuleEvent,
    sub: u64,
    data: *mut c_void,
) {
    // SAFETY: Redis passes a context, the event, and its documented data.
    in_callback(
        unsafe { Ctx::from_raw(ctx) },
        "a server event",
        |ctx| match event.id {
            raw::REDISMODULE_EVENT_FLUSHDB if sub == raw::REDISMODULE_SUBEVENT_FLUSHDB_END => {
                if data.is_null() {
                    return;
                }
                // SAFETY: FLUSHDB events carry a RedisModuleFlushInfoV1.
                let info = unsafe { &*(data as *const raw::RedisModuleFlushInfoV1) };
                let db = (info.dbnum >= 0).then_some(info.dbnum);
                L::on_server_event(ctx, ServerEvent::Flushed { db });
            }
            raw::REDISMODULE_EVENT_REPLICATION_ROLE_CHANGED
                if sub == raw::REDISMODULE_EVENT_REPLROLECHANGED_NOW_REPLICA =>
            {
                L::on_server_event(ctx, ServerEvent::BecameReplica);
            }
            raw::REDISMODULE_EVENT_REPLICATION_ROLE_CHANGED
                if sub == raw::REDISMODULE_EVENT_REPLROLECHANGED_NOW_MASTER =>
            {
                L::on_server_event(ctx, ServerEvent::BecameMaster);
            }
            raw::REDISMODULE_EVENT_CONFIG if sub == raw::REDISMODULE_SUBEVENT_CONFIG_CHANGE => {
                if data.is_null() {
                    return;
                }
                // SAFETY: config-change events carry a RedisModuleConfigChangeV1
                // whose `config_names` holds `num_changes` C strings.
                let change = unsafe { &*(data as *const raw::RedisModuleConfigChangeV1) };
                if change.config_names.is_null() {
                    return;
                }
                // SAFETY: `config_names` is non-null and holds `num_changes`
                // pointers, alive for the duration of the event.
                let names: Vec<&[u8]> = unsafe {
                    std::slice::from_raw_parts(change.config_names, change.num_changes as usize)
                }
                .iter()
                .filter(|name| !name.is_null())
                .map(|&name| {
                    // SAFETY: a non-null config name, a NUL-terminated C string
                    // alive for the duration of the event.
                    unsafe { CStr::from_ptr(name) }.to_bytes()
                })
                .collect();
                L::on_server_event(ctx, ServerEvent::ConfigChanged { names: &names });
            }
            raw::REDISMODULE_EVENT_REPL_ASYNC_LOAD
                if sub == raw::REDISMODULE_SUBEVENT_REPL_ASYNC_LOAD_COMPLETED =>
            {
                L::on_server_event(ctx, ServerEvent::SwappedIn);
            }
            _ => {}
        },
    );
}
