local counter = redis.call('hget', KEYS[1], ARGV[2]);
if (counter ~= false) then
redis.call('pexpire', KEYS[1], ARGV[1]);
if (redis.call('hlen', KEYS[1]) > 1) then
local keys = redis.call('hkeys', KEYS[1]);
for n, key in ipairs(keys) do
counter = tonumber(redis.call('hget', KEYS[1], key));
if type(counter) == 'number' then
for i=counter, 1, -1 do
redis.call('pexpire', KEYS[2] .. ':' .. key .. ':rwlock_timeout:' .. i, ARGV[1]);
end;
end;
end;
end;
return 1;
end;
return 0;
