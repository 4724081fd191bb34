-- RedissonPermitExpirableSemaphore.tryReleaseAsync(String permitId) (behind
-- release(id) / tryRelease(id)), Redisson master 66863978 (4.7.1-SNAPSHOT, 2026-08-21).
-- KEYS[1] the value <name>; KEYS[2] the channel redisson_sc:{<name>}; KEYS[3]
-- the leases {<name>}:timeout. (Note the order: channel before leases.)
-- ARGV[1] the id, 16 raw bytes; ARGV[2] 1 (permits); ARGV[3] now, unix ms,
-- client clock; ARGV[4] the publish command "PUBLISH".
-- Reply: 1 released; 0 not held -- or held but expired: an expired permit is
-- still removed and returned to the value (and the count published), with 0.
local expire = redis.call('zscore', KEYS[3], ARGV[1]);
local removed = redis.call('zrem', KEYS[3], ARGV[1]);
if tonumber(removed) ~= 1 then
return 0;
end;
local value = redis.call('incrby', KEYS[1], ARGV[2]);
redis.call(ARGV[4], KEYS[2], value);
if tonumber(expire) <= tonumber(ARGV[3]) then
return 0;
end;
return 1;
