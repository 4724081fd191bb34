-- RedissonPermitExpirableSemaphore.tryReleaseAsync(List<String> permitsIds)
-- (behind release(ids) / tryRelease(ids)), Redisson master 66863978 (4.7.1-SNAPSHOT, 2026-08-21).
-- KEYS[1] the value <name>; KEYS[2] the channel redisson_sc:{<name>}; KEYS[3]
-- the leases {<name>}:timeout.
-- ARGV[1] the number of ids; ARGV[2] now, unix ms, client clock; ARGV[3] the
-- publish command "PUBLISH"; ARGV[4..] the ids, 16 raw bytes each.
-- Reply: 0 (nothing done) if any id is unknown or expired; else reclaims every
-- expired permit (publishing the count), removes the ids and replies how many.
-- Note: its last publish sends the number released, not the new count.
for i = 4, #ARGV, 1 do
local expire = redis.call('zscore', KEYS[3], ARGV[i]);
if expire== false or tonumber(expire) <= tonumber(ARGV[2]) then
return 0;
end;
end;
local expiredIds = redis.call('zrangebyscore', KEYS[3], 0, ARGV[2], 'limit', 0, -1);
if #expiredIds > 0 then
redis.call('zrem', KEYS[3], unpack(expiredIds));
local value = redis.call('incrby', KEYS[1], #expiredIds);
if tonumber(value) > 0 then
redis.call(ARGV[3], KEYS[2], value);
end;
end;
local keys = {};
for i = 4, #ARGV, 1 do
table.insert(keys, ARGV[i]);
end;
local removed = redis.call('zrem', KEYS[3], unpack(keys));
redis.call('incrby', KEYS[1], removed);
redis.call(ARGV[3], KEYS[2], removed);
return removed;
