-- RedissonPermitExpirableSemaphore.availablePermitsAsync(), Redisson master 66863978 (4.7.1-SNAPSHOT, 2026-08-21).
-- KEYS[1] the value <name>; KEYS[2] the leases {<name>}:timeout; KEYS[3] the
-- channel redisson_sc:{<name>}.
-- ARGV[1] now, unix ms, client clock; ARGV[2] the publish command "PUBLISH".
-- Reclaims every expired permit (publishing the count). Reply: the available
-- count (an integer after a reclaim, else GET's string; 0 when missing).
local expiredIds = redis.call('zrangebyscore', KEYS[2], 0, ARGV[1], 'limit', 0, -1);
if #expiredIds > 0 then
redis.call('zrem', KEYS[2], unpack(expiredIds));
local value = redis.call('incrby', KEYS[1], #expiredIds);
if tonumber(value) > 0 then
redis.call(ARGV[2], KEYS[3], value);
end;
return value;
end;
local ret = redis.call('get', KEYS[1]);
return ret == false and 0 or ret;
