// Package sale holds the business vocabulary shared by edge, engine and
// consumer: activities and their SKUs, the order message that travels over
// Kafka, ticket results, and the Redis key layout. It has no I/O of its own.
package sale

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Activity states as stored in Redis meta and in the activity table.
const (
	StateOnline  = "ONLINE"
	StateOffline = "OFFLINE"
)

// Risk policies: what the edge does with a purchase when the risk service
// cannot give a verdict in time (Activity.RiskOnError, edge.risk.on_error).
const (
	RiskAllow = "allow" // degrade open: the purchase goes on, counted
	RiskDeny  = "deny"  // fail closed: 503 BUSY
)

// Activity is one flash sale: a window, an optional qualification-token
// requirement and the SKUs on sale. Times are absolute; the window is judged
// against Redis server time by the occupy script.
type Activity struct {
	ID            int64     `json:"id" yaml:"id"`
	Start         time.Time `json:"start" yaml:"start"`
	End           time.Time `json:"end" yaml:"end"`
	State         string    `json:"state,omitempty" yaml:"state"`
	RequireToken  bool      `json:"requireToken" yaml:"require_token"`
	ReservedUsers []int64   `json:"reservedUsers,omitempty" yaml:"reserved_users"`
	// RebuyAfterClose says whether a buyer whose order was closed unpaid
	// may buy the SKU again. Absent (nil) means true: the closed order's
	// unit goes back on sale for everyone, its buyer included. false: the
	// unit goes back on sale, but that buyer's next attempt is refused as a
	// duplicate naming the closed ticket.
	RebuyAfterClose *bool `json:"rebuyAfterClose,omitempty" yaml:"rebuy_after_close"`
	// RiskOnError is the activity's risk policy (RiskAllow or RiskDeny):
	// what the edges do when the risk service (edge.risk.url) times out or
	// fails. Empty: the edge's edge.risk.on_error. A live switch, like
	// State: set by PUT /admin/v1/activities/{id}/risk, kept in the
	// catalog and the orders database and announced by an activity event.
	RiskOnError string `json:"riskOnError,omitempty" yaml:"risk_on_error"`
	// Prequeue opens the waiting line of the activity's queue-mode SKUs
	// this many minutes before Start (0: no pre-queue, the default; at
	// most MaxPrequeueMinutes). Attempts taken before Start are served
	// in a random order drawn at Start (DESIGN §13 "Pre-queue"), then
	// the arrivals after it in line order.
	Prequeue int64 `json:"prequeue,omitempty" yaml:"prequeue"`
	// Degrade are on-call's degrade switches, live like RiskOnError (PUT
	// /admin/v1/activities/{id}/degrade); their JSON fields sit beside the
	// activity's own.
	Degrade `yaml:",inline"`
	SKUs    []SKU `json:"skus" yaml:"skus"`
}

// MaxPollAfterMs bounds Degrade.PollAfterMs: a minute between polls.
const MaxPollAfterMs = 60_000

// Degrade are an activity's degrade switches (seed 001 §11.6, §16): what
// on-call turns to when a dependency is slow or a backlog builds, without
// re-posting the activity. The zero value is "no degrade".
type Degrade struct {
	// ReservedOnly lets only the activity's reserved users (ReservedUsers)
	// buy; everyone else is answered 403 RESERVED_ONLY at the edge.
	ReservedOnly bool `json:"reservedOnly,omitempty" yaml:"reserved_only"`
	// PollAfterMs is how long a buyer told QUEUING should wait before
	// polling the result (pollAfterMs and Retry-After of the answers);
	// 0: the edge's edge.degrade.poll_after.
	PollAfterMs int64 `json:"pollAfterMs,omitempty" yaml:"poll_after_ms"`
	// Paused stops the activity's intake: new purchases (and tokens) are
	// answered 503 PAUSED with Retry-After at the edge, which asks no
	// dependency; results and orders stay readable.
	Paused bool `json:"paused,omitempty" yaml:"paused"`
}

// Validate reports a switch out of range, naming the field.
func (d Degrade) Validate() error {
	if d.PollAfterMs < 0 || d.PollAfterMs > MaxPollAfterMs {
		return fmt.Errorf("pollAfterMs must be 0..%d", MaxPollAfterMs)
	}
	return nil
}

// Rebuy reports RebuyAfterClose with its default (true).
func (a *Activity) Rebuy() bool { return a.RebuyAfterClose == nil || *a.RebuyAfterClose }

// SKU is one item of an activity. Price is in cents; Stock is the initial
// stock of this sale.
type SKU struct {
	ID    int64 `json:"id" yaml:"id"`
	Stock int64 `json:"stock" yaml:"stock"`
	Price Cents `json:"price" yaml:"price"`
	// Title is the product's name as the buyer page shows it (at most
	// MaxTitleBytes of UTF-8, no control characters); empty: the page
	// names the SKU by its id.
	Title string `json:"title,omitempty" yaml:"title"`
	// OriginalPrice is the price before the sale, in cents, shown struck
	// through beside Price; 0: none shown. Never below Price.
	OriginalPrice Cents `json:"originalPrice,omitempty" yaml:"original_price"`
	LimitPerUser  int64 `json:"limitPerUser" yaml:"limit_per_user"`
	Hot           bool  `json:"hot" yaml:"hot"`
	// HotShard places a hot SKU on hot shard HotShard (0-based, of
	// redis.hot) instead of the placement rule's shard. Only with Hot.
	// Fixed for the life of the sale: the SKU's keys live there.
	HotShard *int `json:"hotShard,omitempty" yaml:"hot_shard"`
	// Mode is ModeDirect (empty: the same) or ModeQueue, a live switch
	// (PUT /admin/v1/skus/{id}/mode) kept in the catalog entry like
	// RiskOnError; Rate is the queue's drain pace in attempts per second
	// (0: as fast as the SKU's shard allows).
	Mode string `json:"mode,omitempty" yaml:"mode"`
	Rate int64  `json:"rate,omitempty" yaml:"rate"`
	// Buckets splits the SKU's stock into this many sub-ledgers, each in
	// its own hash slot and placed on a shard of its own (bucket.go); 0 or
	// 1: one ledger, the SKU's own keys. Fixed for the life of the sale.
	Buckets int `json:"buckets,omitempty" yaml:"buckets"`
	// HotShards pins bucket b of a bucketed hot SKU on hot shard
	// HotShards[b mod len]; empty: the placement rule spreads them.
	HotShards []int `json:"hotShards,omitempty" yaml:"hot_shards"`
}

// Shard is HotShard, or -1 when the SKU names none (the placement rule
// decides).
func (k *SKU) Shard() int {
	if k.HotShard == nil {
		return -1
	}
	return *k.HotShard
}

// Validate reports the first problem of a, naming the field.
func (a *Activity) Validate() error {
	if a.ID <= 0 {
		return fmt.Errorf("activity id must be positive")
	}
	if a.Start.IsZero() || a.End.IsZero() || !a.End.After(a.Start) {
		return fmt.Errorf("activity %d: end must be after start", a.ID)
	}
	if a.State == "" {
		a.State = StateOnline
	}
	if a.State != StateOnline && a.State != StateOffline {
		return fmt.Errorf("activity %d: state must be ONLINE or OFFLINE", a.ID)
	}
	if a.RiskOnError != "" && a.RiskOnError != RiskAllow && a.RiskOnError != RiskDeny {
		return fmt.Errorf("activity %d: riskOnError must be allow or deny", a.ID)
	}
	if err := a.Degrade.Validate(); err != nil {
		return fmt.Errorf("activity %d: %w", a.ID, err)
	}
	if a.Prequeue < 0 || a.Prequeue > MaxPrequeueMinutes {
		return fmt.Errorf("activity %d: prequeue must be 0..%d minutes", a.ID, MaxPrequeueMinutes)
	}
	if len(a.SKUs) == 0 {
		return fmt.Errorf("activity %d: at least one sku", a.ID)
	}
	seen := map[int64]bool{}
	for i := range a.SKUs {
		s := &a.SKUs[i]
		if s.ID <= 0 || seen[s.ID] {
			return fmt.Errorf("activity %d: sku ids must be positive and unique", a.ID)
		}
		seen[s.ID] = true
		if s.Stock < 0 {
			return fmt.Errorf("activity %d sku %d: stock must not be negative", a.ID, s.ID)
		}
		if s.Price < 0 {
			return fmt.Errorf("activity %d sku %d: price must not be negative", a.ID, s.ID)
		}
		if s.OriginalPrice < 0 || (s.OriginalPrice > 0 && s.OriginalPrice < s.Price) {
			return fmt.Errorf("activity %d sku %d: originalPrice must not be negative nor below price", a.ID, s.ID)
		}
		if err := checkTitle(s.Title); err != nil {
			return fmt.Errorf("activity %d sku %d: title %w", a.ID, s.ID, err)
		}
		if s.HotShard != nil && (*s.HotShard < 0 || !s.Hot) {
			return fmt.Errorf("activity %d sku %d: hotShard must be 0 or more, and only on a hot SKU", a.ID, s.ID)
		}
		if err := s.ValidateMode(); err != nil {
			return fmt.Errorf("activity %d sku %d: %w", a.ID, s.ID, err)
		}
		if err := s.validateBuckets(); err != nil {
			return fmt.Errorf("activity %d sku %d: %w", a.ID, s.ID, err)
		}
		if s.LimitPerUser <= 0 {
			s.LimitPerUser = 1
		}
	}
	return nil
}

// SKU returns the SKU with id, or nil.
func (a *Activity) SKU(id int64) *SKU {
	for i := range a.SKUs {
		if a.SKUs[i].ID == id {
			return &a.SKUs[i]
		}
	}
	return nil
}

// Reserved reports whether user is on the reserved list.
func (a *Activity) Reserved(user int64) bool {
	for _, u := range a.ReservedUsers {
		if u == user {
			return true
		}
	}
	return false
}

// Cents is a money amount in hundredths. It reads and writes as a decimal
// string ("99.00") in JSON and YAML, and also accepts a JSON number.
type Cents int64

// String formats c as "12.34".
func (c Cents) String() string {
	var b [24]byte
	return string(c.Append(b[:0]))
}

// Append appends c as String writes it ("12.30", "-0.05") to dst.
func (c Cents) Append(dst []byte) []byte {
	v := int64(c)
	if v < 0 {
		dst = append(dst, '-')
		v = -v
	}
	dst = strconv.AppendInt(dst, v/100, 10)
	return append(dst, '.', byte('0'+v%100/10), byte('0'+v%10))
}

// ParseCents parses "12", "12.3" or "12.34".
func ParseCents(s string) (Cents, error) {
	s = strings.TrimSpace(s)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	whole, frac, _ := strings.Cut(s, ".")
	if whole == "" || len(frac) > 2 {
		return 0, fmt.Errorf("price %q: want a decimal with at most 2 places", s)
	}
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("price %q: %w", s, err)
	}
	var f int64
	if frac != "" {
		for len(frac) < 2 {
			frac += "0"
		}
		if f, err = strconv.ParseInt(frac, 10, 64); err != nil {
			return 0, fmt.Errorf("price %q: %w", s, err)
		}
	}
	v := w*100 + f
	if neg {
		v = -v
	}
	return Cents(v), nil
}

// MarshalJSON writes c as a quoted decimal string.
func (c Cents) MarshalJSON() ([]byte, error) { return []byte(`"` + c.String() + `"`), nil }

// UnmarshalJSON reads a quoted decimal or a bare number.
func (c *Cents) UnmarshalJSON(b []byte) error {
	v, err := ParseCents(strings.Trim(string(b), `"`))
	if err != nil {
		return err
	}
	*c = v
	return nil
}

// MarshalYAML writes c as a decimal string.
func (c Cents) MarshalYAML() (any, error) { return c.String(), nil }

// UnmarshalYAML reads a decimal string or number.
func (c *Cents) UnmarshalYAML(unmarshal func(any) error) error {
	var s string
	if err := unmarshal(&s); err != nil {
		return err
	}
	v, err := ParseCents(s)
	if err != nil {
		return err
	}
	*c = v
	return nil
}

// MaxTitleBytes bounds a SKU's title (the width of flash_sale_item.title).
const MaxTitleBytes = 256

// checkTitle refuses a title the database could not hold or a page could
// be fooled by: longer than MaxTitleBytes, not UTF-8, or with control
// characters.
func checkTitle(t string) error {
	if len(t) > MaxTitleBytes {
		return fmt.Errorf("must be at most %d bytes", MaxTitleBytes)
	}
	if !utf8.ValidString(t) {
		return fmt.Errorf("must be UTF-8")
	}
	for _, r := range t {
		if unicode.IsControl(r) {
			return fmt.Errorf("must not hold control characters")
		}
	}
	return nil
}
