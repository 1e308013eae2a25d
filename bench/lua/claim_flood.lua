-- A claim flood spread over many clients: every request comes from another IPv6 /64 (as
-- X-Forwarded-For from wrk on 127.0.0.1, which the server's --trusted-proxy names), with a code
-- nobody issued (401). Each takes a slot of --claim-limit in the rate_slots table first, so the
-- table grows by one row a request.
dofile(os.getenv("BENCH_LUA") .. "/common.lua")
wrk.method = "POST"
function init() math.randomseed(os.time() * 1000 + tid * 104729) end
function request()
  local i = next_index()
  local address = string.format("2001:db8:%x:%x::1", math.floor(i / 65536), i % 65536)
  return wrk.format(nil, "/v1/transfers/claim", {["Content-Type"] = "application/json", ["X-Forwarded-For"] = address},
    '{"transferCode":"0000000000000000","deviceId":"' .. uuid4() .. '","deviceSecret":"benchNewDeviceSecretBenchNewDevice01"}')
end
