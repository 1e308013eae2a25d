-- Refresh: each request rotates a different seeded refresh token exactly once.
dofile(os.getenv("BENCH_LUA") .. "/common.lua")
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
function request()
  return wrk.format(nil, "/v1/tokens/refresh", nil, '{"refreshToken":"bench-refresh-' .. next_index() .. '"}')
end
