package edge

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"seckill/internal/sale"
)

// view is what the order path needs of the activity a SKU resolves to,
// precomputed from the catalog. Views of the SKU's current activity are
// cached per SKU in a ristretto cache; a cached view is used only while its
// generation matches the catalog's (bumped on every load and activity
// event) and server time is before until.
type view struct {
	gen          uint64
	until        int64 // server unix nanos: the next window boundary of any activity selling the SKU, or ViewTTL
	activity     int64
	start, end   int64 // server unix nanos
	offline      bool
	requireToken bool
	// act and sku are the catalog entries resolved (read only): what the
	// engine is handed, so that it does not resolve the SKU again.
	act *sale.Activity
	sku *sale.SKU
}

func makeView(a *sale.Activity, k *sale.SKU) view {
	return view{
		activity:     a.ID,
		start:        a.Start.UnixNano(),
		end:          a.End.UnixNano(),
		offline:      a.State == sale.StateOffline,
		requireToken: a.RequireToken,
		act:          a,
		sku:          k,
	}
}

// resolve finds the activity that sells sku: the one named, or the SKU's
// current one at server time now.
func (s *Server) resolve(activity, sku, now int64) (view, bool) {
	if activity != 0 {
		a, k, ok := s.cat.Lookup(activity, sku)
		if !ok {
			return view{}, false
		}
		return makeView(a, k), true
	}
	// Read the generation before the catalog: a load stores its snapshot
	// and then bumps the generation, so a view can never carry a newer
	// generation than the snapshot it was built from.
	gen := s.gen.Load()
	if v, ok := s.views.Get(sku); ok && v.gen == gen && now < v.until {
		return *v, true
	}
	a, k, ok := s.cat.Current(sku, time.Unix(0, now))
	if !ok {
		// Unknown SKUs are not cached: the catalog answers them from a map
		// miss, and caching them would let a scan of ids fill the cache.
		return view{}, false
	}
	v := makeView(a, k)
	v.gen = gen
	v.until = s.nextBoundary(sku, now)
	s.views.SetWithTTL(sku, &v, 1, s.cfg.ViewTTL)
	return v, true
}

// nextBoundary is the first start or end after now of any activity that
// sells sku (where catalog.Current may change its answer), capped at
// now+ViewTTL. Runs on a view miss only.
func (s *Server) nextBoundary(sku, now int64) int64 {
	until := now + int64(s.cfg.ViewTTL)
	for _, a := range s.cat.Activities() {
		if a.SKU(sku) == nil {
			continue
		}
		for _, t := range [2]int64{a.Start.UnixNano(), a.End.UnixNano()} {
			if t > now && t < until {
				until = t
			}
		}
	}
	return until
}

// Phases of an activity as the public view shows them.
const (
	phaseUpcoming = "UPCOMING"
	phaseOpen     = "OPEN"
	phaseEnded    = "ENDED"
	phaseOffline  = "OFFLINE"
)

type activityJSON struct {
	ID           int64     `json:"id"`
	ServerTime   string    `json:"serverTime"`
	ServerTimeMs int64     `json:"serverTimeMs"`
	Start        string    `json:"start"`
	End          string    `json:"end"`
	State        string    `json:"state"` // ONLINE or OFFLINE, as set by on-call
	Phase        string    `json:"phase"` // UPCOMING, OPEN, ENDED or OFFLINE at serverTime
	RequireToken bool      `json:"requireToken"`
	SKUs         []skuJSON `json:"skus"`
}

type skuJSON struct {
	ID           int64      `json:"id"`
	Price        sale.Cents `json:"price"`
	LimitPerUser int64      `json:"limitPerUser"`
	SoldOut      bool       `json:"soldOut"`
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
			a, ok = s.cat.Activity(n)
		} else {
			ok = false
		}
	}
	if !ok {
		s.write(ctx, ansNotFound)
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
		SKUs:         make([]skuJSON, len(a.SKUs)),
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
		out.SKUs[i] = skuJSON{ID: k.ID, Price: k.Price, LimitPerUser: k.LimitPerUser, SoldOut: s.soldOut(k.ID, a.ID)}
	}
	b, err := json.Marshal(out)
	if err != nil { // cannot happen: plain fields
		s.write(ctx, ansInternal)
		return
	}
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetContentTypeBytes(contentTypeJSON)
	ctx.SetBody(b)
}
