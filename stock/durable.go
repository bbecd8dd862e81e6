package stock

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/redis/rueidis"

	"seckill/lua"
	"seckill/sale"
)

// Durable occupy (redis.wait_replicas): WAIT after the occupy script, on
// the connection that ran it. Redis answers WAIT for the writes of the
// connection that sends it, so the two must share one. rueidis
// auto-pipelines Do and DoMulti over a few shared connections, but a
// DoMulti that holds a blocking command (WAIT is one) goes whole to one
// connection of its blocking pool (mux.DoMulti → blockingMulti: one wire,
// the commands pipelined in order); a Redis Cluster client sends it to the
// node of the script's slot first (WAIT has no key). The cost: each batch
// holds a pooled connection for its round trip and the wait instead of
// sharing one with the other batches, and the script goes by EVALSHA
// (EVAL once when the server lacks it) without LuaScript's own fallback.

var occupyBatchSHA = func() string { h := sha1.Sum([]byte(lua.OccupyBatch)); return hex.EncodeToString(h[:]) }()

// occupyExec runs the occupy script on c. With wait_replicas set it sends
// WAIT after it on the same connection and returns how many replicas
// acknowledged (acked < 0: no WAIT was sent).
func (s *Stock) occupyExec(ctx context.Context, c rueidis.Client, keys, args []string) (vals []rueidis.RedisMessage, acked int64, err error) {
	w := s.shards.Wait()
	if w.Replicas <= 0 {
		vals, err = occupyBatchScript.Exec(ctx, c, keys, args).ToArray()
		return vals, -1, err
	}
	for _, byEval := range []bool{false, true} {
		script := c.B().Evalsha().Sha1(occupyBatchSHA).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build()
		if byEval {
			script = c.B().Eval().Script(lua.OccupyBatch).Numkeys(int64(len(keys))).Key(keys...).Arg(args...).Build()
		}
		rs := c.DoMulti(ctx, script, c.B().Wait().Numreplicas(int64(w.Replicas)).Timeout(w.Timeout.Milliseconds()).Build())
		vals, err = rs[0].ToArray()
		if err != nil && !byEval && noScript(err) {
			continue
		}
		if err != nil {
			return nil, 0, err
		}
		acked, err = rs[1].AsInt64()
		return vals, acked, err
	}
	panic("unreachable")
}

func noScript(err error) bool {
	re, ok := rueidis.IsRedisErr(err)
	return ok && strings.HasPrefix(re.Error(), "NOSCRIPT")
}

// giveBack releases the occupancies of the buyers a batch answered OK,
// when fewer replicas than wait_replicas acknowledged the batch: the
// buyers are answered busy, so nothing may stay held for them. A release
// that fails is left to the orphan sweeper, as after any failed step
// between occupy and the order message. count: the call had the user × SKU
// window on, so each given-back ticket's attempt is counted in it, as any
// release counts it; a call without (a drained attempt's, whose occupy
// counted nothing) releases uncounted.
func (s *Stock) giveBack(ctx context.Context, a *sale.Activity, sku *sale.SKU, buyers []Buyer, res []OccupyResult, count bool) error {
	var msgs []*sale.Message
	for i, r := range res {
		if r.Code == CodeOK {
			b := buyers[i]
			msgs = append(msgs, &sale.Message{RequestNo: b.RequestNo, ActivityID: a.ID, SKUID: sku.ID, UserID: b.UserID, Quantity: b.Quantity})
		}
	}
	if len(msgs) == 0 {
		return nil
	}
	if _, err := s.releaseBatch(ctx, msgs, false, false, count); err != nil {
		return fmt.Errorf("give back %d occupancies of sku %d: %w", len(msgs), sku.ID, err)
	}
	return nil
}
