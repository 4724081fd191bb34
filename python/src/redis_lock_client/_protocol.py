"""What both clients say to the server and how they read its answers:
options, owner ids, the commands of every kind of hold, reply decoding.
Nothing here does I/O; a reply outside the ``LOCK.*`` contract raises
:class:`~redis_lock_client.ProtocolViolation`.
"""

from __future__ import annotations

import enum
import inspect
import itertools
import threading
import uuid
from dataclasses import dataclass, field
from functools import partial
from types import FunctionType
from typing import Any

import redis.utils

from .errors import ProtocolViolation

Number = int | float


@dataclass(frozen=True)
class Options:
    """Settings of a client; the defaults are Redisson's where it has one.

    * ``watchdog_lease``: the lease (s) of locks taken without one; the
      watchdog renews it every third of it (Redisson's
      ``lockWatchdogTimeout``, 30 s).
    * ``command_timeout``: how long one short command may take before its
      connection is treated as broken (s). None (the default): the
      connection's own ``socket_timeout`` (redis-py 8: 5 s), or 3 s (Redisson's
      ``timeout``) when it has none.
    * ``retries`` / ``retry_interval``: how often, and after what pause, a
      command is resent once the client has made sure that the failed
      attempt did not run.
    * ``wait_margin``: how much longer than a ``WAIT`` the reply is awaited.
    * ``sync_replicas``: ``(n, timeout)`` sends ``SYNC n timeout-ms`` with
      every acquire: a grant is answered only once ``n`` replicas
      acknowledged it, otherwise the module undoes it and the call raises
      :class:`~redis_lock_client.NotSynced` (not held). ``(0, 0)`` turns the
      module's ``lock.sync-replicas`` off for this client; None (default)
      leaves it to the module. Reply deadlines grow by ``timeout``.
    * ``wait_piece``: the longest one command waits in the server (s): a
      longer wait is sent as pieces of this length that keep their place in
      the queue (docs/waiting.md). Keep it below the driver's
      ``socket_timeout`` minus ``wait_margin``.
    * ``track_locks``: the server tells the client at once when a held
      lock's or permit's key changes (``CLIENT TRACKING``, one connection
      pair per client), so a loss is told within milliseconds rather than
      at the next renewal. Single servers and Sentinel; a cluster relies on
      renewals.
    """

    watchdog_lease: float = 30.0
    command_timeout: float | None = None
    retries: int = 3
    retry_interval: float = 0.1
    wait_margin: float = 2.0
    sync_replicas: tuple[int, float] | None = None
    track_locks: bool = True
    wait_piece: float = 2.0

    def sync_args(self) -> tuple[int, int] | None:
        """``SYNC``'s arguments, checked: a positive timeout when replicas
        are asked for (0 would mean forever), in whole ms (rounded up)."""
        if self.sync_replicas is None:
            return None
        replicas, timeout = self.sync_replicas
        ms = -(-int(timeout * 1_000_000) // 1000)
        if replicas < 0 or ms < 0 or (replicas > 0 and ms == 0):
            raise ValueError(
                f"sync_replicas needs n >= 0 and a positive timeout: {self.sync_replicas!r}"
            )
        return replicas, ms

    def sync_time(self) -> float:
        """How much longer an acquire may take: the module may wait for replicas."""
        return 0.0 if self.sync_replicas is None else float(self.sync_replicas[1])

    def acquire_timeout(self) -> float | None:
        """The reply deadline of an acquire without WAIT (None: the
        connection's own, when nothing is added)."""
        if self.sync_replicas is None:
            return self.command_timeout
        return short_timeout(self.command_timeout) + self.sync_time()


# A short command's deadline when neither the options nor the connection
# give one (Redisson's `timeout`, 3 s).
DEFAULT_TIMEOUT = 3.0


def short_timeout(option: float | None) -> float:
    """A bound for one short command, for what is not a read on a
    connection (a deadline, a renewal's budget)."""
    return DEFAULT_TIMEOUT if option is None else option


@dataclass(frozen=True)
class LostReason:
    """Why a held lock was lost (``guard.lost_reason``); reasons compare by
    ``kind``.

    ``kind`` is one of:

    * ``"not_held"``: the server no longer has this owner's hold: it was
      forced (``LOCK.FORCE``), deleted, or expired;
    * ``"renewal_failed"``: no renewal succeeded before the lease passed
      (``detail`` says what failed); the server has freed it by now;
    * ``"lease_expired"``: a lock taken with a caller-given lease reached
      its end.
    """

    NOT_HELD = "not_held"
    RENEWAL_FAILED = "renewal_failed"
    LEASE_EXPIRED = "lease_expired"

    kind: str
    detail: str = field(default="", compare=False)

    def __str__(self) -> str:
        text = {
            self.NOT_HELD: "the server no longer holds it for this owner "
            "(forced, deleted or expired)",
            self.RENEWAL_FAILED: "no renewal succeeded within the lease",
            self.LEASE_EXPIRED: "its lease ended",
        }.get(self.kind, self.kind)
        return f"{text}: {self.detail}" if self.detail else text


# -- owner ids ----------------------------------------------------------------

_thread_numbers = itertools.count(1)
_thread_local = threading.local()


def thread_number() -> str:
    """This thread's number in owner ids: threads are numbered from 1 per
    process, never reused (a thread ident can be, after a thread exits)."""
    n: str | None = getattr(_thread_local, "number", None)
    if n is None:
        n = _thread_local.number = str(next(_thread_numbers))
    return n


def new_client_id() -> str:
    return str(uuid.uuid4())


# -- commands and replies -----------------------------------------------------


def lease_ms(lease: Number, what: str = "a lease") -> int:
    """A lease (or ``what``: a key's ttl) in whole milliseconds: at least 1 ms."""
    ms = int(lease * 1000)
    if ms < 1:
        raise ValueError(f"{what} must be at least 1 ms: {lease!r} s")
    return ms


def wait_ms(wait: Number) -> int:
    """A wait in whole ms, rounded up so it never ends early; at least 1
    (the module reads 0 as forever)."""
    return max(1, -(-int(wait * 1_000_000) // 1000))


@dataclass(frozen=True)
class Kind:
    """The commands and the hash field of one kind of hold: a lock's, or a
    read-write lock's read or write hold (Redisson's layout: a reader's field
    is its owner id, the writer's ``<owner>:write``). Everything that changes
    or reads back a hold count goes through this, so the three kinds share
    one retry machinery."""

    label: str
    acquire: str
    release: str
    renew: str
    suffix: str = ""
    # The release takes the lease to reset a re-entered hold to.
    release_lease: bool = True
    fenceable: bool = True
    syncable: bool = False

    def field(self, owner: str) -> str:
        """The owner's hash field for this kind of hold."""
        return owner + self.suffix


LOCK = Kind("lock", "LOCK.ACQUIRE", "LOCK.RELEASE", "LOCK.RENEW", syncable=True)
READ = Kind(
    "read", "LOCK.RACQUIRE", "LOCK.RRELEASE", "LOCK.RWRENEW", release_lease=False, fenceable=False
)
WRITE = Kind("write", "LOCK.WACQUIRE", "LOCK.WRELEASE", "LOCK.RWRENEW", suffix=":write")


def acquire_args(
    name: str,
    owner: str,
    lease: int,
    wait: int | None,
    fenced: bool,
    sync: tuple[int, int] | None = None,
    kind: Kind = LOCK,
) -> list[Any]:
    if fenced and not kind.fenceable:
        raise ValueError(f"a {kind.label} hold has no fencing token")
    args: list[Any] = [kind.acquire, name, owner, lease]
    if wait is not None:
        args += ["WAIT", wait]
    if fenced:
        args.append("TOKEN")
    if sync is not None and kind.syncable:
        args += ["SYNC", sync[0], sync[1]]
    return args


def release_args(kind: Kind, name: str, owner: str, known: int, renew: float | None) -> list[Any]:
    """The release of one of ``known`` holds; a watchdog's re-entered hold
    keeps its lease (``renew``) where the command takes one."""
    args: list[Any] = [kind.release, name, owner]
    if renew is not None and known > 1 and kind.release_lease:
        args.append(lease_ms(renew))
    return args


def acquired(reply: Any) -> bool:
    """Whether an acquire's reply (with or without ``TOKEN``) is a grant."""
    return reply is None or (isinstance(reply, (list, tuple)) and reply[0] == -1)


def parse_acquire(reply: Any, fenced: bool) -> tuple[bool, int | None]:
    """(granted, token) from a ``LOCK.ACQUIRE`` reply: nil / integer, or with
    ``TOKEN`` ``[-1, token]`` / ``[remaining, -1]``."""
    if not fenced:
        if reply is None:
            return True, None
        if isinstance(reply, int):
            return False, None
    elif isinstance(reply, (list, tuple)) and len(reply) == 2:
        first, second = reply
        if first == -1 and isinstance(second, int) and second >= 0:
            return True, second
        if second == -1:
            return False, None
    raise ProtocolViolation(f"LOCK.ACQUIRE answered {reply!r}")


def text(v: Any) -> Any:
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else v


def pairs(v: Any) -> dict[str, Any]:
    """A RESP3 map or a RESP2 flat key/value list as a dict with str keys."""
    if isinstance(v, dict):
        return {str(text(k)): x for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return {str(text(v[i])): v[i + 1] for i in range(0, len(v) - 1, 2)}
    return {}


def lease_left(info: Any, field: str) -> tuple[bool, float] | None:
    """From a ``LOCK.INFO`` reply: (holds, seconds of lease left) for the
    hash field ``field``, or None when the reply is not understood. (A
    read-write lock's ``ttl_ms`` is its longest hold's: an upper bound.)"""
    fields = pairs(info)
    if "owners" not in fields or "ttl_ms" not in fields:
        return None
    owners = pairs(fields["owners"])
    count = owners.get(field)
    if count is None or int(count) == 0:
        return False, 0.0
    ttl = fields["ttl_ms"]
    if not isinstance(ttl, int) or ttl < 0:
        return None
    return True, ttl / 1000.0


def hold_count(reply: Any) -> int:
    return 0 if reply is None else int(reply)


def own_lease(field: str, info: Any) -> float | None:
    """The lease left (s) of the hold in hash field ``field``, from a
    ``LOCK.INFO`` reply; None when it is not held."""
    left = lease_left(info, field)
    return left[1] if left is not None and left[0] else None


def seconds(ms: Any) -> float | None:
    """A ``PTTL`` reply in seconds; None for a key missing or without one."""
    return ms / 1000.0 if isinstance(ms, int) and ms >= 0 else None


def is_some(reply: Any) -> bool:
    return reply is not None


def same(reply: Any) -> Any:
    return reply


def is_one(reply: Any) -> bool:
    return bool(reply == 1)


def token_key(name: str) -> str:
    """Redisson's name for a lock's token counter."""
    return f"redisson_lock_token:{name}" if "{" in name else f"redisson_lock_token:{{{name}}}"


def is_cluster(redis: Any) -> bool:
    return getattr(redis, "get_node_from_key", None) is not None


_TAKERS: dict[Any, Any] = {}


def _probe() -> None: ...
async def _aprobe() -> None: ...


# The code of redis-py's ``deprecated_args`` wrappers (5.3+), which only warn.
_deprecated: Any = getattr(redis.utils, "deprecated_args", None)
_WARNS = {_deprecated()(f).__code__ for f in (_probe, _aprobe)} if _deprecated else set()


def taker(pool: Any) -> Any:
    """How to take a connection out of ``pool``: ``taker(pool)(pool)``.
    redis-py 5.3 and later wrap ``get_connection`` in ``deprecated_args``,
    which only warns about arguments, and this client passes none: it is
    called unwrapped (a tenth of a lock+unlock's client time), unless
    something else wraps or replaces it; before 5.3 it wants a command name."""
    if "get_connection" in getattr(pool, "__dict__", ()):
        return _own  # replaced on this pool (a test's mock): called as it is
    func = type(pool).get_connection
    take = _TAKERS.get(func)
    if take is None:
        warns = type(func) is FunctionType and func.__code__ in _WARNS
        inner = func.__wrapped__ if warns else func
        take = _TAKERS[func] = partial(_named, inner) if _wants_name(inner) else inner
    return take


def _own(pool: Any) -> Any:
    get = pool.get_connection
    return get("LOCK") if _wants_name(get) else get()


def _wants_name(func: Any) -> bool:
    try:
        param = inspect.signature(func).parameters.get("command_name")
    except (TypeError, ValueError):
        return False
    return param is not None and param.default is inspect.Parameter.empty


def _named(get_connection: Any, pool: Any) -> Any:
    return get_connection(pool, "LOCK")


def retry_after(lease: float) -> float:
    """When a failed renewal is tried again: every tenth of the lease."""
    return max(lease / 10, 0.01)


# -- semaphores, leased permits and the count-down latch (Redisson's
# RSemaphore, RPermitExpirableSemaphore and RCountDownLatch layouts) ----------

# A leased permit is a "hold" whose owner is its id: the watchdog renews it
# with ``LOCK.PERMITRENEW name id lease-ms`` (1 renewed, 0 not held), the
# same shape as a lock's renewal.
PERMIT = Kind(
    "permit",
    "LOCK.PERMITACQUIRE",
    "LOCK.PERMITRELEASE",
    "LOCK.PERMITRENEW",
    release_lease=False,
    fenceable=False,
)


def tracking_read(kind: Kind, name: str, field: str) -> tuple[str, list[Any]]:
    """The key whose changes the server reports for a hold of ``kind``, and
    the read that both arms that report (``CLIENT TRACKING`` remembers what
    a connection read) and answers whether the hold is still there: a
    lock's hash field, or a permit's member of ``{name}:timeout``."""
    if kind is PERMIT:
        key = timeout_key(name)
        return key, ["ZSCORE", key, bytes.fromhex(field)]
    return name, ["HGET", name, field]


def still_held(kind: Kind, reply: Any) -> bool:
    """What :func:`tracking_read`'s reply (a lock's ``HGET name field``)
    says: whether the hold is there."""
    return reply is not None if kind is PERMIT else hold_count(reply) > 0


_AT_LEAST = {1: "a positive integer", 0: "a non-negative integer", None: "an integer"}


def whole(n: int, what: str, least: int | None = 1) -> int:
    """An integer the module requires to be >= ``least`` (checked here, so
    a bad argument never reaches the wire)."""
    if isinstance(n, bool) or not isinstance(n, int) or (least is not None and n < least):
        raise ValueError(f"{what} must be {_AT_LEAST[least]}: {n!r}")
    return n


def ttl_args(args: list[Any], ttl: Number | None) -> list[Any]:
    """``args``, with ``PX`` and a key's time to live when there is one."""
    return args if ttl is None else [*args, "PX", lease_ms(ttl, "a ttl")]


def wait_args(args: list[Any], wait: int | None) -> list[Any]:
    """``args``, with ``WAIT`` ms (0: forever) unless ``wait`` is None (one attempt)."""
    return args if wait is None else [*args, "WAIT", wait]


def timeout_key(name: str) -> str:
    """Redisson's ``suffixName(name, "timeout")``: the sorted set of leased
    permits."""
    return f"{name}:timeout" if "{" in name else f"{{{name}}}:timeout"


def sem_set_args(name: str, permits: int, ttl: Number | None) -> list[Any]:
    return ttl_args(["LOCK.SEMSET", name, whole(permits, "permits", 0)], ttl)


def sem_add_args(name: str, delta: int) -> list[Any]:
    return ["LOCK.SEMADD", name, whole(delta, "delta", None)]


def sem_acquire_args(name: str, permits: int, wait: int | None) -> list[Any]:
    return wait_args(["LOCK.SEMACQUIRE", name, whole(permits, "permits")], wait)


def sem_release_args(name: str, permits: int) -> list[Any]:
    return ["LOCK.SEMRELEASE", name, whole(permits, "permits")]


def permit_acquire_args(name: str, permits: int, lease: int, wait: int | None) -> list[Any]:
    """Always with a ``LEASE``: a grant whose reply is lost frees itself."""
    return wait_args(["LOCK.PERMITACQUIRE", name, whole(permits, "permits"), "LEASE", lease], wait)


def permit_release_args(name: str, ids: list[str]) -> list[Any]:
    if not ids:
        raise ValueError("no permit ids to release")
    return ["LOCK.PERMITRELEASE", name, *ids]


def latch_set_args(name: str, count: int, ttl: Number | None) -> list[Any]:
    return ttl_args(["LOCK.LATCHSET", name, whole(count, "count")], ttl)


def await_args(name: str, ms: int) -> list[Any]:
    return ["LOCK.AWAIT", name, ms]


def latch_ended(reply: Any) -> bool:
    """Whether a ``LOCK.AWAIT`` reply ends the wait (opened, or expired)."""
    return reply in (1, -1)


def wait_plan(wait: Number | None) -> tuple[int | None, float | None]:
    """(WAIT ms, seconds the server may wait) of a try; (None, None): one
    attempt."""
    if wait is None or wait <= 0:
        return None, None
    return wait_ms(wait), float(wait)


def score_args(name: str, ids: list[str]) -> list[Any]:
    """The leased permits' deadlines (``ZMSCORE``)."""
    return ["ZMSCORE", timeout_key(name), *[bytes.fromhex(i) for i in ids]]


def granted_forever(reply: Any) -> None:
    """A wait without end ends granted."""
    if reply != 1:
        raise ProtocolViolation(f"a wait without end answered {reply!r}")


def integer(command: str, reply: Any) -> int:
    if isinstance(reply, bool) or not isinstance(reply, int):
        raise ProtocolViolation(f"{command} answered {reply!r}")
    return reply


def flag(command: str, reply: Any) -> bool:
    """A 1 / 0 reply."""
    if reply not in (0, 1) or isinstance(reply, bool):
        raise ProtocolViolation(f"{command} answered {reply!r}")
    return bool(reply == 1)


def permit_ids(reply: Any, permits: int) -> list[str] | None:
    """``LOCK.PERMITACQUIRE``'s reply: ``permits`` ids (32 lowercase hex
    characters), or None when not granted."""
    if reply is None:
        return None
    if isinstance(reply, (list, tuple)) and len(reply) == permits:
        ids = [str(text(i)) for i in reply]
        if all(len(i) == 32 and all(c in "0123456789abcdef" for c in i) for i in ids):
            return ids
    raise ProtocolViolation(f"LOCK.PERMITACQUIRE answered {reply!r}")


def not_held_id(error: str) -> str | None:
    """The id in ``ERR permit <hex> is not held (...)``, else None."""
    words = error.split()
    if "permit" in words and "not" in words and "held" in words:
        i = words.index("permit")
        if i + 1 < len(words) and len(words[i + 1]) == 32:
            return words[i + 1].lower()
    return None


def rows(v: Any) -> list[Any]:
    """A RESP3 map or a RESP2 flat list of ``[key, value]`` as pairs."""
    if isinstance(v, dict):
        return [[k, x] for k, x in v.items()]
    if isinstance(v, (list, tuple)):
        if all(isinstance(x, (list, tuple)) and len(x) == 2 for x in v):
            return [list(x) for x in v]
        return [[v[i], v[i + 1]] for i in range(0, len(v) - 1, 2)]
    return []


def info(key: str, command: str, reply: Any) -> dict[str, Any]:
    """A ``LOCK.SEMINFO`` / ``LOCK.LATCHINFO`` reply (its fields are told
    in ``_api``), which must have ``key``; ``waiters`` as a list of dicts."""
    fields = pairs(reply)
    if key not in fields:
        raise ProtocolViolation(f"{command} answered {reply!r}")
    out: dict[str, Any] = {k: text(v) for k, v in fields.items()}
    waiters = fields.get("waiters") or []
    out["waiters"] = [{k: text(v) for k, v in pairs(w).items()} for w in waiters]
    return out


def sem_info(command: str, reply: Any) -> dict[str, Any] | None:
    """None when the module answers nil (the key is missing and nobody waits)."""
    if reply is None:
        return None
    out = info("available", command, reply)
    out["permits"] = [(str(text(i)), int(d)) for i, d in rows(out.get("permits") or [])]
    return out


latch_info = partial(info, "count")


class LatchResult(str, enum.Enum):
    """How a wait on a count-down latch ended (``LOCK.AWAIT``'s 1 / 0 / -1)."""

    REACHED = "reached"
    """The count reached zero (or the latch was missing or deleted)."""
    TIMED_OUT = "timed_out"
    """The timeout passed first."""
    EXPIRED = "expired"
    """The latch's own ttl ended while waiting (``try_set_count(n, ttl)``)."""

    def __bool__(self) -> bool:
        return self is LatchResult.REACHED


def latch_result(reply: Any) -> LatchResult:
    results = {1: LatchResult.REACHED, 0: LatchResult.TIMED_OUT, -1: LatchResult.EXPIRED}
    if isinstance(reply, int) and reply in results:
        return results[reply]
    raise ProtocolViolation(f"LOCK.AWAIT answered {reply!r}")
