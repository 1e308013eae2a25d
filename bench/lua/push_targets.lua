-- Push routing for an app backend: POST /v1/service/push-targets, each request asking for
-- BENCH_BATCH (default 1 000, the most the contract allows) distinct random seeded accounts
-- of BENCH_ACCOUNTS, with the service key BENCH_SERVICE_KEY.
-- A body is about 40 KB: building one per request in Lua would make wrk the bottleneck, so
-- each thread formats BENCH_BODIES (default 32) whole requests at init and cycles through them.
dofile(os.getenv("BENCH_LUA") .. "/common.lua")
local n = tonumber(os.getenv("BENCH_ACCOUNTS") or "1000")
local batch = math.min(tonumber(os.getenv("BENCH_BATCH") or "1000"), n)
local bodies = tonumber(os.getenv("BENCH_BODIES") or "32")
local key = os.getenv("BENCH_SERVICE_KEY")
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer " .. (key or "")

local requests = {}
local next_request = 0

local function account(i)
  return string.format("a0000000-0000-4000-8000-%012d", i)
end

function init()
  if not key then error("BENCH_SERVICE_KEY is not set") end
  math.randomseed(os.time() * 1000 + tid)
  for b = 1, bodies do
    local seen, ids = {}, {}
    while #ids < batch do
      local i = math.random(0, n - 1)
      if not seen[i] then
        seen[i] = true
        ids[#ids + 1] = '"' .. account(i) .. '"'
      end
    end
    requests[b] = wrk.format(nil, "/v1/service/push-targets", nil, '{"accountIds":[' .. table.concat(ids, ",") .. ']}')
  end
end

function request()
  next_request = next_request % #requests + 1
  return requests[next_request]
end
