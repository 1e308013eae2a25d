-- GET /v1/me with valid access tokens: each request takes the next of the tokens in the file
-- BENCH_TOKENS (one a line, from logins made right before the run), round robin per thread.
dofile(os.getenv("BENCH_LUA") .. "/common.lua")
local tokens = {}
for line in io.lines(os.getenv("BENCH_TOKENS")) do tokens[#tokens + 1] = line end
local i = 0
function init() i = tid * 7919 end
function request()
  i = i + 1
  return wrk.format("GET", "/v1/me", {["Authorization"] = "Bearer " .. tokens[i % #tokens + 1]}, nil)
end
response = expect_success
