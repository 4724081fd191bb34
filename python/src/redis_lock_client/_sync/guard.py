"""Generated from ``_async/guard.py`` (which documents it) by
``python/scripts/unasync.py``: do not edit."""

from __future__ import annotations

from types import TracebackType

from .. import _protocol
from .._holds import Entry, HoldView
from .._protocol import Number
from ..errors import NotHeld
from . import _io
from ._io import Event
from .engine import Engine


class LockGuard(HoldView):
    """One hold of a lock: :meth:`unlock` gives it back (also on leaving an
    ``with`` block). ``lost`` is an Event set the moment the client
    learns the lock is gone (forced, deleted or expired on the server, told
    by tracking within milliseconds or by the next renewal; renewals
    failing for a whole lease; a caller-given lease ending); ``lost_reason``
    says why.

    A guard garbage-collected unreleased is released in the background, so
    a forgotten guard is never renewed for ever; ``release_on_drop =
    False`` keeps its hold until its lease ends instead (what redis-py does
    with a lock object that has a timeout)."""

    def __init__(self, engine: Engine, entry: Entry, token: int | None) -> None:
        self._engine = engine
        self._registry = engine.registry
        self._entry = entry
        self._home = _io.home()
        self._released = False
        self.release_on_drop = True
        self.token = token

    @property
    def lost(self) -> Event:
        """Set when the lock is lost: wait on it, or poll ``lost.is_set()``."""
        self._registry.expire_if_due(self._entry)
        event: Event = self._entry.lost_event()
        return event

    def is_held(self) -> bool:
        """Asks the server whether this owner still holds the lock."""
        v = self._engine.counted.simple(self.name, ["HGET", self.name, self._entry.field])
        return _protocol.hold_count(v) > 0

    def remaining_lease(self) -> float | None:
        """The lease left on the server (s), None if not held by this owner."""
        if not self.is_held():
            return None
        ms = self._engine.counted.simple(self.name, ["PTTL", self.name])
        return ms / 1000.0 if isinstance(ms, int) and ms >= 0 else None

    def renew(self, lease: Number) -> bool:
        """Restarts the lease at ``lease`` s from now (a hold with a
        caller-given lease; the watchdog renews the others); False if the
        owner no longer holds it."""
        return self._engine.restart(self._entry, float(lease))

    def unlock(self) -> None:
        """Gives this hold back; :class:`NotHeld` if the lock was lost."""
        if self._released:
            raise NotHeld(self.name)
        self._released = True
        self._engine.release(self._entry)

    def __del__(self) -> None:
        if getattr(self, "_released", True) or not self.release_on_drop:
            return
        self._released = True
        _io.when_dropped(self._home, self._engine.release_quietly, self._entry)

    def __enter__(self) -> LockGuard:
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._released:
            return
        try:
            self.unlock()
        except NotHeld:
            if et is None:
                raise
