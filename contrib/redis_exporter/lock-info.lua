-- INFO lock for redis_exporter: `redis_exporter --script lock-info.lua`
-- exports each numeric field of the module's INFO sections as
--   redis_script_values{filename="lock-info.lua",key="lock_acquired"} 42
-- (redis_exporter's --include-modules-metrics exports only the module
-- fields on its own list, none of this module's). Read-only: runs on
-- replicas too. The exporter's user needs +eval and +info.
local out = {}
for name, value in string.gmatch(redis.call('INFO', 'lock'), '([%w_]+):([^\r\n]*)') do
  if tonumber(value) then
    out[#out + 1] = name
    out[#out + 1] = value
  end
end
return out
