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
from dataclasses import dataclass
from typing import Any

from ._protocol import Kind, LostReason, release_args, retry_after, text, tracking_read
from .errors import NotHeld, ProtocolViolation

log = logging.getLogger("redis_lock_client")

LostCallback = Callable[[LostReason], None]

# How long the watchdog, and the tracking listener, stay with nothing to
# watch before they end (s).
WATCHDOG_IDLE = 10.0
# How long after its grant a hold's tracking is armed: a loss is told at
# most this much (plus a round trip) after it.
ARM_DELAY = 0.01

# How close to the end of a caller-given lease a hold found gone counts as
# that lease's end: the server's deadline is a whole millisecond of its
# clock and can fall a moment before the one this client counted.
LEASE_END_SLACK = 0.02


monotonic = time.monotonic


class Entry:
    """This client's knowledge of one hold (see the module's docstring)."""

    # One is made per acquisition: slots make it cheaper to make and smaller.
    # fmt: off
    __slots__ = (
        "name", "owner", "kind", "field", "key", "op", "mutex", "holds", "retired", "watchdog",
        "expires", "next_renewal", "arm_at", "last_error", "renewing", "lost", "callbacks",
        "_new_event", "_event"
    )
    # fmt: on

    def __init__(
        self, key: tuple[str, str, str], owner: str, kind: Kind, op: Any, registry: Registry
    ) -> None:
        self.key = key
        self.name, self.field, _ = key
        self.owner = owner
        self.kind = kind
        self.op = op  # the flavour's lock: serialises hold-count changes
        # The registry's: guards what follows; never held across I/O.
        self.mutex: threading.Lock = registry.mutex
        self.holds = 0
        # Released or lost: a new acquisition starts a new entry.
        self.retired = False
        # The lease the watchdog renews to; None: a caller-given lease.
        self.watchdog: float | None = None
        # When the lease ends unless renewed (monotonic), never later than
        # the server's deadline.
        self.expires = 0.0
        self.next_renewal = 0.0
        # When tracking starts watching it (None: not to be armed, or armed).
        self.arm_at: float | None = None
        self.last_error: str | None = None
        self.renewing = False
        self.lost: LostReason | None = None
        self.callbacks: list[LostCallback] = []
        # Made when ``lost`` is first asked for: an Event costs more than
        # the rest of an entry, and most holds end without anyone waiting.
        self._new_event = registry.new_event
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
    """Every entry a client holds, by (name, field, kind). One mutex guards
    the registry and every entry's state (a lock per entry would cost more
    to make than the rest of it, and no section is longer than a few
    assignments); no section calls out or nests another."""

    def __init__(self, new_lock: Callable[[], Any], new_event: Callable[[], Any]) -> None:
        self._entries: dict[tuple[str, str, str], Entry] = {}
        self.mutex = threading.Lock()
        self._new_lock = new_lock
        self.new_event = new_event
        # A hold to track was granted since the watchdog's last round.
        self._tracked = False

    def entry(self, name: str, owner: str, kind: Kind) -> Entry:
        """The live entry of (name, owner, kind), made if there is none."""
        key = (name, kind.field(owner), kind.label)
        with self.mutex:
            entry = self._entries.get(key)
            if entry is None:
                entry = self._entries[key] = Entry(key, owner, kind, self._new_lock(), self)
            return entry

    def entries(self) -> list[Entry]:
        with self.mutex:
            return list(self._entries.values())

    def arming(self) -> bool:
        """Whether a hold waits for its tracking to be armed."""
        with self.mutex:
            return any(e.arm_at is not None and e.is_held() for e in self._entries.values())

    def retire(self, entry: Entry) -> None:
        """Out of the registry: released, lost, or never granted."""
        with self.mutex:
            self._retire(entry)

    def _retire(self, entry: Entry) -> None:
        entry.retired = True
        if self._entries.get(entry.key) is entry:
            del self._entries[entry.key]

    def retire_if_empty(self, entry: Entry) -> None:
        with self.mutex:
            if entry.holds == 0:
                self._retire(entry)

    def grant(
        self,
        entry: Entry,
        expires: float,
        renew_now: bool,
        watchdog: float | None,
        on_lost: LostCallback | None,
        track: bool,
    ) -> float:
        """Records a grant (a re-entry too: any acquire resets the lease)
        ending at ``expires``; with ``watchdog`` (the lease) it is renewed a
        third of the lease after it started, or at once when ``renew_now``
        (its end is only estimated); with ``track``, tracking watches it
        from ``ARM_DELAY`` on. When the watchdog must next look."""
        now = monotonic()
        with self.mutex:
            entry.holds += 1
            entry.expires = due = expires
            if watchdog is not None:
                entry.watchdog = watchdog
                entry.next_renewal = now if renew_now else expires - (watchdog - watchdog / 3)
            if on_lost is not None:
                entry.callbacks.append(on_lost)
            if entry.watchdog is not None:
                due = min(due, entry.next_renewal)
            if track and entry.holds == 1:
                entry.arm_at = now + ARM_DELAY
                due = min(due, entry.arm_at)
                self._tracked = True
            return due

    def releasing(self, entry: Entry) -> tuple[int, list[Any]]:
        """Before a release: (the holds known, the command to send);
        :class:`NotHeld`, and nothing to send, when the hold is known lost."""
        with entry.mutex:
            known, renew, lost = entry.holds, entry.watchdog, entry.retired
            if known and lost:
                entry.holds -= 1
        if known == 0 or lost:
            raise NotHeld(entry.name)
        return known, release_args(entry.kind, entry.name, entry.owner, known, renew)

    def released(self, entry: Entry, seen: bool, reply: Any, command: str) -> None:
        """Records a release: its reply if ``seen`` (else it ran, its reply
        lost); :class:`NotHeld` if the server no longer had the hold."""
        if seen and reply not in (None, 0, 1):
            raise ProtocolViolation(f"{command} answered {reply!r}")
        held = not seen or reply is not None
        with self.mutex:
            entry.holds = entry.holds - 1 if held else 0
            if held and entry.holds == 0:
                self._retire(entry)
        if not held:
            self.mark_lost(entry, LostReason(LostReason.NOT_HELD))
            raise NotHeld(entry.name)

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

    def plan(self, now: float) -> tuple[list[tuple[Entry, float]], list[Entry], float]:
        """The watchdog's round: declares what expired, and returns the
        renewals due now (each marked as under way), the holds whose
        tracking is due (each marked as armed) and when to look next (inf
        when nothing is held)."""
        due: list[tuple[Entry, float]] = []
        arms: list[Entry] = []
        expired: list[tuple[Entry, LostReason]] = []
        next_at = math.inf
        with self.mutex:
            if self._tracked:
                # While holds to track keep coming, a round every ARM_DELAY:
                # their grants then never wake the watchdog early.
                self._tracked = False
                next_at = now + ARM_DELAY
            for entry in self._entries.values():
                if not entry.is_held():
                    continue
                why = self._expired(entry, now)
                if why is not None:
                    expired.append((entry, why))
                    continue
                next_at = min(next_at, entry.expires)
                if entry.watchdog is not None and not entry.renewing:
                    if entry.next_renewal <= now:
                        entry.renewing = True
                        due.append((entry, entry.watchdog))
                    else:
                        next_at = min(next_at, entry.next_renewal)
                if entry.arm_at is not None:
                    if entry.arm_at <= now:
                        entry.arm_at = None
                        arms.append(entry)
                    else:
                        next_at = min(next_at, entry.arm_at)
        for entry, why in expired:
            self.mark_lost(entry, why)
        return due, arms, next_at

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
        with self.mutex:
            self._retire(entry)
            if entry.lost is not None:
                return
            entry.lost = why
            callbacks = list(entry.callbacks)
            event = entry._event
        if event is not None:
            event.set()
        for callback in callbacks:
            try:
                callback(why)
            except Exception:
                log.exception("the lost-callback %r of %r raised", callback, entry.name)


@dataclass(slots=True)
class Progress:
    """A hold-count command in flight, for the clean-up after its caller
    was interrupted (``waiting.abandon``)."""

    conn: Any = None
    node: Any = None
    cid: int | None = None
    known: int = 0  # the holds before the acquisition
    sent: bool = False  # an acquire went out: a grant may exist that no guard records
    sent_at: float = 0.0  # when the last command was sent (a grant's lease runs from then)
    # The guard of a recorded grant (made disarmed before the grant is
    # recorded): the caller must not be left without it.
    guard: Any = None
    wait: Any = None  # a wait's pieces (``waiting.Wait``): given up by LOCK.CANCEL

    def start(self, node: Any, conn: Any, cid: int | None) -> None:
        self.node, self.conn, self.cid = node, conn, cid
        self.sent, self.sent_at = True, monotonic()


class Schedule:
    """The watchdog's schedule (both clients): one runner per client (a
    task, or a thread) looks at the registry when the next renewal or
    tracking arm is due, starting each renewal on its own; it ends once
    nothing was held for ``WATCHDOG_IDLE`` s (so a client locking in a
    loop does not start one per lock). The flavour's ``run`` sleeps
    between rounds on ``wakeup``, which :meth:`due` cuts short."""

    def __init__(self, registry: Registry, tracker: Watchlist, io: Any) -> None:
        self.registry = registry
        self.tracker = tracker
        self.io = io
        self.mutex = threading.Lock()
        # When its sleep ends; inf while awake (it plans before sleeping).
        self.wake_at = math.inf
        self.wakeup = io.Wakeup()
        self.runner: Any = None
        self.idle_since: float | None = None

    def run(self) -> Any:
        raise NotImplementedError

    def renew(self, entry: Entry, lease: float) -> Any:
        raise NotImplementedError

    def due(self, at: float) -> None:
        """Makes sure the runner runs and looks again by ``at``."""
        if at >= self.wake_at and self.runner is not None:
            # Read without the mutex (most grants come here): a runner
            # sleeping until ``wake_at`` looks by then, and one in its round
            # neither sleeps past nor ends on a ``wake_at`` set meanwhile.
            return
        with self.mutex:
            if self.runner is None:
                self.wakeup = self.io.Wakeup()  # not one bound to an event loop gone
                self.runner = self.io.spawn(self.run)
            if at >= self.wake_at:
                return
            self.wake_at = at
        self.wakeup.set()

    def stopped(self) -> None:
        """The runner died (its event loop closed): the next grant starts another."""
        with self.mutex:
            self.runner, self.idle_since, self.wake_at = None, None, math.inf

    def round(self, now: float) -> float | None:
        """Declares what expired, starts the renewals and tracking arms
        due; when to look again, or None: the runner ends."""
        with self.mutex:
            self.wake_at = math.inf
        renewals, arms, next_at = self.registry.plan(now)
        for entry, lease in renewals:
            self.io.spawn(self.renew, entry, lease)
        if arms:
            self.tracker.arm(arms)
        with self.mutex:
            if next_at < math.inf or self.wake_at < math.inf:  # held, or granted meanwhile
                self.idle_since = None
            else:
                self.idle_since = now if self.idle_since is None else self.idle_since
                if now - self.idle_since >= WATCHDOG_IDLE:
                    self.runner = self.idle_since = None
                    return None
                next_at = self.idle_since + WATCHDOG_IDLE
            self.wake_at = min(next_at, self.wake_at)
            return self.wake_at


class Watchlist:
    """What the tracking listener watches (both clients): the holds armed
    (``ARM_DELAY`` after their grant, by the watchdog's round: a lock
    released sooner is never read) by the key the server reports; and when
    the flavour's listener (``Tracker``) starts and ends."""

    def __init__(self, enabled: bool, io: Any, registry: Registry) -> None:
        self.enabled = enabled
        self.io = io
        self.registry = registry
        self.mutex = threading.Lock()
        self.watched: dict[str, list[Entry]] = {}
        self.listener: Any = None
        self.reader: Any = None
        self.idle_since: float | None = None

    def listen(self) -> Any:
        raise NotImplementedError

    def check_all(self, entries: list[Entry]) -> Any:
        raise NotImplementedError

    def arm(self, ready: list[Entry]) -> None:
        """Starts watching holds granted ``ARM_DELAY`` ago (the watchdog's
        round): each is read once by the listener (started if need be)."""
        with self.mutex:
            if not self.enabled:
                return
            for entry in ready:
                key, _ = tracking_read(entry.kind, entry.name, entry.field)
                self.watched.setdefault(key, []).append(entry)
            if self.listener is None:
                self.listener = self.io.spawn(self.listen)
        if self.reader is not None:
            self.io.spawn(self.check_all, ready)

    def idle(self, now: float) -> bool:
        """After a quiet second: forgets entries no longer held; whether the
        listener ends (nothing was watched, or waited to be armed, for
        ``WATCHDOG_IDLE`` s)."""
        arming = self.registry.arming()
        with self.mutex:
            held = {key: [e for e in es if e.is_held()] for key, es in self.watched.items()}
            self.watched = {key: es for key, es in held.items() if es}
            if self.watched or arming or self.idle_since is None:
                self.idle_since = None if self.watched or arming else now
                return False
            if now - self.idle_since < WATCHDOG_IDLE:
                return False
            self.listener = None
            return True

    def all(self) -> list[Entry]:
        with self.mutex:
            return [e for entries in self.watched.values() for e in entries]

    def stopped(self) -> None:
        """The listener died (its event loop closed): the next arm starts another."""
        with self.mutex:
            self.listener = self.idle_since = None

    def refused(self) -> None:
        """The server refuses tracking (ACLs, or it cannot): renewals only,
        for good."""
        with self.mutex:
            self.enabled = False
            self.watched.clear()
            self.listener = None

    def named(self, msg: Any) -> list[Entry]:
        """The watched entries an invalidation message names (all of them
        when it names no key: the server flushed its tracking table)."""
        if not isinstance(msg, (list, tuple)) or len(msg) < 3 or text(msg[0]) != "message":
            return []
        if not isinstance(msg[2], (list, tuple)):
            return self.all()
        with self.mutex:
            return [e for k in msg[2] for e in self.watched.get(str(text(k)), [])]
