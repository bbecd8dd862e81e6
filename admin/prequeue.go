package admin

import (
	"strconv"
	"strings"

	"github.com/valyala/fasthttp"

	"seckill/sale"
)

// PrequeueView answers GET /admin/v1/skus/{sku}/prequeue: the record of a
// SKU's pre-queue draw (sale.PrequeueKey), for an audit of its order.
// With the seed and the cutoff, sale.Draw.Permute of the SKU's pre-queued
// attempts' offsets below the cutoff on Partition gives Order again.
type PrequeueView struct {
	ActivityID int64 `json:"activityId"`
	SKUID      int64 `json:"skuId"`
	// Prequeue is the activity's pre-queue in minutes (0: none).
	Prequeue int64 `json:"prequeue"`
	// Drawn: a drainer recorded the draw; the fields below are set.
	Drawn     bool   `json:"drawn"`
	Seed      string `json:"seed,omitempty"` // 32 bytes, hex
	Partition int32  `json:"partition"`
	Cutoff    int64  `json:"cutoff"`
	// Served is how many pre-queued attempts the order holds.
	Served int `json:"served"`
	// Order is the attempts' offsets in the order served, with ?order=true.
	Order []int64 `json:"order,omitempty"`
	// Done: every attempt of the order was decided.
	Done bool `json:"done"`
}

// getPrequeue is GET /admin/v1/skus/{sku}/prequeue[?activityId=A][&order=true].
func (s *Server) getPrequeue(ctx *fasthttp.RequestCtx) {
	sku, ok := pathInt(ctx, "sku")
	if !ok {
		return
	}
	a, err := s.resolveSKU(sku, queryInt(ctx, "activityId"))
	if err != nil {
		s.fail(ctx, err)
		return
	}
	c, cancel := opCtx(ctx)
	defer cancel()
	rdb := s.d.Stock.Client(a.ID, sku)
	rec, err := rdb.Do(c, rdb.B().Hgetall().Key(sale.PrequeueKey(a.ID, sku)).Build()).AsStrMap()
	if err != nil {
		s.fail(ctx, err)
		return
	}
	v := PrequeueView{ActivityID: a.ID, SKUID: sku, Prequeue: a.Prequeue}
	if raw, ok := rec["draw"]; ok {
		d, err := sale.ParseDraw(raw)
		if err != nil {
			writeErr(ctx, fasthttp.StatusInternalServerError, "BAD_RECORD", err.Error())
			return
		}
		v.Drawn, v.Partition, v.Cutoff = true, d.Partition, d.Cutoff
		v.Seed = raw[:strings.IndexByte(raw, '|')]
	}
	if order := rec["order"]; order != "" {
		v.Served = strings.Count(order, ",") + 1
		if string(ctx.QueryArgs().Peek("order")) == "true" {
			v.Order = make([]int64, 0, v.Served)
			for f := range strings.SplitSeq(order, ",") {
				o, err := strconv.ParseInt(f, 10, 64)
				if err != nil {
					writeErr(ctx, fasthttp.StatusInternalServerError, "BAD_RECORD", "order: "+err.Error())
					return
				}
				v.Order = append(v.Order, o)
			}
		}
	}
	_, v.Done = rec["done"]
	writeJSON(ctx, fasthttp.StatusOK, v)
}
