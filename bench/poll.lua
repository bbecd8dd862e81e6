-- poll.lua — result polling: each request reads one ticket's result as its
-- owner, cycling through the tickets listed in FILE ("userId requestNo" per
-- line; the bench harness writes it after buying them).
--
--   wrk -t2 -c256 -d10s --latency -s bench/poll.lua http://127.0.0.1:8080 -- FILE
--
-- done() prints: codes 200=N 403=N 404=N other=N

local threads = {}
local nthreads = 0

function setup(thread)
  nthreads = nthreads + 1
  thread:set("id", nthreads)
  table.insert(threads, thread)
end

function init(args)
  tickets = {}
  for line in io.lines(args[1]) do
    local user, rn = line:match("^(%d+) (%S+)$")
    if user then
      table.insert(tickets, { user = user, path = "/api/v1/flash-sale/result/" .. rn })
    end
  end
  i = id -- threads start at different tickets
  headers = {}
  c200, c403, c404, other = 0, 0, 0, 0
end

function request()
  i = i % #tickets + 1
  local t = tickets[i]
  headers["X-User-Id"] = t.user
  return wrk.format("GET", t.path, headers, nil)
end

function response(status, hdrs, resp_body)
  if status == 200 then c200 = c200 + 1
  elseif status == 403 then c403 = c403 + 1
  elseif status == 404 then c404 = c404 + 1
  else other = other + 1 end
end

function done(summary, latency, requests)
  local t = { c200 = 0, c403 = 0, c404 = 0, other = 0 }
  for _, thread in ipairs(threads) do
    for k in pairs(t) do
      t[k] = t[k] + (thread:get(k) or 0)
    end
  end
  io.write(string.format("codes 200=%d 403=%d 404=%d other=%d\n", t.c200, t.c403, t.c404, t.other))
end
