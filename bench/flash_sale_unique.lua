-- flash_sale_unique.lua — a fresh random buyer (X-User-Id) on every request,
-- buying one unit of SKU 1001, and a count of the answers by status code.
--
--   wrk -t2 -c256 -d10s -s bench/flash_sale_unique.lua http://127.0.0.1:8080/api/v1/flash-sale/order
--
-- wrk runs one Lua state per thread and each starts from the same random
-- seed, so unseeded threads would send the same user ids and half the load
-- would turn into duplicates. setup() hands every thread its own id and
-- init() seeds the generator with it plus the clock. Ids are drawn from
-- 1..1e9, so a repeated buyer (a genuine 409) is rare.

local body = '{"skuId":1001,"quantity":1}'
local headers = { ["Content-Type"] = "application/json" }

local threads = {}
local next_id = 0

-- setup runs in the main Lua state, once per thread, before the run.
function setup(thread)
  next_id = next_id + 1
  thread:set("id", next_id)
  table.insert(threads, thread)
end

-- init runs in each thread's own state; `id` was set by setup.
function init(args)
  math.randomseed(id * 1000003 + os.time())
  math.random(); math.random(); math.random() -- discard the first draws
  c200, c409, c410, c429, c503, other = 0, 0, 0, 0, 0, 0
end

function request()
  headers["X-User-Id"] = tostring(math.random(1, 1000000000))
  return wrk.format("POST", nil, headers, body)
end

function response(status, hdrs, resp_body)
  if status == 200 then c200 = c200 + 1
  elseif status == 409 then c409 = c409 + 1
  elseif status == 410 then c410 = c410 + 1
  elseif status == 429 then c429 = c429 + 1
  elseif status == 503 then c503 = c503 + 1
  else other = other + 1 end
end

-- done runs in the main state after the run; it reads each thread's counts.
function done(summary, latency, requests)
  local t = { c200 = 0, c409 = 0, c410 = 0, c429 = 0, c503 = 0, other = 0 }
  for _, thread in ipairs(threads) do
    for k in pairs(t) do
      t[k] = t[k] + (thread:get(k) or 0)
    end
  end
  io.write("status codes:\n")
  for _, row in ipairs({ { "200 queued", t.c200 }, { "409 duplicate", t.c409 },
      { "410 sold out", t.c410 }, { "429 rate-limited", t.c429 },
      { "503 busy", t.c503 }, { "other", t.other } }) do
    io.write(string.format("  %-17s %d\n", row[1], row[2]))
  end
end
