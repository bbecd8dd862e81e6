package edge

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"seckill/sale"
)

// Phases of an activity as the public view shows them.
const (
	phaseUpcoming = "UPCOMING"
	phaseOpen     = "OPEN"
	phaseEnded    = "ENDED"
	phaseOffline  = "OFFLINE"
)

type activityJSON struct {
	ID           int64  `json:"id"`
	ServerTime   string `json:"serverTime"`
	ServerTimeMs int64  `json:"serverTimeMs"`
	Start        string `json:"start"`
	End          string `json:"end"`
	State        string `json:"state"` // ONLINE or OFFLINE, as set by on-call
	Phase        string `json:"phase"` // UPCOMING, OPEN, ENDED or OFFLINE at serverTime
	RequireToken bool   `json:"requireToken"`
	// LineOpens is when the queue-mode SKUs take attempts into their
	// pre-queue (start less the activity's prequeue); absent without one.
	LineOpens string `json:"lineOpens,omitempty"`
	// Paused: on-call paused the intake (purchases answered 503 PAUSED).
	Paused bool      `json:"paused,omitempty"`
	SKUs   []skuJSON `json:"skus"`
}

type skuJSON struct {
	ID    int64      `json:"id"`
	Title string     `json:"title,omitempty"`
	Price sale.Cents `json:"price"`
	// OriginalPrice is the price before the sale; absent when none.
	OriginalPrice sale.Cents `json:"originalPrice,omitempty"`
	LimitPerUser  int64      `json:"limitPerUser"`
	SoldOut       bool       `json:"soldOut"`
	// Queued: the SKU is in queue mode (its purchases are answered 202
	// WAITING, and taken from lineOpens on).
	Queued bool `json:"queued,omitempty"`
}

const timeLayout = "2006-01-02T15:04:05.000Z07:00"

// activity serves GET /api/v1/flash-sale/activities/{id}: the public view
// of one activity. It is the same for every buyer (no user data), so it is
// marked cacheable by a CDN for one second: the countdown page that every
// buyer refreshes before the start collapses into one origin request per
// second per CDN node, while serverTime and soldOut are at most a second
// stale (clients add the Age header to serverTime). Longer would let a
// cached "not sold out" or "upcoming" outlive the fact by too much.
func (s *Server) activity(ctx *fasthttp.RequestCtx) {
	ctx.Response.Header.Set("Cache-Control", "public, max-age=1")
	id, ok := ctx.UserValue("id").(string)
	var a *sale.Activity
	if ok {
		n, err := strconv.ParseInt(id, 10, 64)
		if err == nil && n > 0 {
			a, ok = s.views.cat.Activity(n)
		} else {
			ok = false
		}
	}
	if !ok {
		s.out.write(ctx, ansNotFound)
		return
	}
	now := s.clock.now()
	out := activityJSON{
		ID:           a.ID,
		ServerTime:   time.Unix(0, now).UTC().Format(timeLayout),
		ServerTimeMs: now / int64(time.Millisecond),
		Start:        a.Start.UTC().Format(timeLayout),
		End:          a.End.UTC().Format(timeLayout),
		State:        a.State,
		RequireToken: a.RequireToken,
		Paused:       a.Paused,
		SKUs:         make([]skuJSON, len(a.SKUs)),
	}
	if a.Prequeue > 0 {
		out.LineOpens = a.LineOpens().UTC().Format(timeLayout)
	}
	if out.State == "" {
		out.State = sale.StateOnline
	}
	switch {
	case a.State == sale.StateOffline:
		out.Phase = phaseOffline
	case now < a.Start.UnixNano():
		out.Phase = phaseUpcoming
	case now >= a.End.UnixNano():
		out.Phase = phaseEnded
	default:
		out.Phase = phaseOpen
	}
	for i, k := range a.SKUs {
		out.SKUs[i] = skuJSON{ID: k.ID, Title: k.Title, Price: k.Price, OriginalPrice: k.OriginalPrice,
			LimitPerUser: k.LimitPerUser, SoldOut: s.flags.soldOut(k.ID, a.ID), Queued: k.Queued()}
	}
	b, err := json.Marshal(out)
	if err != nil { // cannot happen: plain fields
		s.out.write(ctx, ansInternal)
		return
	}
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetContentTypeBytes(contentTypeJSON)
	ctx.SetBody(b)
}
