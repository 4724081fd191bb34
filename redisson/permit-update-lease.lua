-- RedissonPermitExpirableSemaphore.updateLeaseTimeAsync(String permitId, long
-- leaseTime, TimeUnit unit), Redisson master 66863978 (4.7.1-SNAPSHOT, 2026-08-21).
-- KEYS[1] the value <name>; KEYS[2] the leases {<name>}:timeout; KEYS[3] the
-- channel redisson_sc:{<name>}.
-- ARGV[1] the id, 16 raw bytes; ARGV[2] the new deadline, unix ms, client clock
-- (now + lease; 922337203685477 for leaseTime -1); ARGV[3] now, unix ms, client
-- clock; ARGV[4] the publish command "PUBLISH".
-- Reclaims every expired permit first (publishing the count). Reply: 1 the
-- deadline is set, 0 the id is not (or no longer) in the leases.
local expiredIds = redis.call('zrangebyscore', KEYS[2], 0, ARGV[3], 'limit', 0, -1);
if #expiredIds > 0 then
redis.call('zrem', KEYS[2], unpack(expiredIds));
local value = redis.call('incrby', KEYS[1], #expiredIds);
if tonumber(value) > 0 then
redis.call(ARGV[4], KEYS[3], value);
end;
end;
local value = redis.call('zscore', KEYS[2], ARGV[1]);
if (value ~= false) then
redis.call('zadd', KEYS[2], ARGV[2], ARGV[1]);
return 1;
end;
return 0;
