"""Run by test_exit.py in a subprocess: holds a lock, a read lock, a permit
and a ``ModuleLock(timeout=None)``, prints ``held``, then ends normally or
by an uncaught exception, without releasing anything.

    python exit_holder.py PORT sync|async normal|raise PREFIX
"""

from __future__ import annotations

import asyncio
import sys

import redis
import redis.asyncio as aredis

from redis_lock_client import AsyncLockClient, AsyncModuleLock, LockClient, ModuleLock

port, flavour, ending, prefix = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
kept: list[object] = []  # module globals: collected at interpreter shutdown


def end() -> None:
    print("held", flush=True)
    if ending == "raise":
        raise RuntimeError("an uncaught exception while holding everything")


if flavour == "sync":
    r = redis.Redis(port=port)
    locks = LockClient(r, watchdog_lease=1.0)
    kept.append(locks.lock(f"{prefix}:lock"))
    kept.append(locks.read_lock(f"{prefix}:rw"))
    sem = locks.permit_semaphore(f"{prefix}:sem")
    sem.try_set_permits(1)
    kept.append(sem.acquire())
    dropin = r.lock(f"{prefix}:dropin", timeout=None, lock_class=ModuleLock)
    assert dropin.acquire()
    kept.append(dropin)
    end()
else:

    async def main() -> None:
        r = aredis.Redis(port=port)
        locks = AsyncLockClient(r, watchdog_lease=1.0)
        kept.append(await locks.lock(f"{prefix}:lock"))
        kept.append(await locks.read_lock(f"{prefix}:rw"))
        sem = locks.permit_semaphore(f"{prefix}:sem")
        await sem.try_set_permits(1)
        kept.append(await sem.acquire())
        dropin = r.lock(f"{prefix}:dropin", timeout=None, lock_class=AsyncModuleLock)
        assert await dropin.acquire()
        kept.append(dropin)
        end()

    asyncio.run(main())
