//! A string key holding an integer: a semaphore's available permits, a
//! latch's count. The one place that reads and writes them, and replicates
//! each write as a plain command with absolute values:
//!
//! | write | replicated as |
//! |---|---|
//! | [`ValueKey::set_keep_ttl`] | `SET name n KEEPTTL` |
//! | [`ValueKey::set_with_expiry`] | `SET name n PXAT at`, or `SET name n` |
//! | [`ValueKey::delete`] | `DEL name` |

use crate::errors::{self, Refusal};
use crate::ffi::key::{Key, KeyKind, OpenMode};
use crate::ffi::{Ctx, OwnedStr, RStr};

thread_local! {
    // Made once: every change of a semaphore replicates it.
    static KEEPTTL: OwnedStr = OwnedStr::new(b"KEEPTTL");
}

/// An open string key (or no key); closed on drop.
pub struct ValueKey<'a> {
    ctx: Ctx<'a>,
    key: Key<'a>,
}

impl<'a> ValueKey<'a> {
    /// Opens `name`. Refuses a key that exists and is not a string.
    pub fn open(ctx: Ctx<'a>, name: RStr<'a>, mode: OpenMode) -> Result<ValueKey<'a>, Refusal> {
        let key = Key::open(ctx, name, mode);
        match key.kind() {
            KeyKind::Empty | KeyKind::String => Ok(ValueKey { ctx, key }),
            _ => Err(errors::WRONGTYPE),
        }
    }

    pub fn name(&self) -> RStr<'a> {
        self.key.name()
    }

    pub fn ctx(&self) -> Ctx<'a> {
        self.ctx
    }

    pub fn exists(&self) -> bool {
        self.key.kind() == KeyKind::String
    }

    /// The integer it holds (`None`: no key), read with `parse`.
    pub fn get(
        &self,
        parse: impl FnOnce(&[u8]) -> Result<i64, Refusal>,
    ) -> Result<Option<i64>, Refusal> {
        self.key.string_get(parse).transpose()
    }

    /// Remaining time to live, as `PTTL` answers.
    pub fn ttl_ms(&self) -> i64 {
        self.key.pttl()
    }

    /// The key's absolute expiry (unix ms), if any.
    pub fn deadline_ms(&self) -> Option<i64> {
        self.key.abs_expire_ms()
    }

    /// Writes `value`, keeping the key's expiry (a new key has none).
    pub fn set_keep_ttl(&self, value: i64) {
        let value = OwnedStr::from_i64(value);
        if !self.key.string_overwrite(value.borrow().as_bytes()) {
            self.key.string_set(value.borrow());
        }
        KEEPTTL.with(|keepttl| {
            let args = [self.name(), value.borrow(), keepttl.borrow()];
            self.ctx.replicate_command(c"SET", &args);
        });
        self.ctx.signal_modified(self.name());
    }

    /// Writes `value` with the absolute expiry `at` (`None`: none).
    pub fn set_with_expiry(&self, value: i64, at: Option<i64>) {
        let value = OwnedStr::from_i64(value);
        self.key.string_set(value.borrow());
        if let Some(at) = at {
            self.key.set_abs_expire_ms(at);
        }
        self.ctx.replicate_set(self.name(), value.borrow(), at);
        self.ctx.signal_modified(self.name());
    }

    /// Deletes the key.
    pub fn delete(&self) {
        self.key.delete();
        self.ctx.replicate_del(self.name());
        self.ctx.signal_modified(self.name());
    }
}
