-- RedissonSemaphore.drainPermitsAsync(), Redisson master 66863978 (4.7.1-SNAPSHOT, 2026-08-21).
-- KEYS[1] the semaphore <name>. No ARGV.
-- Reply: the permits taken (GET's string, or 0 when missing); sets the value to 0.
-- Publishes nothing.
local value = redis.call('get', KEYS[1]);
if (value == false) then
return 0;
end;
redis.call('set', KEYS[1], 0);
return value;
