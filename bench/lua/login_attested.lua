-- Auto-login of new devices with a Play Integrity attestation (row 3a): the login bodies
-- bench/attestation-tokens wrote to BENCH_BODIES (one a line, each with its own challenge),
-- sent in order, each once across all threads: thread t takes lines t, t + BENCH_THREADS, …
-- (as next_index() splits seeded items). A thread that runs out of bodies sends a request the
-- server answers 404 and counts it in `exhausted`: the run had too few bodies and is invalid
-- (its errors are not 0), never a run that silently reused or skipped challenges.
-- Every answer but 200/201 is an error (a refused attestation is a 401 or 403).
dofile(os.getenv("BENCH_LUA") .. "/common.lua")
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
response = expect_success
table.insert(counters, "bodies")
table.insert(counters, "sent")
table.insert(counters, "exhausted")
bodies, sent, exhausted = 0, 0, 0
local lines = {}

function init()
  local stride = tonumber(os.getenv("BENCH_THREADS") or "2")
  local n = 0
  for line in io.lines(os.getenv("BENCH_BODIES")) do
    if n % stride == tid - 1 then lines[#lines + 1] = line end
    n = n + 1
  end
  bodies = #lines
end

function request()
  if sent >= bodies then
    exhausted = exhausted + 1
    return wrk.format("GET", "/v1/bench/out-of-attested-bodies")
  end
  sent = sent + 1
  return wrk.format(nil, "/v1/devices/login", nil, lines[sent])
end
