package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"
)

// LoadSpec is a crowd of buyers.
type LoadSpec struct {
	Users   int     // distinct buyers, ids FirstUser..FirstUser+Users-1
	Repeats int     // extra attempts by buyers already in the crowd
	HotFrac float64 // share of buyers on the hot SKU; the rest buy the normal one
	Rate    int     // requests per second, paced (bounded load, not a flood)
	Workers int     // concurrent connections
	// FirstUser is the first user id. Default 1.
	FirstUser int64
	Seed      uint64
}

// attempt is one purchase attempt and its answer.
type attempt struct {
	User      int64
	SKU       int64
	Sent      time.Time
	Took      time.Duration
	Status    int // 0: transport error
	Code      string
	RequestNo string
	Err       string
}

// ticket is an accepted attempt (200 QUEUING).
type ticket struct {
	RequestNo string
	User, SKU int64
}

// Run is what a crowd did.
type Run struct {
	Attempts []attempt
	Tickets  map[string]ticket // accepted (200 QUEUING) by requestNo
	Statuses map[string]int    // "200 QUEUING", "503 BUSY", "err", ...
	Took     time.Duration
}

func (r *Run) sent() int     { return len(r.Attempts) }
func (r *Run) accepted() int { return len(r.Tickets) }

// summary is the answers by status and code, sorted.
func (r *Run) summary() string {
	keys := make([]string, 0, len(r.Statuses))
	for k := range r.Statuses {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s×%d", k, r.Statuses[k])
	}
	return b.String()
}

// plan lays out the attempts: every buyer once, then the repeats, shuffled
// together so repeats land while the first attempts are still in flight.
func (l LoadSpec) plan() []attempt {
	if l.FirstUser == 0 {
		l.FirstUser = 1
	}
	rng := rand.New(rand.NewPCG(l.Seed, 42))
	out := make([]attempt, 0, l.Users+l.Repeats)
	for i := 0; i < l.Users; i++ {
		u := l.FirstUser + int64(i)
		sku := int64(skuNormal)
		if rng.Float64() < l.HotFrac {
			sku = skuHot
		}
		out = append(out, attempt{User: u, SKU: sku})
	}
	for i := 0; i < l.Repeats && l.Users > 0; i++ {
		out = append(out, out[rng.IntN(l.Users)])
	}
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// buy runs the crowd against the edge, paced at l.Rate, until every planned
// attempt was sent and answered (each bounded by the client timeout) or ctx
// ends. at, if set, is called with the elapsed time after every attempt is
// dispatched (the fault schedule hangs off it).
func (s *System) buy(ctx context.Context, l LoadSpec) *Run {
	plan := l.plan()
	if l.Workers <= 0 {
		l.Workers = 32
	}
	if l.Rate <= 0 {
		l.Rate = 500
	}
	work := make(chan int)
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < l.Workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				s.attempt(&plan[i])
			}
		}()
	}
	interval := time.Second / time.Duration(l.Rate)
	next := time.Now()
	sent := 0
dispatch:
	for i := range plan {
		if d := time.Until(next); d > 0 {
			select {
			case <-time.After(d):
			case <-ctx.Done():
				break dispatch
			}
		}
		next = next.Add(interval)
		select {
		case work <- i:
			sent++
		case <-ctx.Done():
			break dispatch
		}
	}
	close(work)
	wg.Wait()
	r := &Run{Attempts: plan[:sent], Tickets: map[string]ticket{}, Statuses: map[string]int{}, Took: time.Since(start)}
	for _, a := range r.Attempts {
		key := "err"
		if a.Status != 0 {
			key = fmt.Sprintf("%d %s", a.Status, a.Code)
		}
		r.Statuses[key]++
		if a.Status == 200 && a.Code == "QUEUING" {
			r.Tickets[a.RequestNo] = ticket{RequestNo: a.RequestNo, User: a.User, SKU: a.SKU}
		}
	}
	return r
}

// attempt sends one purchase and records the answer in a.
func (s *System) attempt(a *attempt) {
	a.Sent = time.Now()
	body := []byte(fmt.Sprintf(`{"activityId":%d,"skuId":%d,"quantity":1}`, activityID, a.SKU))
	st, b, err := s.do("POST", s.url("/api/v1/flash-sale/order"), a.User, body, nil)
	a.Took = time.Since(a.Sent)
	s.answers.Add(1)
	if err != nil {
		a.Err = err.Error()
		return
	}
	a.Status = st
	var ans struct {
		Code      string `json:"code"`
		RequestNo string `json:"requestNo"`
	}
	if jerr := json.Unmarshal(b, &ans); jerr != nil {
		a.Code = "UNPARSABLE"
		a.Err = fmt.Sprintf("%q", b)
		return
	}
	a.Code, a.RequestNo = ans.Code, ans.RequestNo
}

// faultPlan is one fault: inject at At after the crowd starts, heal at
// HealAt. Both run on their own goroutine while the crowd buys.
type faultPlan struct {
	Name   string
	At     time.Duration
	Inject func() error
	HealAt time.Duration
	Heal   func() error
}

// buyWithFault runs the crowd and the fault together and returns the run
// and the fault's timeline (for the log).
func (s *System) buyWithFault(l LoadSpec, f faultPlan) (*Run, []string) {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var (
		timeline []string
		errs     []error
		mu       sync.Mutex
	)
	note := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		timeline = append(timeline, fmt.Sprintf(format, args...))
	}
	start := time.Now()
	s.answers.Store(0)
	var injected, healed time.Time
	done := make(chan struct{})
	go func() {
		defer close(done)
		time.Sleep(f.At)
		injected = time.Now()
		note("%6.2fs inject: %s (answers so far %d)", time.Since(start).Seconds(), f.Name, s.answers.Load())
		if err := f.Inject(); err != nil {
			mu.Lock()
			errs = append(errs, fmt.Errorf("inject %s: %w", f.Name, err))
			mu.Unlock()
		}
		if f.Heal == nil {
			return
		}
		if d := f.HealAt - time.Since(start); d > 0 {
			time.Sleep(d)
		}
		note("%6.2fs heal: %s", time.Since(start).Seconds(), f.Name)
		if err := f.Heal(); err != nil {
			mu.Lock()
			errs = append(errs, fmt.Errorf("heal %s: %w", f.Name, err))
			mu.Unlock()
		}
		healed = time.Now()
		note("%6.2fs healed", time.Since(start).Seconds())
	}()
	run := s.buy(ctx, l)
	note("%6.2fs crowd done: %d sent, %d accepted", time.Since(start).Seconds(), run.sent(), run.accepted())
	<-done
	// The fault must hit a sale in progress: buyers accepted before it,
	// stock left when it struck.
	var before, during, after int
	for _, a := range run.Attempts {
		if a.Status != 200 {
			continue
		}
		switch {
		case a.Sent.Add(a.Took).Before(injected):
			before++
		case !healed.IsZero() && a.Sent.After(healed):
			after++
		default:
			during++
		}
	}
	note("accepted: %d before the fault, %d while it lasted, %d after it healed", before, during, after)
	total := s.stockTotal()
	s.expect("the fault hit a sale in progress", before > 0 && (total == 0 || before < total),
		"%d accepted before the fault, %d units on sale (%s)", before, total, run.summary())
	for _, err := range errs {
		s.t.Error(err)
	}
	for _, line := range timeline {
		s.t.Log(line)
	}
	return run, timeline
}
