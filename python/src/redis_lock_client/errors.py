"""The package's errors. Each says what the caller can still rely on, and
each is also the redis-py exception a redis-py user already catches:
every one is a ``redis.exceptions.LockError`` (so a ``RedisError``); a
refusal is a ``ResponseError``, an unreachable server a
``ConnectionError``, a hold found gone a ``LockNotOwnedError``."""

from __future__ import annotations

from collections.abc import Sequence

from redis import exceptions as rex


class LockError(rex.LockError):
    """Base class of every error this package raises."""

    #: True when retrying later may succeed (unreachable server, unknown
    #: outcome), as opposed to a refusal.
    transient = False


class ServerError(LockError, rex.ResponseError):
    """The server refused the command (wrong type, ``NOPERM``, module not
    loaded, a lease above ``lock.max-lease-ms``...). Nothing changed."""


class ConnectionLost(LockError, rex.ConnectionError):
    """The server could not be reached, and the client made sure that the
    command it could not deliver did not take effect (or sent nothing)."""

    transient = True


class Uncertain(LockError, rex.ConnectionError):
    """A connection failed after a command was sent and the client could not
    read back whether it ran: the lock may be held by this owner until its
    lease ends (no watchdog renews it)."""

    def __init__(self, name: str, detail: str) -> None:
        super().__init__(
            f"lock {name!r}: the connection failed after the command was sent and its "
            f"outcome could not be read back ({detail}); the lock may be held until its "
            "lease ends"
        )
        self.name = name

    transient = True


class NotHeld(LockError, rex.LockNotOwnedError):
    """Unlock of a hold the server no longer has: its lease ended or it was
    forced. Redisson throws ``IllegalMonitorStateException`` here."""

    def __init__(self, name: str) -> None:
        super().__init__(
            f"lock {name!r} is no longer held by this owner (its lease ended or it was forced)"
        )
        self.name = name


class HoldCountMismatch(LockError):
    """The server counts another number of holds for this owner than the
    client does: something else uses the same owner id."""

    def __init__(self, name: str, expected: Sequence[int], found: int) -> None:
        super().__init__(
            f"lock {name!r}: the server counts {found} holds for this owner where this "
            f"client expected one of {list(expected)}; is the owner id used elsewhere?"
        )
        self.name, self.expected, self.found = name, list(expected), found


class NotSynced(LockError, rex.ResponseError):
    """A synced grant (``sync_replicas``, or the module's
    ``lock.sync-replicas``) was not acknowledged by enough replicas in time,
    and the module undid it: the lock is **not held** by this owner. A later
    try may succeed once the replicas catch up."""

    def __init__(self, name: str, detail: str) -> None:
        super().__init__(
            f"lock {name!r} is NOT held: the grant was undone because too few replicas "
            f"acknowledged it in time ({detail})"
        )
        self.name, self.detail = name, detail

    transient = True


class UpgradeRefused(ServerError):
    """A write lock asked for by an owner that holds the same read-write lock
    for reading: the module refuses it (waiting would wait for itself), as
    Redisson's read-then-write deadlocks. Nothing changed: the read holds are
    still held. Release them first, then ask to write. (The other way, a
    writer taking read, is a downgrade and is granted.)"""

    def __init__(self, name: str, detail: str) -> None:
        super().__init__(
            f"read-write lock {name!r}: this owner holds it for reading and cannot "
            f"also ask to write; release the read holds first ({detail})"
        )
        self.name, self.detail = name, detail


class OutcomeUnknown(Uncertain):
    """A semaphore or latch command (which changes a count, and so is not
    resent) lost its connection after it was sent: whether it ran is
    unknown. For an acquire: permits may have been taken that no caller
    holds (a leased permit frees itself at its lease's end; a plain
    semaphore's permit stays taken until someone releases it)."""

    def __init__(self, name: str, command: str, detail: str, cid: int | None = None) -> None:
        LockError.__init__(
            self,
            f"{command} on {name!r}: the connection failed after the command was sent, "
            f"so whether it ran is unknown ({detail})",
        )
        self.name, self.command = name, command
        self.cid = cid  # the connection's id (to fence it)


class PermitsNotHeld(NotHeld):
    """Release of leased permits of which some were no longer held (their
    lease ended, or they were released by id elsewhere). The others were
    released; ``ids`` are the ones that were gone."""

    def __init__(self, name: str, ids: Sequence[str]) -> None:
        LockError.__init__(
            self,
            f"semaphore {name!r}: permits {list(ids)} were no longer held "
            "(their lease ended or they were released elsewhere)",
        )
        self.name, self.ids = name, list(ids)


class ProtocolViolation(LockError, rex.InvalidResponse):
    """The server answered something the ``LOCK.*`` contract does not allow
    (is the module loaded?)."""


TRANSPORT = (rex.ConnectionError, rex.TimeoutError, OSError)
# (A MovedError is an AskError.)
WRONG_ROLE = (rex.ReadOnlyError, rex.AskError, rex.TryAgainError, rex.ClusterDownError)


def wrong_role(e: BaseException) -> bool:
    """Refused by a server that is no master (any more), or for a key that
    moved: nothing ran."""
    said = ("READONLY", "MOVED", "ASK ", "UNBLOCKED", "TRYAGAIN", "CLUSTERDOWN")
    return isinstance(e, WRONG_ROLE) or str(e).startswith(said)


def server_error(e: BaseException) -> ServerError:
    """A refusal, saying so when the server does not know a ``LOCK.*``
    command: the module is not loaded there."""
    text = str(e)
    if text.lower().startswith("unknown command") and "'lock." in text.lower():
        text += " (is the lock module loaded? MODULE LIST names it 'lock')"
    return ServerError(text)


def refused(name: str, e: BaseException) -> LockError:
    """The error for a server's refusal of an acquire or release of ``name``."""
    text = str(e)
    if text.startswith("NOSYNC"):
        return NotSynced(name, text)
    if "holds this read-write lock for reading" in text:
        return UpgradeRefused(name, text)
    return server_error(e)


def describe(e: BaseException | None) -> str:
    return f"{type(e).__name__}: {e}" if e is not None else "no attempt"
