"""The README's three lines: a lock kept by the watchdog, released on exit.

python examples/quickstart.py redis://127.0.0.1:6379/
"""

import sys

import redis

from redis_lock_client import LockClient

url = sys.argv[1] if len(sys.argv) > 1 else "redis://127.0.0.1:6379/"

locks = LockClient(redis.Redis.from_url(url))
with locks.lock("order:42") as guard:  # waits in the server's queue; the watchdog keeps it
    print(f"locked {guard.name} as {guard.owner}")
print("released")
