"""The watchdog at work, and the lost-lock signal (asyncio).

Takes a lock with a 1 s watchdog lease and works for 3.5 s (renewed every
333 ms, it never expires); then an operator forces it with LOCK.FORCE and
the holder is told within a third of the lease. Exits non-zero otherwise.

    python examples/watchdog.py redis://127.0.0.1:6379/
"""

import asyncio
import sys
import time

import redis.asyncio as aredis

from redis_lock_client import AsyncLockClient


async def main(url: str) -> int:
    locks = AsyncLockClient(aredis.Redis.from_url(url), watchdog_lease=1.0)
    guard = await locks.lock("example:py-watchdog")
    print(f"locked {guard.name} as {guard.owner}")
    started = time.monotonic()

    async def work() -> None:
        for second in range(1, 4):
            await asyncio.sleep(1)
            left = await locks.remaining_lease(guard.name)
            print(f"worked {second} s; lease left {left:.3f} s")
        await asyncio.sleep(0.5)

    worker = asyncio.create_task(work())
    lost = asyncio.create_task(guard.lost.wait())
    done, _ = await asyncio.wait({worker, lost}, return_when=asyncio.FIRST_COMPLETED)
    if lost in done:
        print(f"lost while working: {guard.lost_reason}")
        return 1
    lost.cancel()
    print(f"still held after {time.monotonic() - started:.1f} s, 3.5x its lease")

    forced = time.monotonic()
    await locks.force_unlock(guard.name)
    try:
        await asyncio.wait_for(guard.lost.wait(), 1.0)
    except asyncio.TimeoutError:
        print("the forced unlock was not signalled within the lease")
        return 1
    print(f"told after {(time.monotonic() - forced) * 1000:.0f} ms: {guard.lost_reason}")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "redis://127.0.0.1:6379/")))
