package stock

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"strconv"

	"github.com/redis/rueidis"

	"seckill/sale"
)

// pipelined is a Lua script whose calls for many SKUs go out together: one
// DoMulti per shard, so a batch that spans several SKUs of one shard costs
// that shard one round trip, not one per SKU. (rueidis.Lua.ExecMulti would
// send SCRIPT LOAD to every node before each batch; this sends EVALSHA and
// falls back to EVAL only for the calls the server answers NOSCRIPT.)
type pipelined struct {
	src, sha string
}

func newPipelined(src string) *pipelined {
	sum := sha1.Sum([]byte(src))
	return &pipelined{src: src, sha: hex.EncodeToString(sum[:])}
}

// exec runs calls on c in one pipeline (on a Redis Cluster rueidis sends
// each node its part, in parallel); res[i] answers calls[i]. Calls the
// server does not know the script for (it restarted or flushed its
// scripts) go again with EVAL, in a second pipeline.
func (p *pipelined) exec(ctx context.Context, c rueidis.Client, calls []rueidis.LuaExec) []rueidis.RedisResult {
	cmds := make(rueidis.Commands, len(calls))
	for i, x := range calls {
		cmds[i] = c.B().Evalsha().Sha1(p.sha).Numkeys(int64(len(x.Keys))).Key(x.Keys...).Arg(x.Args...).Build()
	}
	res := c.DoMulti(ctx, cmds...)
	var again []int
	for i, r := range res {
		if e, ok := rueidis.IsRedisErr(r.Error()); ok && e.IsNoScript() {
			again = append(again, i)
		}
	}
	if len(again) == 0 {
		return res
	}
	cmds = cmds[:0]
	for _, i := range again {
		x := calls[i]
		cmds = append(cmds, c.B().Eval().Script(p.src).Numkeys(int64(len(x.Keys))).Key(x.Keys...).Arg(x.Args...).Build())
	}
	for j, r := range c.DoMulti(ctx, cmds...) {
		res[again[j]] = r
	}
	return res
}

// skuCall is one script call for tickets of one SKU: idx are the positions
// of its tickets in the caller's slice, in ARGV order.
type skuCall struct {
	sku bucketKey
	idx []int
}

// shardCalls are the calls that go to one shard in one pipeline.
type shardCalls struct {
	shard int // as Stock.place answers it
	c     rueidis.Client
	calls []skuCall
	execs []rueidis.LuaExec
}

// ticketCalls groups msgs into script calls of at most maxBatch tickets of
// one SKU's bucket (the one each ticket number names), and the calls by
// the shard that owns that bucket, in first-seen
// order. head is each call's leading ARGV; per appends a ticket's ARGV.
func (s *Stock) ticketCalls(msgs []*sale.Message, keys func(sale.SKUKeys) []string, head []string,
	per func(args []string, m *sale.Message) []string) []*shardCalls {
	type group struct {
		shard int // as Stock.place answers it
		idx   []int
	}
	groups := map[bucketKey]*group{}
	var order []bucketKey
	for i, m := range msgs {
		// The ticket number names the bucket that holds the ticket.
		k := bucketKey{m.ActivityID, m.SKUID, sale.TicketBucket(m.RequestNo)}
		g := groups[k]
		if g == nil {
			g = &group{shard: s.shardIn(k.activity, k.sku, k.bucket)}
			groups[k] = g
			order = append(order, k)
		}
		g.idx = append(g.idx, i)
	}
	var out []*shardCalls
	for _, k := range order {
		g := groups[k]
		var sc *shardCalls
		for _, o := range out {
			if o.shard == g.shard {
				sc = o
			}
		}
		if sc == nil {
			sc = &shardCalls{shard: g.shard, c: s.shards.Client(g.shard)}
			out = append(out, sc)
		}
		ks := keys(sale.KeysIn(k.activity, k.sku, k.bucket))
		for lo := 0; lo < len(g.idx); lo += maxBatch {
			idx := g.idx[lo:min(lo+maxBatch, len(g.idx))]
			args := append(make([]string, 0, len(head)+3*len(idx)), head...)
			for _, i := range idx {
				args = per(args, msgs[i])
			}
			sc.calls = append(sc.calls, skuCall{sku: k, idx: idx})
			sc.execs = append(sc.execs, rueidis.LuaExec{Keys: ks, Args: args})
		}
	}
	return out
}

// appendTicket appends a ticket's userId and requestNo.
func appendTicket(args []string, m *sale.Message) []string {
	return append(args, strconv.FormatInt(m.UserID, 10), m.RequestNo)
}
