-- accept.lua — distinct buyers, one unit each, on one SKU; the bench
-- harness's load for the accept path (a SKU with stock), the reject path
-- (a sold-out SKU) and the reference servers, all on the same route.
--
--   wrk -t2 -c256 -d10s --latency -s bench/accept.lua \
--       http://127.0.0.1:8080/api/v1/flash-sale/order -- SKU BASE
--
-- SKU defaults to 1001. Buyer ids are BASE + thread * 1e8 + n (n counts the
-- thread's requests), so no two requests of a run — nor of runs with BASEs
-- 1e10 apart — share a buyer: every 409 is a real defect, not a birthday
-- collision. setup() hands each thread its number (wrk starts each thread's
-- Lua state alike). done() prints one line the harness parses:
--   codes 200=N 409=N 410=N 429=N 503=N other=N sent=N
-- sent counts requests built; wrk drops the answers of those still in flight
-- when the run ends, so sent minus the answers counted is what the server
-- may have served unseen (an order may exist for them).

local threads = {}
local nthreads = 0

function setup(thread)
  nthreads = nthreads + 1
  thread:set("id", nthreads)
  table.insert(threads, thread)
end

function init(args)
  local sku = args[1] or "1001"
  base = tonumber(args[2] or "0")
  body = '{"skuId":' .. sku .. ',"quantity":1}'
  headers = { ["Content-Type"] = "application/json" }
  n = 0
  c200, c409, c410, c429, c503, other = 0, 0, 0, 0, 0, 0
end

function request()
  n = n + 1
  headers["X-User-Id"] = string.format("%d", base + id * 100000000 + n)
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

function done(summary, latency, requests)
  local t = { c200 = 0, c409 = 0, c410 = 0, c429 = 0, c503 = 0, other = 0, n = 0 }
  for _, thread in ipairs(threads) do
    for k in pairs(t) do
      t[k] = t[k] + (thread:get(k) or 0)
    end
  end
  io.write(string.format("codes 200=%d 409=%d 410=%d 429=%d 503=%d other=%d sent=%d\n",
    t.c200, t.c409, t.c410, t.c429, t.c503, t.other, t.n))
end
