-- Auto-login of new devices: every request creates an account.
dofile(os.getenv("BENCH_LUA") .. "/common.lua")
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
function init() math.randomseed(os.time() * 1000 + tid * 7919) end
function request()
  return wrk.format(nil, "/v1/devices/login", nil,
    '{"deviceId":"' .. uuid4() .. '","deviceSecret":"benchNewDeviceSecretBenchNewDevice01"}')
end
