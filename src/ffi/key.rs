//! Keys opened through the module key API: hash fields and expiry.
//!
//! The key API propagates nothing and fires no notifications; `lock_key.rs`
//! pairs every write with its replicated effect ([`Ctx::replicate_hset`]...).

use std::os::raw::{c_int, c_void};
use std::ptr;

use super::{api, raw, Ctx, RStr, OK};

/// What a key holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyKind {
    /// No such key (expired keys are removed when opened, or read as missing
    /// while Redis holds expiry back).
    Empty,
    Hash,
    String,
    SortedSet,
    /// Any other type.
    Other,
}

/// How a key is opened. Open for writing only what the call may change:
/// a key opened for writing is created on write, and a read-only open of a
/// missing key costs nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenMode {
    Read,
    Write,
}

/// An open key; closed when dropped.
pub struct Key<'a> {
    ctx: Ctx<'a>,
    name: RStr<'a>,
    /// NULL when a key opened for reading does not exist.
    ptr: *mut raw::RedisModuleKey,
}

impl<'a> Key<'a> {
    /// Opens `name` in the selected database, for writing or only reading.
    pub fn open(ctx: Ctx<'a>, name: RStr<'a>, mode: OpenMode) -> Key<'a> {
        let mode = match mode {
            OpenMode::Write => raw::REDISMODULE_READ | raw::REDISMODULE_WRITE,
            OpenMode::Read => raw::REDISMODULE_READ,
        };
        // SAFETY: a valid context and string; the key is closed on drop.
        let ptr = unsafe { api!(RedisModule_OpenKey)(ctx.as_ptr(), name.as_ptr(), mode as c_int) };
        Key { ctx, name, ptr }
    }

    pub fn name(&self) -> RStr<'a> {
        self.name
    }

    pub fn kind(&self) -> KeyKind {
        if self.ptr.is_null() {
            return KeyKind::Empty;
        }
        // SAFETY: a non-null key this value opened and keeps open; only read.
        match unsafe { api!(RedisModule_KeyType)(self.ptr) } as isize {
            raw::REDISMODULE_KEYTYPE_EMPTY => KeyKind::Empty,
            raw::REDISMODULE_KEYTYPE_HASH => KeyKind::Hash,
            raw::REDISMODULE_KEYTYPE_STRING => KeyKind::String,
            raw::REDISMODULE_KEYTYPE_ZSET => KeyKind::SortedSet,
            _ => KeyKind::Other,
        }
    }

    /// Reads the hash field `field`, if there is one, through `read` (no copy).
    pub fn hash_get<T>(&self, field: RStr, read: impl FnOnce(&[u8]) -> T) -> Option<T> {
        if self.kind() != KeyKind::Hash {
            return None;
        }
        let mut value: *mut raw::RedisModuleString = ptr::null_mut();
        // SAFETY: one field, its out-pointer, and the NULL terminator.
        let status = unsafe {
            api!(RedisModule_HashGet)(
                self.ptr,
                raw::REDISMODULE_HASH_NONE as c_int,
                field.as_ptr(),
                &mut value as *mut *mut raw::RedisModuleString,
                ptr::null_mut::<c_void>(),
            )
        };
        if status != OK {
            return None;
        }
        // SAFETY: HashGet hands us a new string, freed right below.
        let value = unsafe { RStr::from_raw(value) }?;
        let result = read(value.as_bytes());
        // SAFETY: the string HashGet created for us above, freed once, after
        // its last use (`read` returned and `value` is not used again).
        unsafe { api!(RedisModule_FreeString)(self.ctx.as_ptr(), value.as_ptr()) };
        Some(result)
    }

    /// Sets the hash field `field` to `value` (creating the hash).
    pub fn hash_set(&self, field: RStr, value: RStr) {
        if self.ptr.is_null() {
            return; // opened for reading and missing: nothing can be written
        }
        // SAFETY: a non-null key this value opened and keeps open (Redis
        // refuses, with ERR, a write to one opened only for reading); one
        // field/value pair and the NULL that ends HashSet's varargs. Redis
        // copies both strings.
        unsafe {
            api!(RedisModule_HashSet)(
                self.ptr,
                raw::REDISMODULE_HASH_NONE as c_int,
                field.as_ptr(),
                value.as_ptr(),
                ptr::null_mut::<c_void>(),
            )
        };
    }

    /// How many fields a hash has (elements of a zset, bytes of a string);
    /// 0 without a key.
    pub fn len(&self) -> usize {
        if self.ptr.is_null() {
            return 0;
        }
        // SAFETY: a non-null key this value opened and keeps open; only read.
        unsafe { api!(RedisModule_ValueLength)(self.ptr) }
    }

    /// Deletes the hash field `field` (the hash goes with its last field).
    pub fn hash_del(&self, field: RStr) {
        if self.kind() != KeyKind::Hash {
            return;
        }
        // SAFETY: a hash key this value keeps open for writing (Redis refuses,
        // with ERR, one opened only for reading); one field, the DELETE marker
        // Redis defines for this purpose, and the NULL that ends the varargs.
        unsafe {
            api!(RedisModule_HashSet)(
                self.ptr,
                raw::REDISMODULE_HASH_NONE as c_int,
                field.as_ptr(),
                raw::REDISMODULE_HASH_DELETE,
                ptr::null_mut::<c_void>(),
            )
        };
    }

    /// Reads a string key's value through `read`, if it is a string.
    ///
    /// Redis hands out the value in place (`StringDMA`); for a value stored
    /// in its integer or embedded encoding (`INCR`, `SET`) it first turns it
    /// into a plain string, which changes how it is stored, not what it is.
    pub fn string_get<T>(&self, read: impl FnOnce(&[u8]) -> T) -> Option<T> {
        if self.kind() != KeyKind::String {
            return None;
        }
        let mut len: usize = 0;
        // SAFETY: a string key; the pointer is valid until the key is
        // written or closed, and we copy out of it (through `read`) first.
        let ptr = unsafe {
            api!(RedisModule_StringDMA)(self.ptr, &mut len, raw::REDISMODULE_READ as c_int)
        };
        if ptr.is_null() {
            return None;
        }
        // SAFETY: StringDMA returned a non-null pointer to `len` bytes of the
        // value, valid until the key is written or closed; the slice is only
        // used by `read` below, while `&self` keeps the key open and unwritten.
        let bytes = unsafe { std::slice::from_raw_parts(ptr as *const u8, len) };
        Some(read(bytes))
    }

    /// Makes the key the string `value` (any old value and expiry go).
    pub fn string_set(&self, value: RStr) {
        if self.ptr.is_null() {
            return; // opened for reading and missing: nothing can be written
        }
        // SAFETY: a non-null open key (Redis refuses, with ERR, one opened
        // only for reading) and a valid string, of which Redis takes its own
        // reference.
        unsafe { api!(RedisModule_StringSet)(self.ptr, value.as_ptr()) };
    }

    /// Overwrites a string key's value in place with `value`, keeping its
    /// expiry (cheaper than [`Key::string_set`], which deletes and re-adds
    /// the key). False if the key is not a string.
    pub fn string_overwrite(&self, value: &[u8]) -> bool {
        if self.kind() != KeyKind::String {
            return false;
        }
        // SAFETY: a string key opened for writing; after the resize, the
        // pointer from DMA is valid for `len` bytes until the key is
        // written again or closed.
        unsafe {
            if api!(RedisModule_StringTruncate)(self.ptr, value.len()) != OK {
                return false;
            }
            let mut len: usize = 0;
            let ptr =
                api!(RedisModule_StringDMA)(self.ptr, &mut len, raw::REDISMODULE_WRITE as c_int);
            if ptr.is_null() || len != value.len() {
                return false;
            }
            std::ptr::copy_nonoverlapping(value.as_ptr(), ptr.cast::<u8>(), len);
        }
        true
    }

    /// Removes the key's expiry.
    pub fn persist(&self) {
        if self.ptr.is_null() {
            return;
        }
        // SAFETY: a non-null key this value keeps open (Redis refuses, with
        // ERR, to set the expiry of a key not opened for writing or empty).
        unsafe { api!(RedisModule_SetExpire)(self.ptr, raw::REDISMODULE_NO_EXPIRE as i64) };
    }

    /// Remaining time to live in ms, `None` without expiry (or key).
    pub fn ttl_ms(&self) -> Option<i64> {
        if self.kind() == KeyKind::Empty {
            return None;
        }
        // SAFETY: a non-empty key this value opened and keeps open; only read.
        let ttl = unsafe { api!(RedisModule_GetExpire)(self.ptr) };
        (ttl != raw::REDISMODULE_NO_EXPIRE as i64).then_some(ttl.max(0))
    }

    /// What `PTTL` answers: the remaining time to live in ms, -1 without
    /// expiry, -2 without key (of any type).
    pub fn pttl(&self) -> i64 {
        match self.kind() {
            KeyKind::Empty => -2,
            _ => self.ttl_ms().unwrap_or(-1),
        }
    }

    /// The absolute expiry in unix ms (what `PEXPIRETIME` answers), `None`
    /// without expiry (or key).
    pub fn abs_expire_ms(&self) -> Option<i64> {
        if self.kind() == KeyKind::Empty {
            return None;
        }
        // SAFETY: a non-empty key this value opened and keeps open; only read.
        let at = unsafe { api!(RedisModule_GetAbsExpire)(self.ptr) };
        (at != raw::REDISMODULE_NO_EXPIRE as i64).then_some(at)
    }

    /// Sets the absolute expiry (7.0+: master and replica on one deadline).
    pub fn set_abs_expire_ms(&self, at: i64) {
        if self.ptr.is_null() {
            return;
        }
        // SAFETY: a non-null key this value keeps open (Redis refuses, with
        // ERR, a key not opened for writing or an empty one); the deadline is
        // passed by value.
        unsafe { api!(RedisModule_SetAbsExpire)(self.ptr, at) };
    }

    pub fn delete(&self) {
        if self.ptr.is_null() {
            return; // opened for reading and missing: nothing to delete
        }
        // SAFETY: a non-null key this value keeps open (Redis refuses, with
        // ERR, one not opened for writing; an empty one is left as it is).
        unsafe { api!(RedisModule_DeleteKey)(self.ptr) };
    }

    /// Adds `member` with `score` to the sorted set (creating it), or
    /// changes its score.
    pub fn zset_add(&self, score: f64, member: RStr) {
        if self.ptr.is_null() {
            return; // opened for reading and missing: nothing can be written
        }
        // SAFETY: a non-null key this value keeps open (Redis refuses, with
        // ERR, one opened only for reading or of another type); a valid
        // member string Redis copies; no flags in or out.
        unsafe { api!(RedisModule_ZsetAdd)(self.ptr, score, member.as_ptr(), ptr::null_mut()) };
    }

    /// Removes `member` from the sorted set (the key goes with its last
    /// member). True if it was there.
    pub fn zset_rem(&self, member: RStr) -> bool {
        if self.kind() != KeyKind::SortedSet {
            return false;
        }
        let mut deleted: c_int = 0;
        // SAFETY: a sorted-set key this value keeps open for writing (Redis
        // refuses, with ERR, one opened only for reading); a valid member
        // string, only read; `deleted` outlives the call.
        let status = unsafe { api!(RedisModule_ZsetRem)(self.ptr, member.as_ptr(), &mut deleted) };
        status == OK && deleted != 0
    }

    /// The score of `member`, if the key is a sorted set holding it.
    pub fn zset_score(&self, member: RStr) -> Option<f64> {
        if self.kind() != KeyKind::SortedSet {
            return None;
        }
        let mut score: f64 = 0.0;
        // SAFETY: a sorted-set key this value keeps open; a valid member
        // string, only read; `score` outlives the call.
        let status = unsafe { api!(RedisModule_ZsetScore)(self.ptr, member.as_ptr(), &mut score) };
        (status == OK).then_some(score)
    }

    /// The members with a score in `min..=max`, lowest first, at most
    /// `limit` of them, each with its score.
    pub fn zset_range_by_score(&self, min: f64, max: f64, limit: usize) -> Vec<(Vec<u8>, f64)> {
        let mut out = Vec::new();
        if self.kind() != KeyKind::SortedSet || limit == 0 {
            return out;
        }
        // SAFETY: a sorted-set key this value keeps open; an inclusive range.
        if unsafe { api!(RedisModule_ZsetFirstInScoreRange)(self.ptr, min, max, 0, 0) } != OK {
            return out;
        }
        // SAFETY: the range started above, on this open key, walked while
        // it has elements and stopped once below.
        while out.len() < limit && unsafe { api!(RedisModule_ZsetRangeEndReached)(self.ptr) } == 0 {
            let mut score: f64 = 0.0;
            // SAFETY: the current element of the open range; Redis hands us
            // a new string, freed right after its bytes are copied.
            let member = unsafe { api!(RedisModule_ZsetRangeCurrentElement)(self.ptr, &mut score) };
            // SAFETY: a string Redis just created for us (or NULL).
            if let Some(member) = unsafe { RStr::from_raw(member) } {
                out.push((member.as_bytes().to_vec(), score));
                // SAFETY: the string made for us above, freed once, after
                // its last use.
                unsafe { api!(RedisModule_FreeString)(self.ctx.as_ptr(), member.as_ptr()) };
            }
            // SAFETY: the open range on this key.
            if unsafe { api!(RedisModule_ZsetRangeNext)(self.ptr) } == 0 {
                break;
            }
        }
        // SAFETY: the range started above, stopped once.
        unsafe { api!(RedisModule_ZsetRangeStop)(self.ptr) };
        out
    }

    /// The number of elements of the value (a hash's fields, a sorted
    /// set's members, a string's bytes); 0 for no key.
    pub fn value_len(&self) -> usize {
        if self.ptr.is_null() {
            return 0;
        }
        // SAFETY: an open key (non-null), read only.
        unsafe { api!(RedisModule_ValueLength)(self.ptr) }
    }

    /// Every field and value of the hash, in hash order.
    pub fn hash_entries(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut out: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        if self.kind() != KeyKind::Hash {
            return out;
        }
        extern "C" fn collect(
            _key: *mut raw::RedisModuleKey,
            field: *mut raw::RedisModuleString,
            value: *mut raw::RedisModuleString,
            privdata: *mut c_void,
        ) {
            // SAFETY: privdata is `out` below, alive for the whole scan, and
            // the strings are valid during this callback.
            let out = unsafe { &mut *(privdata as *mut Vec<(Vec<u8>, Vec<u8>)>) };
            let bytes = |s| {
                // SAFETY: ScanKey's field and value strings are valid for the
                // duration of this callback; the bytes are copied out before
                // it returns.
                unsafe { RStr::from_raw(s) }.map_or(&[][..], RStr::as_bytes)
            };
            out.push((bytes(field).to_vec(), bytes(value).to_vec()));
        }
        // SAFETY: a function of the table, taking no arguments; the cursor is
        // destroyed below.
        let cursor = unsafe { api!(RedisModule_ScanCursorCreate)() };
        // SAFETY: a hash key this value keeps open, the cursor made above,
        // our callback, and `out` as privdata: alive for the whole scan, and
        // only touched by `collect` while ScanKey runs.
        while unsafe {
            api!(RedisModule_ScanKey)(
                self.ptr,
                cursor,
                Some(collect),
                &mut out as *mut _ as *mut c_void,
            )
        } != 0
        {}
        // SAFETY: the cursor made above, destroyed once.
        unsafe { api!(RedisModule_ScanCursorDestroy)(cursor) };
        out
    }
}

impl Drop for Key<'_> {
    fn drop(&mut self) {
        if !self.ptr.is_null() {
            // SAFETY: opened by `open`, closed once.
            unsafe { api!(RedisModule_CloseKey)(self.ptr) };
        }
    }
}
