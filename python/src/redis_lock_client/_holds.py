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
from collections.abc import Callable
from typing import Any

from ._protocol import Kind, LostReason, retry_after

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

    def find(self, name: str, owner: str, kind: Kind) -> Entry | None:
        with self._mutex:
            return self._entries.get((name, kind.field(owner), kind.label))

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
