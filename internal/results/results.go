// Package results reads and writes ticket results (sk:r:{requestNo} on the
// default Redis): QUEUING when the engine accepts, SUCCESS or FAIL when the
// consumer is done. The buyer's polling reads them; they expire after a TTL.
package results

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"seckill/internal/sale"
)

// DefaultTTL is how long a result stays readable (DESIGN §5: 48 h).
const DefaultTTL = 48 * time.Hour

// ErrNotFound means no result exists under that requestNo.
var ErrNotFound = errors.New("result not found")

// Entry is one result to write.
type Entry struct {
	RequestNo string `json:"requestNo"`
	Activity  int64  `json:"activity"`
	SKU       int64  `json:"sku"`
	Owner     int64  `json:"owner"`
	State     string `json:"state"` // sale.ResultQueuing, ResultSuccess, ResultFail
	OrderNo   string `json:"orderNo"`
	Code      string `json:"code"` // failure code for FAIL
}

// Store writes and reads results. Safe for concurrent use.
type Store struct {
	rdb rueidis.Client
	ttl time.Duration
}

// New returns a Store on the default Redis; ttl <= 0 means DefaultTTL.
func New(rdb rueidis.Client, ttl time.Duration) *Store {
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	return &Store{rdb: rdb, ttl: ttl}
}

func (s *Store) cmds(e *Entry, dst rueidis.Commands) rueidis.Commands {
	k := sale.ResultKey(e.RequestNo)
	h := s.rdb.B().Hset().Key(k).FieldValue().
		FieldValue(sale.FieldState, e.State).
		FieldValue(sale.FieldOwner, strconv.FormatInt(e.Owner, 10)).
		FieldValue(sale.FieldActivity, strconv.FormatInt(e.Activity, 10)).
		FieldValue(sale.FieldSKU, strconv.FormatInt(e.SKU, 10)).
		FieldValue(sale.FieldOrderNo, e.OrderNo).
		FieldValue(sale.FieldCode, e.Code)
	return append(dst, h.Build(), s.rdb.B().Expire().Key(k).Seconds(int64(s.ttl/time.Second)).Build())
}

// Channel is the pub/sub channel a Write of final results (SUCCESS, FAIL)
// publishes on: one message per Write, the requestNos separated by
// spaces. The result streams of every edge (web.ResultHub, one
// subscription per process) learn from it that a ticket is answered,
// instead of each stream polling Redis.
const Channel = "sk:results"

// Write stores the results in one pipelined round trip (DoMulti; on a
// Redis Cluster one per node, in parallel, and the PUBLISH after them):
// an HSET and an EXPIRE per result, since every result is a key of its
// own, in its own slot, and where any result is final one PUBLISH on
// Channel naming them all.
func (s *Store) Write(ctx context.Context, es ...Entry) error {
	if len(es) == 0 {
		return nil
	}
	cmds := make(rueidis.Commands, 0, 2*len(es)+1)
	var final []byte
	for i := range es {
		cmds = s.cmds(&es[i], cmds)
		if es[i].State != sale.ResultQueuing && es[i].State != "" {
			if len(final) > 0 {
				final = append(final, ' ')
			}
			final = append(final, es[i].RequestNo...)
		}
	}
	// On a Redis Cluster the PUBLISH goes on its own, after the writes:
	// rueidis refuses (panics on) a DoMulti that mixes a command without
	// a key with keys of several slots. Elsewhere it rides in the same
	// pipeline, after the writes.
	var publish rueidis.Completed
	separate := false
	if len(final) > 0 {
		publish = s.rdb.B().Publish().Channel(Channel).Message(rueidis.BinaryString(final)).Build()
		if separate = s.rdb.Mode() == rueidis.ClientModeCluster; !separate {
			cmds = append(cmds, publish)
		}
	}
	for _, r := range s.rdb.DoMulti(ctx, cmds...) {
		if err := r.Error(); err != nil {
			return fmt.Errorf("write results: %w", err)
		}
	}
	if separate {
		if err := s.rdb.Do(ctx, publish).Error(); err != nil {
			return fmt.Errorf("write results: publish: %w", err)
		}
	}
	return nil
}

// Read returns the result of requestNo, or ErrNotFound.
func (s *Store) Read(ctx context.Context, requestNo string) (Entry, error) {
	m, err := s.rdb.Do(ctx, s.rdb.B().Hgetall().Key(sale.ResultKey(requestNo)).Build()).AsStrMap()
	if err != nil {
		return Entry{}, fmt.Errorf("read result %s: %w", requestNo, err)
	}
	if len(m) == 0 {
		return Entry{}, ErrNotFound
	}
	return entry(requestNo, m), nil
}

// ReadMany reads the results of requestNos in one pipelined round trip:
// out[i] is requestNos[i]'s, with an empty State where it has none.
func (s *Store) ReadMany(ctx context.Context, requestNos []string) ([]Entry, error) {
	if len(requestNos) == 0 {
		return nil, nil
	}
	cmds := make(rueidis.Commands, len(requestNos))
	for i, rn := range requestNos {
		cmds[i] = s.rdb.B().Hgetall().Key(sale.ResultKey(rn)).Build()
	}
	out := make([]Entry, len(requestNos))
	for i, r := range s.rdb.DoMulti(ctx, cmds...) {
		m, err := r.AsStrMap()
		if err != nil {
			return nil, fmt.Errorf("read %d results: %s: %w", len(requestNos), requestNos[i], err)
		}
		out[i] = Entry{RequestNo: requestNos[i]}
		if len(m) > 0 {
			out[i] = entry(requestNos[i], m)
		}
	}
	return out, nil
}

func entry(requestNo string, m map[string]string) Entry {
	e := Entry{RequestNo: requestNo, State: m[sale.FieldState], OrderNo: m[sale.FieldOrderNo], Code: m[sale.FieldCode]}
	e.Owner, _ = strconv.ParseInt(m[sale.FieldOwner], 10, 64)
	e.Activity, _ = strconv.ParseInt(m[sale.FieldActivity], 10, 64)
	e.SKU, _ = strconv.ParseInt(m[sale.FieldSKU], 10, 64)
	return e
}
