-- RedissonPermitExpirableSemaphore.tryAcquireAsync(List<String> ids, long timeoutDate)
-- (behind tryAcquire / acquire with or without a lease), Redisson master 66863978 (4.7.1-SNAPSHOT, 2026-08-21).
-- KEYS[1] the value <name>; KEYS[2] the leases suffixName(<name>, "timeout") =
-- {<name>}:timeout (<name>:timeout when <name> has '{'); KEYS[3] the channel
-- redisson_sc:{<name>}.
-- ARGV[1] permits; ARGV[2] the lease deadline, unix ms by the CLIENT's clock
-- (System.currentTimeMillis() + lease), or 922337203685477 (nonExpirableTimeout)
-- without a lease; ARGV[3] now, unix ms, client clock; ARGV[4] 922337203685477;
-- ARGV[5] the publish command "PUBLISH"; ARGV[6..] the new permit ids, each
-- 16 raw bytes (ByteBufUtil.decodeHexDump of the 32-hex id).
-- First reclaims up to ARGV[1] expired permits (score <= now) into the value and
-- publishes the new count. Reply: status 'OK' taken (ids ZADDed with the
-- deadline; the value's PTTL copied to KEYS[2]); ':<score>' not taken, the
-- nearest lease deadline (the client waits until then at most); nil not taken,
-- no expiring lease.
local expiredIds = redis.call('zrangebyscore', KEYS[2], 0, ARGV[3], 'limit', 0, ARGV[1]);
if #expiredIds > 0 then
redis.call('zrem', KEYS[2], unpack(expiredIds));
local value = redis.call('incrby', KEYS[1], #expiredIds);
if tonumber(value) > 0 then
redis.call(ARGV[5], KEYS[3], value);
end;
end;
local value = redis.call('get', KEYS[1]);
if (value ~= false and tonumber(value) >= tonumber(ARGV[1])) then
redis.call('decrby', KEYS[1], ARGV[1]);
for i = 6, #ARGV, 1 do
redis.call('zadd', KEYS[2], ARGV[2], ARGV[i]);
end;
local ttl = redis.call('pttl', KEYS[1]);
if ttl > 0 then
redis.call('pexpire', KEYS[2], ttl);
end;
return 'OK';
end;
local v = redis.call('zrange', KEYS[2], 0, 0, 'WITHSCORES');
if v[1] ~= nil and v[2] ~= ARGV[4] then
return ':' .. tostring(v[2]);
end
return nil;
