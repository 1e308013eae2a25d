-- Claims: each request claims a different seeded transfer with the right password onto a new device.
dofile(os.getenv("BENCH_LUA") .. "/common.lua")
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
function init() math.randomseed(os.time() * 1000 + tid * 104729) end
function request()
  local i = next_index()
  return wrk.format(nil, "/v1/transfers/claim", nil,
    '{"email":"bench' .. i .. '@example.com","temporaryPassword":"bench-password-1","deviceId":"' .. uuid4() ..
    '","deviceSecret":"benchNewDeviceSecretBenchNewDevice01"}')
end
