-- soak.lua — distinct buyers for bench/soak: thread i of n (args[2], wrk's
-- -t) sends the ids i, i+n, i+2n, … up to the pool size (args[1], default
-- 10,000,000), then starts over (repeats then answer 409 DUPLICATE or 410
-- SOLD_OUT), buying one unit of SKU 1001. Prints the answers by status code
-- and the requests built (sent) on a "codes" line (benchkit.ParseWrk reads
-- it; sent minus the answers is what wrk never counted, each of which the
-- server may have served).
--
--   wrk -t2 -c256 -d60s -s bench/soak.lua http://127.0.0.1:8080/api/v1/flash-sale/order -- 10000000 2

local body = '{"skuId":1001,"quantity":1}'
local headers = { ["Content-Type"] = "application/json" }
local threads = {}
local count = 0

function setup(thread)
  count = count + 1
  thread:set("first", count)
  table.insert(threads, thread)
end

function init(args)
  pool = tonumber(args[1] or "10000000")
  step = tonumber(args[2] or "1")
  nextid = first
  c200, c409, c410, c429, c503, other, sent = 0, 0, 0, 0, 0, 0, 0
end

function request()
  headers["X-User-Id"] = tostring(nextid)
  sent = sent + 1
  nextid = nextid + step
  if nextid > pool then nextid = first end
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
  local t = { ["200"] = 0, ["409"] = 0, ["410"] = 0, ["429"] = 0, ["503"] = 0, other = 0, sent = 0 }
  for _, th in ipairs(threads) do
    t["200"] = t["200"] + th:get("c200")
    t["409"] = t["409"] + th:get("c409")
    t["410"] = t["410"] + th:get("c410")
    t["429"] = t["429"] + th:get("c429")
    t["503"] = t["503"] + th:get("c503")
    t.other = t.other + th:get("other")
    t.sent = t.sent + th:get("sent")
  end
  io.write(string.format("codes 200=%d 409=%d 410=%d 429=%d 503=%d other=%d sent=%d\n",
    t["200"], t["409"], t["410"], t["429"], t["503"], t.other, t.sent))
end
