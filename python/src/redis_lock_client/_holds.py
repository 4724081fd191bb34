"""The registry of holds: what a client knows of every (lock, owner) and
every leased permit it holds, and the rules that change it. Both clients
use it as it is: nothing here does I/O or waits.

An :class:`Entry` is one hash field's count (a lock's, a read-write lock's
read or write hold) or one leased permit (its owner is its id). Its state
changes only through :class:`Registry`, so each rule is written once: a
grant, a renewal, a release, and when a hold counts as lost. Hold-count
changes are serialised per entry by ``entry.op`` (the flavour's lock, held
across the command), so the count kept here is the server's.

A lease's end is counted from when the command that set it was *sent*: the
server started it no earlier, so the client's count never outlives the
server's.
"""

from __future__ import annotations

import logging
import math
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

from ._protocol import Kind, LostReason, retry_after, text, tracking_read

log = logging.getLogger("redis_lock_client")

LostCallback = Callable[[LostReason], None]

# How close to the end of a caller-given lease a hold found gone counts as
# that lease's end: the server's deadline is a whole millisecond of its
# clock and can fall a moment before the one this client counted.
LEASE_END_SLACK = 0.02


def monotonic() -> float:
    return time.monotonic()


class Entry:
    """This client's knowledge of one hold (see the module's docstring)."""

    def __init__(self, name: str, owner: str, kind: Kind, op: Any, new_event: Any) -> None:
        self.name = name
        self.owner = owner
        self.kind = kind
        self.field = kind.field(owner)
        self.key = (name, self.field, kind.label)
        self.op = op  # the flavour's lock: serialises hold-count changes
        self.mutex = threading.Lock()  # guards what follows; never held across I/O
        self.holds = 0
        # Released or lost: a new acquisition starts a new entry.
        self.retired = False
        # The lease the watchdog renews to; None: a caller-given lease.
        self.watchdog: float | None = None
        # When the lease ends unless renewed (monotonic), never later than
        # the server's deadline.
        self.expires = 0.0
        self.next_renewal = 0.0
        self.last_error: str | None = None
        self.renewing = False
        self.lost: LostReason | None = None
        self.callbacks: list[LostCallback] = []
        # Made when ``lost`` is first asked for: an Event costs more than
        # the rest of an entry, and most holds end without anyone waiting.
        self._new_event = new_event
        self._event: Any = None

    def lost_event(self) -> Any:
        """The flavour's Event, set when the hold is lost."""
        with self.mutex:
            if self._event is None:
                self._event = self._new_event()
                if self.lost is not None:
                    self._event.set()
            return self._event

    def is_held(self) -> bool:
        return not self.retired and self.holds > 0


class Registry:
    """Every entry a client holds, by (name, field, kind)."""

    def __init__(self, new_lock: Callable[[], Any], new_event: Callable[[], Any]) -> None:
        self._entries: dict[tuple[str, str, str], Entry] = {}
        self._mutex = threading.Lock()
        self._new_lock = new_lock
        self._new_event = new_event

    def entry(self, name: str, owner: str, kind: Kind) -> Entry:
        """The live entry of (name, owner, kind), made if there is none."""
        with self._mutex:
            entry = self._entries.get((name, kind.field(owner), kind.label))
            if entry is None:
                entry = Entry(name, owner, kind, self._new_lock(), self._new_event)
                self._entries[entry.key] = entry
            return entry

    def entries(self) -> list[Entry]:
        with self._mutex:
            return list(self._entries.values())

    def retire(self, entry: Entry) -> None:
        """Out of the registry: released, lost, or never granted."""
        with entry.mutex:
            entry.retired = True
        with self._mutex:
            if self._entries.get(entry.key) is entry:
                del self._entries[entry.key]

    def retire_if_empty(self, entry: Entry) -> None:
        with entry.mutex:
            empty = entry.holds == 0
        if empty:
            self.retire(entry)

    def grant(
        self,
        entry: Entry,
        expires: float,
        renew_now: bool,
        watchdog: float | None,
        on_lost: LostCallback | None,
    ) -> float:
        """Records a grant (a re-entry too: any acquire resets the lease)
        ending at ``expires``; with ``watchdog`` (the lease) it is renewed a
        third of the lease after it started, or at once when ``renew_now``
        (its end is only estimated). When the watchdog must next look."""
        now = monotonic()
        with entry.mutex:
            entry.holds += 1
            entry.expires = expires
            if watchdog is not None:
                entry.watchdog = watchdog
                entry.next_renewal = now if renew_now else expires - (watchdog - watchdog / 3)
            if on_lost is not None:
                entry.callbacks.append(on_lost)
            if entry.watchdog is None:
                return entry.expires
            return min(entry.expires, entry.next_renewal)

    def released(self, entry: Entry, held: bool) -> int:
        """Records a release the server answered; ``held``: it still had the
        hold (else the hold was gone). The holds left."""
        with entry.mutex:
            entry.holds = entry.holds - 1 if held else 0
            left = entry.holds
        if not held:
            self.mark_lost(entry, LostReason(LostReason.NOT_HELD))
        elif left == 0:
            self.retire(entry)
        return left

    def restarted(self, entry: Entry, sent: float, lease: float) -> None:
        """A caller's renewal restarted the lease at ``lease`` s."""
        with entry.mutex:
            entry.expires = sent + lease

    def renewed(
        self, entry: Entry, sent: float, lease: float, result: bool | None, error: str
    ) -> None:
        """Records a renewal sent at ``sent``: True extends the lease, False
        (answered 0) means the hold is gone, None (failed: ``error``) is
        retried every tenth of the lease until the lease has passed."""
        with entry.mutex:
            entry.renewing = False
            if not entry.is_held():
                return  # released meanwhile: its renewal proves nothing
            if result is None:
                entry.last_error = error
                entry.next_renewal = min(monotonic() + retry_after(lease), entry.expires)
                return
            if result:
                entry.expires = sent + lease
                entry.next_renewal = sent + lease / 3
                entry.last_error = None
                return
        self.mark_lost(entry, LostReason(LostReason.NOT_HELD))

    def plan(self, now: float) -> tuple[list[tuple[Entry, float]], float]:
        """The watchdog's round: declares what expired, and returns the
        renewals due now (each marked as under way) and when to look next
        (inf when nothing is held)."""
        due: list[tuple[Entry, float]] = []
        next_at = math.inf
        for entry in self.entries():
            with entry.mutex:
                if not entry.is_held():
                    continue
                why = self._expired(entry, now)
                if why is None:
                    next_at = min(next_at, entry.expires)
                    if entry.watchdog is not None and not entry.renewing:
                        if entry.next_renewal <= now:
                            entry.renewing = True
                            due.append((entry, entry.watchdog))
                        else:
                            next_at = min(next_at, entry.next_renewal)
            if why is not None:
                self.mark_lost(entry, why)
        return due, next_at

    @staticmethod
    def _expired(entry: Entry, now: float) -> LostReason | None:
        if not entry.is_held() or entry.expires > now:
            return None
        if entry.watchdog is not None:
            return LostReason(LostReason.RENEWAL_FAILED, entry.last_error or "no renewal in time")
        return LostReason(LostReason.LEASE_EXPIRED)

    def expire_if_due(self, entry: Entry) -> None:
        with entry.mutex:
            why = self._expired(entry, monotonic())
        if why is not None:
            self.mark_lost(entry, why)

    def gone(self, entry: Entry) -> None:
        """The server no longer has the hold (seen by a tracking read): the
        end of a caller's lease when that was due, else taken away."""
        with entry.mutex:
            if not entry.is_held():
                return
            ending = entry.watchdog is None and monotonic() >= entry.expires - LEASE_END_SLACK
        kind = LostReason.LEASE_EXPIRED if ending else LostReason.NOT_HELD
        self.mark_lost(entry, LostReason(kind))

    def mark_lost(self, entry: Entry, why: LostReason) -> None:
        """Retires the entry, sets its Event and calls its callbacks once;
        a callback's exception is logged, never propagated."""
        self.retire(entry)
        with entry.mutex:
            if entry.lost is not None:
                return
            entry.lost = why
            callbacks = list(entry.callbacks)
            event = entry._event
        if event is not None:
            event.set()
        call_lost_callbacks(callbacks, why, entry.name)


def call_lost_callbacks(callbacks: list[LostCallback], why: LostReason, name: str) -> None:
    for callback in callbacks:
        try:
            callback(why)
        except Exception:
            log.exception("the lost-callback %r of %r raised", callback, name)


class Progress:
    """A hold-count command in flight, for the clean-up after its caller
    was interrupted (``waiting.abandon``)."""

    def __init__(self) -> None:
        self.conn: Any = None
        self.node: Any = None
        self.cid: int | None = None
        self.waiting = False
        # An acquire went out: a grant may exist that no guard records.
        self.sent = False
        # When the last command was sent (a grant's lease runs from then).
        self.sent_at = 0.0
        # The guard of a recorded grant (made disarmed before the grant is
        # recorded): the caller must not be left without it.
        self.guard: Any = None

    def start(self, node: Any, conn: Any, cid: int | None, waiting: bool) -> None:
        self.node, self.conn, self.cid = node, conn, cid
        self.sent, self.waiting, self.sent_at = True, waiting, monotonic()


class HoldView:
    """What a lock guard tells without asking the server (both clients)."""

    _entry: Entry
    _registry: Registry

    @property
    def name(self) -> str:
        return self._entry.name

    @property
    def owner(self) -> str:
        return self._entry.owner

    @property
    def kind(self) -> str:
        """``"lock"``, or a read-write lock's ``"read"`` / ``"write"``."""
        return self._entry.kind.label

    @property
    def lost_reason(self) -> LostReason | None:
        """Why the lock was lost, or None while it is not known lost."""
        self._registry.expire_if_due(self._entry)
        with self._entry.mutex:
            return self._entry.lost

    def is_lost(self) -> bool:
        return self.lost_reason is not None

    def add_lost_callback(self, callback: LostCallback) -> None:
        """Calls ``callback(reason)`` (a :class:`LostReason`) once when the
        lock is lost, from the watchdog or the tracking listener (at once
        if it already is). It must not block; what it raises is logged
        (logger ``redis_lock_client``) and otherwise ignored."""
        with self._entry.mutex:
            why = self._entry.lost
            if why is None:
                self._entry.callbacks.append(callback)
        if why is not None:
            callback(why)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(name={self.name!r}, owner={self.owner!r}, "
            f"kind={self.kind!r}, token={getattr(self, 'token', None)!r})"
        )


class PermitsView:
    """What a permits guard tells without asking the server (both clients):
    which of its permits are known lost, and the callbacks of the first loss."""

    def __init__(
        self, registry: Registry, name: str, ids: list[str], on_lost: LostCallback | None, lost: Any
    ) -> None:
        self._registry = registry
        self.name = name
        #: The permits' ids (32 hex characters each).
        self.ids = tuple(ids)
        self._entries: list[Entry] = []
        self._released = False
        self._reasons: dict[str, LostReason] = {}
        self._callbacks: list[LostCallback] = [] if on_lost is None else [on_lost]
        self._mutex = threading.Lock()
        self._lost = lost

    def _handler(self) -> Callable[[str], LostCallback]:
        """Per permit, its entry's loss callback, holding this guard weakly:
        a guard dropped unreleased is collected (and released), not renewed
        for ever."""
        ref = weakref.ref(self)

        def for_permit(pid: str) -> LostCallback:
            def on_lost(why: LostReason) -> None:
                guard = ref()
                if guard is not None:
                    guard._on_lost(pid, why)

            return on_lost

        return for_permit

    def _on_lost(self, pid: str, why: LostReason) -> None:
        with self._mutex:
            first = not self._reasons
            self._reasons.setdefault(pid, why)
            callbacks = list(self._callbacks) if first else []
        self._lost.set()
        call_lost_callbacks(callbacks, why, self.name)

    def _expire_if_due(self) -> None:
        for entry in self._entries:
            self._registry.expire_if_due(entry)

    @property
    def lost_reason(self) -> LostReason | None:
        """Why the first lost permit was lost, or None."""
        self._expire_if_due()
        with self._mutex:
            return next(iter(self._reasons.values()), None)

    @property
    def lost_ids(self) -> list[str]:
        """The ids known lost."""
        with self._mutex:
            return [i for i in self.ids if i in self._reasons]

    def is_lost(self) -> bool:
        return self.lost_reason is not None

    def add_lost_callback(self, callback: LostCallback) -> None:
        """Calls ``callback(reason)`` at the first loss (at once if one is
        already known), as a lock guard's ``add_lost_callback`` does."""
        with self._mutex:
            why = next(iter(self._reasons.values()), None)
            if why is None:
                self._callbacks.append(callback)
        if why is not None:
            callback(why)

    def _take_for_release(self) -> tuple[list[str], list[str], dict[str, Entry]]:
        """(still held, known gone, entries by id), every entry retired
        first: a renewal racing the release proves nothing."""
        pending: list[str] = []
        gone: list[str] = []
        for e in self._entries:
            with e.mutex:
                known_lost = e.lost is not None
            self._registry.retire(e)
            (gone if known_lost else pending).append(e.owner)
        return pending, gone, {e.owner: e for e in self._entries}

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, ids={list(self.ids)!r})"


class Watchlist:
    """What the tracking listener watches (both clients): holds granted and
    waiting to be armed, and the armed ones by the key the server reports."""

    def __init__(self) -> None:
        self.mutex = threading.Lock()
        self.pending: list[tuple[float, Entry]] = []
        self.watched: dict[str, list[Entry]] = {}

    def add(self, entry: Entry, at: float) -> None:
        with self.mutex:
            self.pending.append((at, entry))

    def due(self, now: float) -> tuple[list[Entry], float]:
        """The holds to arm now (moved to the watched ones), and when the
        next is due (inf: none)."""
        with self.mutex:
            ready = [e for at, e in self.pending if at <= now and e.is_held()]
            self.pending = [(at, e) for at, e in self.pending if at > now and e.is_held()]
            for entry in ready:
                key, _ = tracking_read(entry.kind, entry.name, entry.field)
                self.watched.setdefault(key, []).append(entry)
            return ready, min((at for at, _ in self.pending), default=math.inf)

    def all(self) -> list[Entry]:
        with self.mutex:
            return [e for entries in self.watched.values() for e in entries]

    def prune(self) -> bool:
        """Forgets entries no longer held; whether anything is watched or
        waits to be."""
        with self.mutex:
            for key in list(self.watched):
                held = [e for e in self.watched[key] if e.is_held()]
                if held:
                    self.watched[key] = held
                else:
                    del self.watched[key]
            return bool(self.watched or self.pending)

    def clear(self) -> None:
        with self.mutex:
            self.watched.clear()
            self.pending.clear()

    def named(self, msg: Any) -> list[Entry]:
        """The watched entries an invalidation message names (all of them
        when it names no key: the server flushed its tracking table)."""
        if not isinstance(msg, (list, tuple)) or len(msg) < 3 or text(msg[0]) != "message":
            return []
        if not isinstance(msg[2], (list, tuple)):
            return self.all()
        with self.mutex:
            return [e for k in msg[2] for e in self.watched.get(str(text(k)), [])]
