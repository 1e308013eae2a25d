-- Shared by the benchmark scripts: a per-thread id, and a summary line as JSON.
local threads = {}
local counter = 0

function setup(thread)
  counter = counter + 1
  thread:set("tid", counter)
  table.insert(threads, thread)
end

function uuid4()
  local t = {}
  for i = 1, 32 do t[i] = string.format("%x", math.random(0, 15)) end
  t[13] = "4"
  t[17] = string.format("%x", 8 + math.random(0, 3))
  local s = table.concat(t)
  return s:sub(1, 8) .. "-" .. s:sub(9, 12) .. "-" .. s:sub(13, 16) .. "-" .. s:sub(17, 20) .. "-" .. s:sub(21, 32)
end

-- The next seeded item for this thread: threads take every BENCH_THREADS-th index from
-- BENCH_OFFSET on, so no item (a transfer, a refresh token) is used twice in a run.
local stride = tonumber(os.getenv("BENCH_THREADS") or "2")
local first = tonumber(os.getenv("BENCH_OFFSET") or "0")
local taken = 0
function next_index()
  local i = first + (tid - 1) + taken * stride
  taken = taken + 1
  return i
end

function seeded(i)
  return string.format("00000000-0000-4000-8000-%012d", i)
end

-- Answers other than 200 and 201: wrk counts only statuses from 400 up as errors. A script
-- that must see nothing else sets `response = expect_success`; done() then counts the
-- thread's `unexpected` answers instead of wrk's status errors (they include those).
unexpected = 0
function expect_success(status, headers, body)
  if status ~= 200 and status ~= 201 then unexpected = unexpected + 1 end
end

-- Per-thread counters that done() sums over the threads and adds to the summary line: a
-- script appends the names of its own globals (each a number in every thread).
counters = {"unexpected"}

function done(summary, latency, requests)
  local sums, fields = {}, ""
  for _, name in ipairs(counters) do
    sums[name] = 0
    for _, thread in ipairs(threads) do sums[name] = sums[name] + (thread:get(name) or 0) end
    fields = fields .. string.format(',"%s":%d', name, sums[name])
  end
  local e = summary.errors
  local bad = math.max(e.status, sums.unexpected) + e.connect + e.read + e.write + e.timeout
  io.write(string.format(
    'RESULT {"requests":%d,"seconds":%.3f,"rps":%.1f,"p50_ms":%.3f,"p99_ms":%.3f,"p999_ms":%.3f,"errors":%d%s}\n',
    summary.requests, summary.duration / 1e6, summary.requests / (summary.duration / 1e6),
    latency:percentile(50) / 1000, latency:percentile(99) / 1000, latency:percentile(99.9) / 1000, bad, fields))
end
