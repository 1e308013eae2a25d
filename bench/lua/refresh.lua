-- Refresh: each request rotates a different seeded refresh token exactly once.
dofile(os.getenv("BENCH_LUA") .. "/common.lua")
local threads_n = tonumber(os.getenv("BENCH_THREADS") or "2")
local offset = tonumber(os.getenv("BENCH_OFFSET") or "0")
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local k = 0
function request()
  local i = offset + (tid - 1) + k * threads_n
  k = k + 1
  return wrk.format(nil, "/v1/tokens/refresh", nil, '{"refreshToken":"bench-refresh-' .. i .. '"}')
end
