package sale

import (
	"fmt"
	"strconv"
	"strings"
)

// Event kinds on EventsChannel.
const (
	EventSoldOut   = "soldout"   // SKU has no stock left
	EventAvailable = "available" // SKU has stock again (release, restock, on-call)
	EventActivity  = "activity"  // activity created, replaced or changed state
	EventBlocklist = "blocklist" // IP or user blocklist changed (activity and SKU 0)
	EventRoutes    = "routes"    // a route switch changed (activity and SKU 0)
)

// Event is one pub/sub message: "<kind> <activity> <sku> <unix-nanos>".
// SKU is 0 for activity events; both are 0 for blocklist events. At carries
// the sender's clock so receivers can measure propagation delay.
type Event struct {
	Kind     string
	Activity int64
	SKU      int64
	At       int64
}

// String encodes e for publishing.
func (e Event) String() string {
	return e.Kind + " " + strconv.FormatInt(e.Activity, 10) + " " + strconv.FormatInt(e.SKU, 10) + " " + strconv.FormatInt(e.At, 10)
}

// ParseEvent decodes a published event.
func ParseEvent(s string) (Event, error) {
	f := strings.Fields(s)
	if len(f) != 4 {
		return Event{}, fmt.Errorf("event %q: want 4 fields", s)
	}
	var e Event
	var err error
	e.Kind = f[0]
	switch e.Kind {
	case EventSoldOut, EventAvailable, EventActivity, EventBlocklist, EventRoutes:
	default:
		return Event{}, fmt.Errorf("event %q: unknown kind", s)
	}
	if e.Activity, err = strconv.ParseInt(f[1], 10, 64); err != nil {
		return Event{}, fmt.Errorf("event %q: %w", s, err)
	}
	if e.SKU, err = strconv.ParseInt(f[2], 10, 64); err != nil {
		return Event{}, fmt.Errorf("event %q: %w", s, err)
	}
	if e.At, err = strconv.ParseInt(f[3], 10, 64); err != nil {
		return Event{}, fmt.Errorf("event %q: %w", s, err)
	}
	return e, nil
}
