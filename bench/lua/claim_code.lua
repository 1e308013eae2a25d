-- Claims by transfer code: each request claims a different seeded code transfer (BENCH_CODES=1
-- seeding: code i is i in 16 decimal digits) onto a new device. No argon2: a lookup by hash.
dofile(os.getenv("BENCH_LUA") .. "/common.lua")
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
function init() math.randomseed(os.time() * 1000 + tid * 104729) end
function request()
  local i = next_index()
  return wrk.format(nil, "/v1/transfers/claim", nil,
    '{"transferCode":"' .. string.format("%016d", i) .. '","deviceId":"' .. uuid4() ..
    '","deviceSecret":"benchNewDeviceSecretBenchNewDevice01"}')
end
