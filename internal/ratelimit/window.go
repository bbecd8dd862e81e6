package ratelimit

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"
)

// windowScript counts one attempt in a fixed window.
// KEYS[1] the counter of (user, sku)
// ARGV[1] the limit, ARGV[2] the window in milliseconds
// Returns {allowed (1/0), milliseconds until the window resets}.
const windowScript = `
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
local ttl = redis.call('PTTL', KEYS[1])
if ttl < 0 then redis.call('PEXPIRE', KEYS[1], ARGV[2]); ttl = tonumber(ARGV[2]) end
if n > tonumber(ARGV[1]) then return {0, ttl} end
return {1, ttl}`

// Window limits attempts per user × SKU across all edges: at most Limit per
// Period, counted in Redis with one script call. Safe for concurrent use.
type Window struct {
	rdb    rueidis.Client
	limit  string
	period string
	script *rueidis.Lua
	on     bool
}

// NewWindow returns a window limiter; limit <= 0 disables it.
func NewWindow(rdb rueidis.Client, limit int, period time.Duration) *Window {
	return &Window{rdb: rdb, limit: strconv.Itoa(limit), period: strconv.FormatInt(period.Milliseconds(), 10),
		script: rueidis.NewLuaScript(windowScript), on: limit > 0 && period > 0}
}

// Allow counts one attempt of user on (activity, sku). A Redis error is
// returned (the edge fails closed: busy).
func (w *Window) Allow(ctx context.Context, activity, sku, user int64) (bool, time.Duration, error) {
	if w == nil || !w.on {
		return true, 0, nil
	}
	key := "sk:rl:{a" + strconv.FormatInt(activity, 10) + ":s" + strconv.FormatInt(sku, 10) + "}:" + strconv.FormatInt(user, 10)
	v, err := w.script.Exec(ctx, w.rdb, []string{key}, []string{w.limit, w.period}).AsIntSlice()
	if err != nil || len(v) != 2 {
		return false, 0, fmt.Errorf("rate window: %v", err)
	}
	return v[0] == 1, time.Duration(v[1]) * time.Millisecond, nil
}
