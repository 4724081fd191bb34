//! Integer string keys: a lock's fencing-token counter and a resource's
//! fence (the highest token it has seen). The one place that reads and
//! writes them; the decisions are in `fencing.rs`.
//!
//! Both are plain decimal strings, as `INCR` leaves them, so Redisson's
//! `RFencedLock` script and `GET` read the same values. Every write is
//! replicated as one command carrying the key's whole state, value and
//! absolute deadline: `SET key value PXAT at` (or `SET key value` without
//! expiry). A replica with or without the module, and an AOF reload, hold
//! the same counter with the same deadline.

use crate::errors::{self, Refusal};
use std::cell::{Cell, RefCell};

use crate::fencing::{self, Expiry, Issued, TokenError};
use crate::ffi::key::{Key, KeyKind, OpenMode};
use crate::ffi::server;
use crate::ffi::{Ctx, OwnedStr, RStr};
use crate::{config, stats};

/// An open integer string key (or no key); closed on drop.
pub struct CounterKey<'a> {
    ctx: Ctx<'a>,
    key: Key<'a>,
    value: Option<i64>,
    /// Read once at open (a lookup in Redis's expires table).
    expiry: Expiry,
}

impl<'a> CounterKey<'a> {
    /// Opens `name`. Refuses a key that is not a string (`WRONGTYPE`) or
    /// whose value is not a decimal integer.
    pub fn open(ctx: Ctx<'a>, name: RStr<'a>, mode: OpenMode) -> Result<CounterKey<'a>, Refusal> {
        let key = Key::open(ctx, name, mode);
        let value = match key.kind() {
            KeyKind::Empty => None,
            KeyKind::String => match key.string_get(crate::args::strict_i64) {
                Some(Some(value)) => Some(value),
                _ => return Err(errors::not_an_integer(name.as_bytes())),
            },
            KeyKind::Hash | KeyKind::SortedSet | KeyKind::Other => return Err(errors::WRONGTYPE),
        };
        let expiry = match value {
            None => Expiry::Absent,
            Some(_) => key.abs_expire_ms().map_or(Expiry::Never, Expiry::At),
        };
        Ok(CounterKey {
            ctx,
            key,
            value,
            expiry,
        })
    }

    /// Its value, `None` when there is no key.
    pub fn value(&self) -> Option<i64> {
        self.value
    }

    /// Its expiry as it is now.
    pub fn expiry(&self) -> Expiry {
        self.expiry
    }

    /// Sets it to `value` with the absolute expiry `at` (`None`: none), and
    /// replicates that as one `SET`.
    ///
    /// An existing string is overwritten in place, and its expiry is only
    /// touched when it changes: re-entries and grants in the same second
    /// (see [`fencing::counter_expiry`]) write nothing but the digits.
    pub fn set(&mut self, value: i64, at: Option<i64>) {
        let (ctx, name) = (self.ctx, self.key.name());
        let before = self.expiry;
        // Not `with_decimal`'s shared "1": the key may keep this very string.
        let text = OwnedStr::from_i64(value);
        let overwritten =
            self.value.is_some() && self.key.string_overwrite(text.borrow().as_bytes());
        if !overwritten {
            self.key.string_set(text.borrow());
        }
        // `string_overwrite` kept the expiry; `string_set` dropped it.
        let kept = match before {
            Expiry::At(old) if overwritten => Some(old),
            _ => None,
        };
        match (kept, at) {
            (Some(old), Some(at)) if old == at => {}
            (_, Some(at)) => self.key.set_abs_expire_ms(at),
            (Some(_), None) => self.key.persist(),
            (None, None) => {}
        }
        ctx.replicate_set(name, text.borrow(), at);
        ctx.signal_modified(name);
        self.value = Some(value);
        self.expiry = at.map_or(Expiry::Never, Expiry::At);
    }
}

/// The next fencing token of a lock, checked and computed but not written
/// yet: opened before the lock is written, so a counter that cannot be read
/// refuses the acquire before anything changed.
pub struct NextToken<'a> {
    counter: CounterKey<'a>,
    issued: Issued,
    /// The lock's slot in [`LAST_SEQ`].
    slot: usize,
}

impl<'a> NextToken<'a> {
    /// Opens the counter `name` (see [`fencing::counter_key`]) and computes
    /// the token a grant made now gets (the rule at the top of `fencing.rs`).
    pub fn prepare(ctx: Ctx<'a>, name: RStr<'a>) -> Result<NextToken<'a>, Refusal> {
        let counter = CounterKey::open(ctx, name, OpenMode::Write)?;
        let slot = seq_slot(ctx.selected_db(), name.as_bytes());
        let last_seq = LAST_SEQ.with(|marks| marks.borrow()[slot]);
        let issued = fencing::next_token(counter.value(), ctx.now_ms(), last_seq, node_id(ctx))
            .map_err(|e| match e {
                TokenError::Overflow => errors::TOKEN_OVERFLOWS,
            })?;
        Ok(NextToken {
            counter,
            issued,
            slot,
        })
    }

    /// [`NextToken::prepare`] for the counter [`wanted_counter`] named, if any.
    pub fn prepare_if(
        ctx: Ctx<'a>,
        name: Option<&'a OwnedStr>,
    ) -> Result<Option<NextToken<'a>>, Refusal> {
        name.map(|name| NextToken::prepare(ctx, name.borrow()))
            .transpose()
    }

    /// Writes the token to the counter, for a lock whose lease now ends at
    /// `lock_deadline`, and returns it.
    pub fn issue(mut self, lock_deadline: i64) -> i64 {
        let token = self.issued.token;
        let at = fencing::counter_expiry(
            token,
            lock_deadline,
            self.counter.expiry(),
            config::token_retention_ms(),
        );
        self.counter.set(token, at);
        LAST_SEQ.with(|marks| {
            let mark = &mut marks.borrow_mut()[self.slot];
            *mark = (*mark).max(self.issued.seq);
        });
        stats::TOKENS_ISSUED.incr();
        token
    }
}

/// How many high-water marks [`LAST_SEQ`] keeps.
const SEQ_SLOTS: usize = 256;

thread_local! {
    // The highest `seq` this process has issued for the locks of each slot:
    // the high-water marks that keep one node's tokens for a lock distinct
    // whatever happens to its counter (main thread only, like every command).
    // Locks sharing a slot only make each other's tokens larger.
    static LAST_SEQ: RefCell<[i64; SEQ_SLOTS]> = const { RefCell::new([0; SEQ_SLOTS]) };
    // The node number derived from the replication IDs, once read.
    static AUTO_NODE_ID: Cell<Option<i64>> = const { Cell::new(None) };
}

/// The slot of the counter `name` in `db`.
fn seq_slot(db: i32, name: &[u8]) -> usize {
    let hash = fencing::hash_bytes(name) ^ u64::from(db.unsigned_abs()).rotate_left(40);
    (hash % SEQ_SLOTS as u64) as usize
}

/// This node's number in the low bits of its tokens: `lock.node-id`, or
/// derived from the replication IDs (read once per role: see
/// [`forget_node_id`]).
pub fn node_id(ctx: Ctx) -> i64 {
    let configured = config::node_id();
    if configured >= 0 {
        return configured;
    }
    if let Some(id) = AUTO_NODE_ID.with(Cell::get) {
        return id;
    }
    let replid = server::info_field(ctx, c"replication", c"master_replid").unwrap_or_default();
    let replid2 = server::info_field(ctx, c"replication", c"master_replid2");
    let id = fencing::auto_node_id(replid.as_bytes(), replid2.as_deref().map(str::as_bytes));
    AUTO_NODE_ID.with(|cached| cached.set(Some(id)));
    id
}

/// The server changed role: its replication ID changed, and with it the
/// derived node number (read again at the next grant).
pub fn forget_node_id() {
    AUTO_NODE_ID.with(|cached| cached.set(None));
}

thread_local! {
    // Counter names are built here, then copied into a Redis string: one
    // allocation per name.
    static NAME: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Whether `key` is a fenced lock's key: its token counter exists. A key
/// that cannot have a counter in its slot never had one. One key lookup.
pub fn has_counter(ctx: Ctx, key: RStr) -> bool {
    let Ok(name) = counter_name(key) else {
        return false;
    };
    let counter = Key::open(ctx, name.borrow(), OpenMode::Read);
    counter.kind() != KeyKind::Empty
}

/// The name of `lock`'s counter when a grant `wants` a token, or why it
/// cannot have one. A grant reads its counter (this, then
/// [`NextToken::prepare_if`]) before anything is written, so a counter that
/// cannot be raised refuses the whole grant.
pub fn wanted_counter(lock: RStr, wants: bool) -> Result<Option<OwnedStr>, Refusal> {
    wants.then(|| counter_name(lock)).transpose()
}

/// The name of `lock`'s counter as a Redis string, or why it has none.
pub fn counter_name(lock: RStr) -> Result<OwnedStr, Refusal> {
    NAME.with(|name| {
        let mut name = name.borrow_mut();
        fencing::counter_key(lock.as_bytes(), &mut name)?;
        Ok(OwnedStr::new(&name))
    })
}
