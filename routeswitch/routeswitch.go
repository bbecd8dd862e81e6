// Package routeswitch holds on-call's switches of the non-core buyer
// routes — a buyer's orders, paying, the result stream — which on-call
// closes to shed load from a sale in trouble (seed 001 §16, scenario 1)
// while purchases and result polls go on. The switches live in one Redis
// hash on the default Redis (written whole, so its absence means none was
// ever set or Redis lost it) and in the orders database, from which Restore
// puts the hash back; every change is announced with a "routes" event on
// sale.EventsChannel.
package routeswitch

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"seckill/sale"
)

// Key is the hash of switches on the default Redis: route name -> "1"
// (open) or "0" (closed).
const Key = "sk:routes"

// The routes that can be switched.
const (
	Orders = "orders" // GET /api/v1/flash-sale/orders (a buyer's orders)
	Pay    = "pay"    // POST /api/v1/flash-sale/orders/{orderNo}/pay
	Events = "events" // GET /api/v1/flash-sale/result/{requestNo}/events
)

// Names are the switchable routes, in the order listings show them.
var Names = [...]string{Orders, Pay, Events}

// Index is name's bit in a State, or -1 for a name that cannot be switched.
func Index(name string) int {
	for i, n := range Names {
		if n == name {
			return i
		}
	}
	return -1
}

// State has bit Index(name) set for each closed route. The zero State is
// every route open.
type State uint32

// Open reports whether route i (Index) is open.
func (s State) Open(i int) bool { return s&(1<<i) == 0 }

// With returns s with route i open or closed.
func (s State) With(i int, open bool) State {
	if open {
		return s &^ (1 << i)
	}
	return s | 1<<i
}

// Map is s by route name: true for open.
func (s State) Map() map[string]bool {
	m := make(map[string]bool, len(Names))
	for i, n := range Names {
		m[n] = s.Open(i)
	}
	return m
}

// FromMap reads a State from route name -> open; unknown names are
// skipped, routes not named are open.
func FromMap(m map[string]bool) State {
	var s State
	for name, open := range m {
		if i := Index(name); i >= 0 {
			s = s.With(i, open)
		}
	}
	return s
}

// Load reads the switches from Redis; found is false when the hash is
// absent (every route open).
func Load(ctx context.Context, rdb rueidis.Client) (s State, found bool, err error) {
	m, err := rdb.Do(ctx, rdb.B().Hgetall().Key(Key).Build()).AsStrMap()
	if err != nil {
		return 0, false, fmt.Errorf("route switches: %w", err)
	}
	for name, v := range m {
		if i := Index(name); i >= 0 {
			s = s.With(i, v != "0")
		}
	}
	return s, len(m) > 0, nil
}

// Put writes every switch of s to Redis and announces the change.
func Put(ctx context.Context, rdb rueidis.Client, s State) error {
	cmd := rdb.B().Hset().Key(Key).FieldValue()
	for i, n := range Names {
		v := "0"
		if s.Open(i) {
			v = "1"
		}
		cmd = cmd.FieldValue(n, v)
	}
	if err := rdb.Do(ctx, cmd.Build()).Error(); err != nil {
		return fmt.Errorf("put route switches: %w", err)
	}
	ev := sale.Event{Kind: sale.EventRoutes, At: time.Now().UnixNano()}
	if err := rdb.Do(ctx, rdb.B().Publish().Channel(sale.EventsChannel).Message(ev.String()).Build()).Error(); err != nil {
		// The edges' refresh (edge.degrade.refresh_interval) catches up.
		return fmt.Errorf("announce route switches: %w", err)
	}
	return nil
}

// Restore puts the switches the database holds (saved: route name ->
// open) back into Redis when Redis has none, so a Redis that lost its
// data (a restart without persistence, a FLUSHALL) does not reopen routes
// on-call closed. restored says whether it wrote.
func Restore(ctx context.Context, rdb rueidis.Client, saved func(context.Context) (map[string]bool, error)) (restored bool, err error) {
	n, err := rdb.Do(ctx, rdb.B().Exists().Key(Key).Build()).AsInt64()
	if err != nil || n > 0 {
		return false, err
	}
	m, err := saved(ctx)
	if err != nil || len(m) == 0 {
		return false, err
	}
	return true, Put(ctx, rdb, FromMap(m))
}

// String is s as one line: "orders=true pay=false events=true" (open).
func (s State) String() string {
	b := make([]byte, 0, 48)
	for i, n := range Names {
		if i > 0 {
			b = append(b, ' ')
		}
		b = append(b, n...)
		b = append(b, '=')
		b = strconv.AppendBool(b, s.Open(i))
	}
	return string(b)
}
