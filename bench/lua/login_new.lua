-- Auto-login of new devices: every request creates an account. With BENCH_CLIENTS=N (and
-- the server's --trusted-proxy 127.0.0.1) each comes from one of N IPv4 clients, as X-Forwarded-For.
dofile(os.getenv("BENCH_LUA") .. "/common.lua")
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local clients = tonumber(os.getenv("BENCH_CLIENTS") or "0")
response = expect_success  -- a creation is a 201; anything else is an error
function init() math.randomseed(os.time() * 1000 + tid * 7919) end
function request()
  local headers = nil
  if clients > 0 then
    local c = math.random(0, clients - 1)
    headers = {["Content-Type"] = "application/json",
               ["X-Forwarded-For"] = string.format("10.%d.%d.%d", math.floor(c / 65536) % 256, math.floor(c / 256) % 256, c % 256)}
  end
  return wrk.format(nil, "/v1/devices/login", headers,
    '{"deviceId":"' .. uuid4() .. '","deviceSecret":"benchNewDeviceSecretBenchNewDevice01"}')
end
