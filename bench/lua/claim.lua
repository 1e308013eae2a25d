-- Claims: each request claims a different seeded transfer with the right password onto a new device.
dofile(os.getenv("BENCH_LUA") .. "/common.lua")
local threads_n = tonumber(os.getenv("BENCH_THREADS") or "2")
local offset = tonumber(os.getenv("BENCH_OFFSET") or "0")
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local k = 0
function init() math.randomseed(os.time() * 1000 + tid * 104729) end
function request()
  local i = offset + (tid - 1) + k * threads_n
  k = k + 1
  return wrk.format(nil, "/v1/transfers/claim", nil,
    '{"email":"bench' .. i .. '@example.com","temporaryPassword":"bench-password-1","deviceId":"' .. uuid4() ..
    '","deviceSecret":"benchNewDeviceSecretBenchNewDevice01"}')
end
