-- RedissonSemaphore.trySetPermitsAsync(int permits, Duration timeToLive), Redisson master 66863978 (4.7.1-SNAPSHOT, 2026-08-21).
-- KEYS[1] the semaphore <name>; KEYS[2] its channel redisson_sc:{<name>}.
-- ARGV[1] permits; ARGV[2] the publish command "PUBLISH"; ARGV[3] time to live, ms.
-- Reply: 1 set (and the count published), 0 the key exists.
local value = redis.call('get', KEYS[1]);
if (value == false) then
redis.call('set', KEYS[1], ARGV[1], 'px', ARGV[3]);
redis.call(ARGV[2], KEYS[2], ARGV[1]);
return 1;
end;
return 0;
