"""What the asyncio client does differently from the threaded one, and
only that: its primitives (locks, events, sleeping, background tasks,
owner numbers), how it talks to ``redis.asyncio`` connections, and what
happens to a cancelled call and to a guard dropped unreleased. Every other
module of this package is generated into ``_sync`` (see
``python/scripts/unasync.py``), whose ``_io.py`` is the threaded twin of
this one.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import weakref
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, TypeVar

from redis import exceptions as rex
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from .. import _protocol
from .._holds import monotonic

Lock = asyncio.Lock
Event = asyncio.Event

# A wait without end: longer than any process lives (math.inf is redis-py 6+).
_FOREVER = 1e9

_task_numbers = itertools.count(1)
_task_ids: weakref.WeakKeyDictionary[asyncio.Task[Any], int] = weakref.WeakKeyDictionary()
_background: set[asyncio.Task[Any]] = set()


def owner_suffix() -> str:
    """``task-<n>`` for the running task, numbered from 1 per process (a
    task's ``id()`` can be reused once it is gone); the thread outside one."""
    try:
        task = asyncio.current_task()
    except RuntimeError:
        task = None
    if task is None:
        return _protocol.thread_number()
    n = _task_ids.get(task)
    if n is None:
        n = _task_ids[task] = next(_task_numbers)
    return f"task-{n}"


def cancels() -> int:
    """How many cancels the running task was asked for (0 before 3.11)."""
    task = asyncio.current_task()
    return int(getattr(task, "cancelling", lambda: 0)()) if task is not None else 0


def raise_lost_cancel(since: int) -> None:
    """Raises a cancel asked for since ``since`` (:func:`cancels`) that
    never arrived: ``asyncio.wait_for`` before 3.12 (redis-py sends under
    one) drops a cancel that comes as its inner call ends, and a wait
    without end would then go on for ever."""
    if cancels() > since:
        raise asyncio.CancelledError


sleep = asyncio.sleep


def spawn(fn: Callable[..., Coroutine[Any, Any, Any]], *args: Any) -> asyncio.Task[Any]:
    """Runs ``fn(*args)`` in a task of its own (kept until it ends)."""
    task: asyncio.Task[Any] = asyncio.get_running_loop().create_task(fn(*args))
    _background.add(task)
    task.add_done_callback(_background.discard)
    return task


# Clean-up after a cancelled call: in a task of its own, which the
# caller's cancellation cannot cut short.
after_interruption = spawn


# Where a guard's background release must run: its event loop.
home = asyncio.get_running_loop


def when_dropped(loop: Any, fn: Callable[..., Coroutine[Any, Any, Any]], *args: Any) -> None:
    """A guard collected unreleased (from ``__del__``, on any thread):
    ``fn(*args)`` runs on its loop; with the loop closed the lease ends on
    its own."""
    with contextlib.suppress(Exception):
        loop.call_soon_threadsafe(spawn, fn, *args)


class Wakeup:
    """What the watchdog sleeps on: a timeout that ``set()`` cuts short."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def set(self) -> None:
        self._event.set()

    async def wait(self, seconds: float) -> None:
        # Not asyncio.wait_for: before 3.12 it drops a cancel that comes as
        # the event is set, and the watchdog would run on at asyncio.run's
        # end (a process that raised while holding never exited).
        if seconds > 0 and not self._event.is_set():
            waiter = asyncio.ensure_future(self._event.wait())
            try:
                await asyncio.wait({waiter}, timeout=seconds)
            finally:
                waiter.cancel()
        self._event.clear()


# -- connections -------------------------------------------------------------


class _ClusterNodePool:
    """A ``redis.asyncio`` cluster node, seen as a client with a pool."""

    def __init__(self, node: Any) -> None:
        self.node = node
        self.connection_pool = self

    async def get_connection(self, *_: Any) -> Any:
        return self.node.acquire_connection()

    async def release(self, conn: Any) -> None:
        release = getattr(self.node, "release", None)
        if release is not None:
            release(conn)
        else:  # redis-py 5.0: the node keeps its free connections in a deque
            self.node._free.append(conn)


async def route(redis: Any, name: str) -> Any:
    """What serves ``name``: the client itself, or a cluster's node behind
    an adapter with the pool's two calls."""
    if not _protocol.is_cluster(redis):
        return redis
    await redis.initialize()
    return _ClusterNodePool(redis.get_node_from_key(name))


async def moved(redis: Any) -> None:
    """A node answered that it no longer serves a key: learn the layout."""
    manager = getattr(redis, "nodes_manager", None)
    if manager is not None:
        with contextlib.suppress(Exception):
            await manager.initialize()


async def put(node: Any, conn: Any) -> None:
    await node.connection_pool.release(conn)


async def drop(node: Any, conn: Any) -> None:
    """Closes a connection whose state is unknown and gives it back (also
    when the caller is being cancelled)."""

    async def close() -> None:
        try:
            await drop_reading(conn)
        finally:
            await put(node, conn)

    await asyncio.shield(close())


async def drop_reading(conn: Any) -> None:
    """Closes the connection, and ends the task reading it (if any)."""
    task = getattr(conn, "_rlc_reading", None)
    conn._rlc_reading = None
    await conn.disconnect()
    if task is not None:
        task.cancel()


def socket(conn: Any) -> Any:
    """What identifies the connection's current socket."""
    return getattr(conn, "_writer", None)


async def arrived(conn: Any, within: float) -> bool:
    """Whether the reply to what was sent came within ``within`` s, left
    for :func:`reply`: it is read by a task of its own, which neither this
    wait's end nor the caller's cancellation cuts (the connection stays
    readable)."""
    task = getattr(conn, "_rlc_reading", None)
    if task is None:
        task = conn._rlc_reading = spawn(conn.read_response, False, _FOREVER)
    done, _ = await asyncio.wait({task}, timeout=max(within, 0.0))
    return bool(done)


async def reply(conn: Any, within: float | None) -> Any:
    """The reply to what was sent, awaited ``within`` s (None: forever).
    A reply that does not come in time closes the connection (it may still
    come) and raises redis-py's ``TimeoutError``."""
    if getattr(conn, "_rlc_reading", None) is not None:
        if not await arrived(conn, _FOREVER if within is None else within):
            await drop_reading(conn)
            raise rex.TimeoutError(f"no reply within {within:.3f} s")
        task, conn._rlc_reading = conn._rlc_reading, None
        return task.result()
    if within is None:
        return await conn.read_response(timeout=_FOREVER)
    started = monotonic()
    answer = await conn.read_response(timeout=max(within, 0.0))
    # On its deadline redis-py answers None, as a nil reply would be: one
    # that late is handled as a timeout, which is always safe here.
    if answer is None and monotonic() - started >= within - 0.001:
        await conn.disconnect()
        raise rex.TimeoutError(f"no reply within {within:.3f} s")
    return answer


async def execute(conn: Any, args: list[Any], timeout: float | None) -> Any:
    """One short command, its reply awaited ``timeout`` (None: the
    connection's own socket timeout, or the default when it has none)."""
    await conn.send_command(*args)
    return await reply(conn, timeout or conn.socket_timeout or _protocol.DEFAULT_TIMEOUT)


# -- the tracking connection pair ---------------------------------------------


def new_connection(redis: Any, **overrides: Any) -> Any:
    """A connection of its own to the client's server (the master, through
    Sentinel), outside the pool, with ``overrides`` to its settings. It
    connects once per attempt (no redis-py retry with its backoff): the
    caller's loop decides when to try again."""
    pool = redis.connection_pool
    kwargs = {**pool.connection_kwargs, "retry": Retry(NoBackoff(), 0), **overrides}
    return pool.connection_class(**kwargs)


async def close(conn: Any) -> None:
    with contextlib.suppress(Exception):
        await conn.disconnect()


async def message(conn: Any, within: float) -> Any:
    """The next message on a subscribed connection, or None after
    ``within`` s without one."""
    return await conn.read_response(timeout=within)


async def try_hold(lock: asyncio.Lock) -> bool:
    """Takes ``lock`` if it is free (no task can come between the look and
    the take: a free lock is taken without suspending)."""
    if lock.locked():
        return False
    await lock.acquire()
    return True


async def at_once(calls: Sequence[Callable[[], Awaitable[Any]]], within: float) -> list[Any]:
    """Runs every call at once, each for ``within`` s at most: their
    results, None for one that failed or was too slow."""

    async def one(call: Callable[[], Awaitable[Any]]) -> Any:
        try:
            return await asyncio.wait_for(call(), within)
        except Exception:
            return None

    return list(await asyncio.gather(*(one(c) for c in calls)))


T = TypeVar("T")
# What a call of the shared API (``_api.py``) returns here: an awaitable.
Later = Coroutine[Any, Any, T]
