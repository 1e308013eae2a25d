-- Auto-login of devices that already have an account (the seeded ones).
dofile(os.getenv("BENCH_LUA") .. "/common.lua")
local n = tonumber(os.getenv("BENCH_ACCOUNTS") or "1000")
local secret = os.getenv("BENCH_SECRET")
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
function init() math.randomseed(os.time() * 1000 + tid) end
function request()
  return wrk.format(nil, "/v1/devices/login", nil,
    '{"deviceId":"' .. seeded(math.random(0, n - 1)) .. '","deviceSecret":"' .. secret .. '"}')
end
