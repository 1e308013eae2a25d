-- Auto-login of devices that already have an account (the seeded ones).
-- BENCH_DELAY_MS paces each connection: it waits that long after each answer before
-- sending the next request (for a latency reading at a set rate instead of at saturation).
dofile(os.getenv("BENCH_LUA") .. "/common.lua")
local n = tonumber(os.getenv("BENCH_ACCOUNTS") or "1000")
local secret = os.getenv("BENCH_SECRET")
local pause = tonumber(os.getenv("BENCH_DELAY_MS") or "0")
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
function init() math.randomseed(os.time() * 1000 + tid) end
function request()
  return wrk.format(nil, "/v1/devices/login", nil,
    '{"deviceId":"' .. seeded(math.random(0, n - 1)) .. '","deviceSecret":"' .. secret .. '"}')
end
if pause > 0 then
  function delay() return pause end
end
