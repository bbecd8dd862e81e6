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
	// Pick, if set, chooses each buyer's SKU instead of HotFrac (the fleet
	// spreads its crowd over several SKUs).
	Pick func(rng *rand.Rand) int64
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
	// RetryAfter is the answer's Retry-After header ("" without one).
	RetryAfter string
}

// answer is the attempt's answer as the status sets name it: "200
// QUEUING", "503 BUSY", … or "err" for a transport error (no HTTP answer).
func (a *attempt) answer() string {
	if a.Status == 0 {
		return "err"
	}
	return fmt.Sprintf("%d %s", a.Status, a.Code)
}

// answered is when the answer came.
func (a *attempt) answered() time.Time { return a.Sent.Add(a.Took) }

// taken says the sale took the attempt: a ticket (200 QUEUING: its order
// message acknowledged) or, in queue mode, a place in line (202 WAITING:
// the attempt acknowledged in the attempts topic).
func (a *attempt) taken() bool {
	return a.Status == 200 && a.Code == stateQueuing || a.Status == 202 && a.Code == stateWaiting
}

// ticket is an accepted attempt (200 QUEUING): the broker acknowledged its
// order message before the edge answered.
type ticket struct {
	RequestNo string
	User, SKU int64
	Answered  time.Time
}

// Run is what a crowd did.
type Run struct {
	Attempts []attempt
	Tickets  map[string]ticket // accepted (200 QUEUING) by requestNo
	// Waiting are the attempts answered 202 WAITING (queue mode: the
	// broker acknowledged the attempt, a drainer decides it), and Named
	// the waiting tickets a 409 WAITING named (its buyer already waited
	// with it), by requestNo.
	Waiting, Named map[string]ticket
	Statuses       map[string]int // "200 QUEUING", "503 BUSY", "err", ...
	Took           time.Duration
	// Fault is the fault the crowd met, with the answers it allows; nil
	// for a run without one.
	Fault *faultRun
	// Allowed, for a run without a fault, is every answer it may get
	// (nil: the scenario judges its answers itself).
	Allowed statuses
}

// add records attempts in the run (the tickets and the status counts).
func (r *Run) add(as ...attempt) {
	if r.Tickets == nil {
		r.Tickets = map[string]ticket{}
	}
	if r.Statuses == nil {
		r.Statuses = map[string]int{}
	}
	if r.Waiting == nil {
		r.Waiting, r.Named = map[string]ticket{}, map[string]ticket{}
	}
	for _, a := range as {
		r.Attempts = append(r.Attempts, a)
		r.Statuses[a.answer()]++
		tk := ticket{RequestNo: a.RequestNo, User: a.User, SKU: a.SKU, Answered: a.answered()}
		switch {
		case a.Status == 200 && a.Code == stateQueuing:
			r.Tickets[a.RequestNo] = tk
		case a.Status == 202 && a.Code == stateWaiting:
			r.Waiting[a.RequestNo] = tk
		case a.Status == 409 && a.Code == stateWaiting && a.RequestNo != "":
			if prev, ok := r.Named[a.RequestNo]; ok && prev.Answered.After(tk.Answered) {
				tk.Answered = prev.Answered // the latest 409 naming it
			}
			r.Named[a.RequestNo] = tk
		}
	}
}

func (r *Run) sent() int { return len(r.Attempts) }

// accepted counts the tickets and the places in line the crowd was given.
func (r *Run) accepted() int { return len(r.Tickets) + len(r.Waiting) }

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
		switch {
		case l.Pick != nil:
			sku = l.Pick(rng)
		case rng.Float64() < l.HotFrac:
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
	r := &Run{Took: time.Since(start)}
	r.add(plan[:sent]...)
	return r
}

// attempt sends one purchase and records the answer in a.
func (s *System) attempt(a *attempt) {
	a.Sent = time.Now()
	body := []byte(fmt.Sprintf(`{"activityId":%d,"skuId":%d,"quantity":1}`, activityID, a.SKU))
	st, b, hdr, err := s.doHeader("POST", s.buyURL(a.User), a.User, body, nil)
	a.Took = time.Since(a.Sent)
	a.RetryAfter = hdr.Get("Retry-After")
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

// statuses is a set of answers as attempt.answer names them.
type statuses map[string]bool

func answers(keys ...string) statuses {
	s := statuses{}
	for _, k := range keys {
		s[k] = true
	}
	return s
}

// with is s plus keys (s is not changed).
func (s statuses) with(keys ...string) statuses {
	out := answers(keys...)
	for k := range s {
		out[k] = true
	}
	return out
}

func (s statuses) String() string {
	keys := make([]string, 0, len(s))
	for k := range s {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return "{" + strings.Join(keys, ", ") + "}"
}

// healthy is every answer a sale on healthy parts gives the crowd: a
// ticket, a repeat buyer's duplicate, sold out, and the rate limits (the
// per user × SKU window and the admission gate, which trips as stock runs
// low). A healthy system never answers 503, 5xx or nothing.
var healthy = answers("200 QUEUING", "409 DUPLICATE", "410 SOLD_OUT", "429 RATE_LIMITED")

// healthyQueue is a healthy sale of SKUs in queue mode: a place in line,
// a waiting buyer's second attempt naming the ticket it waits with, a
// buyer who holds a ticket told DUPLICATE before the line, sold out and
// the rate limits — never 200 QUEUING: no attempt is served direct once
// the edge sells the SKU in queue mode.
var healthyQueue = answers("202 WAITING", "409 WAITING", "409 DUPLICATE", "410 SOLD_OUT", "429 RATE_LIMITED")

// faultPlan is one fault: inject at At after the crowd starts, heal at
// HealAt (Heal nil: the fault is over when Inject returns). Both run on
// their own goroutine while the crowd buys. The plan names every answer
// the crowd may get while the fault lasts and after it healed, and
// whether it loses Redis data.
type faultPlan struct {
	Name   string
	At     time.Duration
	Inject func() error
	HealAt time.Duration
	Heal   func() error

	// During is every answer allowed from the injection until Settle after
	// the heal, on every SKU not in DuringSKU.
	During statuses
	// DuringSKU overrides During for some SKUs (HotShardKilled: only the
	// hot SKU's ledger is away).
	DuringSKU map[int64]statuses
	// Settle is how long after the heal the fault's answers may still
	// come: reconnects, a circuit breaker's probe, the watcher's rebuild.
	Settle time.Duration
	// After is every answer allowed to attempts sent once Settle has
	// passed; nil means Healthy. At least one of them must be accepted:
	// sales resume after the fault.
	After statuses
	// Healthy is every answer of the sale before the fault (and, unless
	// After says otherwise, after it); nil means healthy (a direct sale).
	Healthy statuses
	// Loss declares that the fault destroys Redis data (a redis-server
	// restarted without persistence). Only then may a ticket the broker
	// acknowledged end FAIL — and only if it was answered before the
	// loss healed and its story says the loss failed it.
	Loss *redisLoss
	// DeadLetters declares that while the fault lasts the consumer
	// dead-letters genuine messages (it cannot verify them). Then a
	// ticket answered before the heal may end FAIL — only RELEASED by the
	// orphan sweeper, its story naming the dead letter, its stock back.
	DeadLetters *deadLettering
}

// deadLettering is the window of a fault in which genuine order messages
// are dead-lettered.
type deadLettering struct {
	// Until is when the consumer could verify again (set by buyWithFault
	// at the heal).
	Until time.Time
}

// redisLoss is the Redis data a fault destroys.
type redisLoss struct {
	// SKUs whose ledger (stock, records, claims) is lost, and with it
	// their tickets' results, which live on the SKU's shard (DESIGN §5).
	SKUs []int64
	// Until is when the emptied Redis came back (set by buyWithFault at
	// the heal): tickets answered later met the rebuilt ledger.
	Until time.Time
}

func (l *redisLoss) covers(sku int64) bool {
	if l == nil {
		return false
	}
	for _, s := range l.SKUs {
		if s == sku {
			return true
		}
	}
	return false
}

// faultRun is a fault as it happened.
type faultRun struct {
	faultPlan
	Injected, Healed time.Time
	// LineServed, set by a queue scenario, holds the SKUs whose line
	// served, after the heal, a ticket that was WAITING at the heal (its
	// result now QUEUING or SUCCESS). Where no attempt sent after the
	// fault settled could take a place, sales resumed all the same if
	// each SKU they were sent for was served so and sold its whole stock:
	// the line spoke for the stock before the fault settled.
	LineServed map[int64]bool
}

// phase is when an attempt met the fault.
type phase int

const (
	phaseBefore phase = iota // answered before the injection
	phaseDuring              // from the injection until Settle after the heal
	phaseAfter               // sent once the fault had healed and settled
)

func (p phase) String() string { return [...]string{"before", "during", "after"}[p] }

func (f *faultRun) phase(a *attempt) phase {
	switch {
	case a.answered().Before(f.Injected):
		return phaseBefore
	case !a.Sent.Before(f.Healed.Add(f.Settle)):
		return phaseAfter
	default:
		return phaseDuring
	}
}

// allowed is every answer an attempt on sku may get in phase p.
func (f *faultRun) allowed(p phase, sku int64) statuses {
	switch p {
	case phaseBefore:
		return f.healthy()
	case phaseDuring:
		if s, ok := f.DuringSKU[sku]; ok {
			return s
		}
		return f.During
	default:
		if f.After == nil {
			return f.healthy()
		}
		return f.After
	}
}

// healthy is every answer of the sale on healthy parts.
func (f *faultRun) healthy() statuses {
	if f.Healthy == nil {
		return healthy
	}
	return f.Healthy
}

// buyWithFault runs the crowd and the fault together and returns the run
// with the fault's times (the judge reads them) and the fault's timeline
// (for the log).
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
	fr := &faultRun{faultPlan: f}
	if f.Loss != nil {
		loss := *f.Loss
		fr.Loss = &loss
	}
	if f.DeadLetters != nil {
		dl := *f.DeadLetters
		fr.DeadLetters = &dl
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		time.Sleep(f.At)
		fr.Injected = time.Now()
		note("%6.2fs inject: %s (answers so far %d)", time.Since(start).Seconds(), f.Name, s.answers.Load())
		if err := f.Inject(); err != nil {
			mu.Lock()
			errs = append(errs, fmt.Errorf("inject %s: %w", f.Name, err))
			mu.Unlock()
		}
		if f.Heal != nil {
			if d := f.HealAt - time.Since(start); d > 0 {
				time.Sleep(d)
			}
			note("%6.2fs heal: %s", time.Since(start).Seconds(), f.Name)
			if err := f.Heal(); err != nil {
				mu.Lock()
				errs = append(errs, fmt.Errorf("heal %s: %w", f.Name, err))
				mu.Unlock()
			}
		}
		fr.Healed = time.Now()
		if fr.Loss != nil {
			fr.Loss.Until = fr.Healed
		}
		if fr.DeadLetters != nil {
			fr.DeadLetters.Until = fr.Healed
		}
		note("%6.2fs healed; the fault's answers are allowed until %.2fs", time.Since(start).Seconds(),
			fr.Healed.Add(f.Settle).Sub(start).Seconds())
	}()
	run := s.buy(ctx, l)
	note("%6.2fs crowd done: %d sent, %d accepted", time.Since(start).Seconds(), run.sent(), run.accepted())
	<-done
	run.Fault = fr
	var (
		accepted [3]int
		slowest  [3]time.Duration
		lastBad  *time.Duration // the last answer outside healthy, sent this long after the heal
	)
	for i := range run.Attempts {
		a := &run.Attempts[i]
		p := fr.phase(a)
		if a.taken() {
			accepted[p]++
		}
		slowest[p] = max(slowest[p], a.Took)
		if d := a.Sent.Sub(fr.Healed); !fr.healthy()[a.answer()] && (lastBad == nil || d > *lastBad) {
			lastBad = &d
		}
	}
	last := "none"
	if lastBad != nil {
		last = fmt.Sprintf("%+.3fs from the heal", lastBad.Seconds())
	}
	note("accepted: %d before the fault, %d while it lasted, %d after it healed and settled (slowest answers %v, %v, %v); last answer outside healthy sent: %s",
		accepted[0], accepted[1], accepted[2], slowest[0].Round(time.Millisecond), slowest[1].Round(time.Millisecond), slowest[2].Round(time.Millisecond), last)
	for _, err := range errs {
		s.t.Error(err)
	}
	for _, line := range timeline {
		s.t.Log(line)
	}
	return run, timeline
}
