"""ModuleLock: redis-py's Lock interface on the module, by one argument."""

from __future__ import annotations

import threading
import time

import pytest
import redis
from redis.exceptions import LockError, LockNotOwnedError

from redis_lock_client import ModuleLock


def test_one_argument_moves_redis_py_code_over(r: redis.Redis) -> None:
    lock = r.lock("d:basic", timeout=10, lock_class=ModuleLock)
    assert isinstance(lock, ModuleLock)
    assert lock.acquire(blocking=False)
    assert lock.locked() and lock.owned()
    token = lock.local.token
    assert r.hget("d:basic", token) == b"1"  # the module's hash, token as owner
    assert 9000 < r.pttl("d:basic") <= 10000
    assert not r.lock("d:basic", lock_class=ModuleLock).acquire(blocking=False)
    lock.release()
    assert not lock.locked() and not lock.owned()
    with pytest.raises(LockError):
        lock.release()


def test_context_manager_and_blocking_timeout(r: redis.Redis) -> None:
    with r.lock("d:cm", timeout=5, lock_class=ModuleLock):
        other = r.lock("d:cm", lock_class=ModuleLock, blocking_timeout=0.2)
        started = time.monotonic()
        assert not other.acquire()
        assert 0.19 <= time.monotonic() - started < 2
        with pytest.raises(LockError):
            with other:
                pass
    assert not r.exists("d:cm")


def test_timeout_none_is_kept_by_the_watchdog_not_forever(r: redis.Redis) -> None:
    lock = r.lock("d:dog", lock_class=ModuleLock)
    assert lock.acquire()
    assert 0 < r.pttl("d:dog") <= 30000  # it expires if its holder dies
    with pytest.raises(LockError):
        lock.extend(1)
    lock.release()


def test_extend_reacquire_and_lost_ownership(r: redis.Redis) -> None:
    lock = r.lock("d:ext", timeout=1, lock_class=ModuleLock)
    assert lock.acquire()
    assert lock.extend(2)
    assert 2500 < r.pttl("d:ext") <= 3000
    assert lock.extend(5, replace_ttl=True)
    assert 4500 < r.pttl("d:ext") <= 5000
    assert lock.reacquire()
    assert 900 < r.pttl("d:ext") <= 1000
    r.execute_command("LOCK.FORCE", "d:ext")
    assert not lock.owned()
    with pytest.raises(LockNotOwnedError):
        lock.reacquire()
    with pytest.raises(LockNotOwnedError):
        lock.release()


def test_waiters_are_woken_by_the_server_not_by_polling(r: redis.Redis) -> None:
    first = r.lock("d:wait", timeout=10, lock_class=ModuleLock, sleep=5.0)
    assert first.acquire()
    got: list[float] = []

    def waiter() -> None:
        lock = r.lock("d:wait", timeout=10, lock_class=ModuleLock, sleep=5.0)
        assert lock.acquire(blocking_timeout=5)
        got.append(time.monotonic())
        lock.release()

    t = threading.Thread(target=waiter)
    t.start()
    time.sleep(0.2)
    released = time.monotonic()
    first.release()
    t.join()
    assert got and got[0] - released < 1.0  # not after a 5 s sleep


def test_thread_local_tokens(r: redis.Redis) -> None:
    lock = r.lock("d:tl", timeout=5, lock_class=ModuleLock)
    assert lock.acquire()
    seen: list[object] = []
    t = threading.Thread(target=lambda: seen.append(getattr(lock.local, "token", None)))
    t.start()
    t.join()
    assert seen == [None]
    lock.release()


async def test_asyncio_drop_in(server: object, r: redis.Redis) -> None:
    import redis.asyncio as aredis

    from redis_lock_client import AsyncModuleLock

    ar = aredis.Redis(port=r.connection_pool.connection_kwargs["port"])
    lock = ar.lock("d:async", timeout=5, lock_class=AsyncModuleLock)
    async with lock:
        assert await lock.owned() and await lock.locked()
        assert 4000 < r.pttl("d:async") <= 5000
        other = ar.lock("d:async", lock_class=AsyncModuleLock, blocking_timeout=0.1)
        assert not await other.acquire()
        assert await lock.extend(5, replace_ttl=True)
    assert not r.exists("d:async")
    with pytest.raises(LockError):
        await lock.release()
    await ar.aclose()


def test_a_dropped_lock_object_stays_held_until_its_timeout_as_in_redis_py(
    r: redis.Redis,
) -> None:
    import gc

    assert r.lock("d:dropped", timeout=5, lock_class=ModuleLock).acquire()
    gc.collect()
    time.sleep(0.1)
    assert r.exists("d:dropped")  # redis-py's behaviour: held until the timeout
    assert 4000 < r.pttl("d:dropped") <= 5000
    r.execute_command("LOCK.FORCE", "d:dropped")
