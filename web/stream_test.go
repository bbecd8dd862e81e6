package web

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fasthttp/router"
	"github.com/valyala/fasthttp"
	"go.uber.org/zap/zaptest"

	"seckill/edge"
	"seckill/internal/testenv"
	"seckill/sale"
	"seckill/stock/results"
)

// streamRig serves NewResultEvents(cfg) on a fasthttp server with the
// edge's write timeout, over a real redis-server, with a hub when hub.
type streamRig struct {
	redis *testenv.Redis
	res   *results.Store
	h     *ResultEvents
	hub   *ResultHub
	base  string
}

func newStreamRig(t *testing.T, cfg edge.StreamConfig, writeTimeout time.Duration, hub bool) *streamRig {
	t.Helper()
	s := &streamRig{redis: testenv.StartRedis(t)}
	s.res = results.New(s.redis.Client(t), nil, time.Hour)
	if hub {
		s.hub = NewResultHub(s.redis.Client(t), nil)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { s.hub.Run(ctx); close(done) }()
		t.Cleanup(func() { cancel(); <-done })
		deadline := time.Now().Add(5 * time.Second)
		for !s.hub.Subscribed() {
			if time.Now().After(deadline) {
				t.Fatal("hub never subscribed")
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	s.h = NewResultEvents(s.res, s.hub, cfg, nil)
	r := router.New()
	r.GET("/e/{requestNo}", s.h.Handle)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: r.Handler, WriteTimeout: writeTimeout, ReadTimeout: writeTimeout}
	go srv.Serve(ln)
	t.Cleanup(func() { s.h.Close(); srv.Shutdown() })
	s.base = "http://" + ln.Addr().String()
	return s
}

func (s *streamRig) queue(t *testing.T, rn string, user int64) results.Entry {
	t.Helper()
	e := results.Entry{RequestNo: rn, Activity: 1, SKU: 1001, Owner: user, State: sale.ResultQueuing}
	if err := s.res.Write(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	return e
}

// stream is one open result stream read line by line.
type stream struct {
	resp  *http.Response
	lines chan string
}

func (s *streamRig) open(t *testing.T, rn string, user int64) *stream {
	t.Helper()
	req, _ := http.NewRequest("GET", s.base+"/e/"+rn, nil)
	req.Header.Set("X-User-Id", strconv.FormatInt(user, 10))
	resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	st := &stream{resp: resp, lines: make(chan string, 256)}
	if resp.StatusCode != 200 {
		return st
	}
	go func() {
		defer close(st.lines)
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if l := sc.Text(); l != "" {
				st.lines <- l
			}
		}
	}()
	return st
}

// next waits for the next line that starts with prefix, skipping others;
// "" when the stream ended first.
func (st *stream) next(t *testing.T, prefix string, within time.Duration) string {
	t.Helper()
	end := time.After(within)
	for {
		select {
		case l, ok := <-st.lines:
			if !ok {
				return ""
			}
			if strings.HasPrefix(l, prefix) {
				return l
			}
		case <-end:
			t.Fatalf("no %q line within %v", prefix, within)
		}
	}
}

func waitFor(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestStreamOutlivesTheWriteTimeout: the edge's write_timeout (here
// 300ms) no longer cuts the stream. It sends heartbeats while the ticket
// queues, and a result written 1s after the stream opened — more than
// three write timeouts — still arrives. (Before: the stream was cut at the
// write timeout and the result never delivered.)
func TestStreamOutlivesTheWriteTimeout(t *testing.T) {
	s := newStreamRig(t, edge.StreamConfig{Heartbeat: 100 * time.Millisecond, WriteTimeout: time.Second, MaxWait: 10 * time.Second}, 300*time.Millisecond, true)
	q := s.queue(t, "1-1001-42", 7)
	st := s.open(t, "1-1001-42", 7)
	if l := st.next(t, "data: ", time.Second); !strings.Contains(l, `"QUEUING"`) {
		t.Fatalf("first event %q", l)
	}
	start := time.Now()
	pings := 0
	for time.Since(start) < time.Second {
		if st.next(t, ": ping", time.Second) == "" {
			t.Fatalf("stream ended after %v", time.Since(start))
		}
		pings++
	}
	if pings < 5 {
		t.Fatalf("%d heartbeats in a second, want about 10", pings)
	}
	q.State, q.OrderNo = sale.ResultSuccess, "O42"
	if err := s.res.Write(context.Background(), q); err != nil {
		t.Fatal(err)
	}
	if l := st.next(t, "data: ", 2*time.Second); !strings.Contains(l, `"SUCCESS"`) || !strings.Contains(l, `"O42"`) {
		t.Fatalf("result after the write timeout: %q", l)
	}
}

// TestStreamEndsWhenTheClientGoesAway: 20 streams whose clients hang up
// are gone (counted open streams back to 0) within a few heartbeats, not
// after max_wait (1 minute here). (Before: each kept reading Redis until
// max_wait.)
func TestStreamEndsWhenTheClientGoesAway(t *testing.T) {
	s := newStreamRig(t, edge.StreamConfig{Heartbeat: 50 * time.Millisecond, MaxWait: time.Minute}, 5*time.Second, true)
	const n = 20
	var sts []*stream
	for i := range n {
		rn := "1-1001-" + strconv.Itoa(100+i)
		s.queue(t, rn, int64(100+i))
		st := s.open(t, rn, int64(100+i))
		st.next(t, "data: ", time.Second)
		sts = append(sts, st)
	}
	if got := s.h.Open(); got != n {
		t.Fatalf("%d streams open, want %d", got, n)
	}
	for _, st := range sts {
		st.resp.Body.Close()
	}
	waitFor(t, "the abandoned streams to end", 3*time.Second, func() bool { return s.h.Open() == 0 })
}

// TestStreamsPerUserAreCapped: max_per_user open streams, then 429 for
// that user only; a stream that ends frees its place.
func TestStreamsPerUserAreCapped(t *testing.T) {
	s := newStreamRig(t, edge.StreamConfig{MaxPerUser: 2, Heartbeat: 50 * time.Millisecond, MaxWait: time.Minute}, 5*time.Second, true)
	s.queue(t, "1-1001-1", 7)
	s.queue(t, "1-1001-2", 8)
	first := s.open(t, "1-1001-1", 7)
	first.next(t, "data: ", time.Second)
	second := s.open(t, "1-1001-1", 7)
	second.next(t, "data: ", time.Second)
	if st := s.open(t, "1-1001-1", 7); st.resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("third stream of one user: %d, want 429", st.resp.StatusCode)
	}
	if st := s.open(t, "1-1001-2", 8); st.resp.StatusCode != 200 {
		t.Fatalf("another user's stream: %d", st.resp.StatusCode)
	}
	// Refused or not found streams hold no place.
	if st := s.open(t, "1-1001-2", 7); st.resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("capped user asking for a foreign ticket: %d", st.resp.StatusCode)
	}
	first.resp.Body.Close()
	waitFor(t, "a place to free up", 3*time.Second, func() bool { return s.h.Open() == 2 })
	if st := s.open(t, "1-1001-1", 7); st.resp.StatusCode != 200 {
		t.Fatalf("after one stream ended: %d", st.resp.StatusCode)
	}
}

// TestPushedResultsCostNoPolling: ten queuing streams cost Redis nothing
// while they wait (no command at all in half a second: they do not poll),
// and a result write reaches them by one PUBLISH; each stream then reads
// its result once. (Before: every stream read its result every 100ms:
// ~50 HGETALLs in that half second.)
func TestPushedResultsCostNoPolling(t *testing.T) {
	s := newStreamRig(t, edge.StreamConfig{Heartbeat: time.Minute, MaxWait: time.Minute}, 5*time.Second, true)
	const n = 10
	var sts []*stream
	var es []results.Entry
	for i := range n {
		rn := "1-1001-" + strconv.Itoa(200+i)
		es = append(es, s.queue(t, rn, int64(200+i)))
		st := s.open(t, rn, int64(200+i))
		st.next(t, "data: ", time.Second)
		sts = append(sts, st)
	}
	rc := s.redis.Client(t)
	before := testenv.CommandStats(t, rc)
	time.Sleep(500 * time.Millisecond)
	if idle := testenv.CommandStats(t, rc).Since(before); len(idle) != 0 {
		t.Fatalf("waiting streams ran %v", idle)
	}
	for i := range es {
		es[i].State, es[i].OrderNo = sale.ResultSuccess, "O"+es[i].RequestNo
	}
	before = testenv.CommandStats(t, rc)
	if err := s.res.Write(context.Background(), es...); err != nil {
		t.Fatal(err)
	}
	for i, st := range sts {
		if l := st.next(t, "data: ", time.Second); !strings.Contains(l, `"SUCCESS"`) || !strings.Contains(l, es[i].RequestNo) {
			t.Fatalf("stream %d: %q", i, l)
		}
	}
	waitFor(t, "the streams to end", time.Second, func() bool { return s.h.Open() == 0 })
	got := testenv.CommandStats(t, rc).Since(before)
	// The write: one HSET and one EXPIRE of the SKU's results hash, the
	// PUBLISH; each stream then reads its own result once (its field, the
	// buyer's record and whether it is claimed, in one round trip).
	want := testenv.Commands{"hset": 1, "expire": 1, "publish": 1, "hget": 2 * n, "sismember": n}
	if len(got) != len(want) {
		t.Fatalf("commands %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("commands %v, want %v", got, want)
		}
	}
}

// A panic in a stream's writer (here the database fallback, asked on the
// stream's second read) closes that stream only: it is counted, the
// stream's slot is given back, and the process serves the next stream.
// (Before: the writer's goroutine had no recover and the panic ended the
// process.)
func TestAPanickingStreamClosesThatStreamOnly(t *testing.T) {
	s := newStreamRig(t, edge.StreamConfig{Heartbeat: time.Minute, MaxWait: 10 * time.Second, Recheck: 20 * time.Millisecond}, 5*time.Second, false)
	var calls atomic.Int64
	s.h.fallback = func(_ context.Context, _ int64, rn string) (results.Entry, error) {
		if rn == "1-1001-666" && calls.Add(1) > 1 {
			panic("fallback bug")
		}
		return results.Entry{RequestNo: rn, Activity: 1, SKU: 1001, Owner: 7, State: sale.ResultQueuing}, nil
	}
	s.h.fallbackPoll = 0
	s.h.Log = zaptest.NewLogger(t)
	st := s.open(t, "1-1001-666", 7)
	if st.resp.StatusCode != 200 {
		t.Fatalf("stream: %d", st.resp.StatusCode)
	}
	if l := st.next(t, "data: ", time.Second); !strings.Contains(l, "QUEUING") {
		t.Fatalf("first event %q", l)
	}
	if l := st.next(t, "data: ", 2*time.Second); l != "" {
		t.Fatalf("the panicked stream went on: %q", l)
	}
	waitFor(t, "the stream's slot to be given back", time.Second, func() bool { return s.h.Open() == 0 })
	if n := s.h.Panics(); n != 1 {
		t.Fatalf("panics counted %d, want 1", n)
	}
	other := s.open(t, "1-1001-667", 7)
	if other.resp.StatusCode != 200 {
		t.Fatalf("the next stream: %d", other.resp.StatusCode)
	}
	if l := other.next(t, "data: ", time.Second); !strings.Contains(l, "QUEUING") {
		t.Fatalf("the next stream's first event %q", l)
	}
}

// TestStreamFollowsAWaitingTicket: a WAITING ticket's stream tells its
// place in line and stays open while the place changes, then goes on to
// QUEUING and SUCCESS. (Before, a stream ended at its first event unless
// it was QUEUING.)
func TestStreamFollowsAWaitingTicket(t *testing.T) {
	s := newStreamRig(t, edge.StreamConfig{Heartbeat: time.Second, Recheck: 50 * time.Millisecond, WriteTimeout: time.Second, MaxWait: 10 * time.Second}, time.Second, true)
	var ahead atomic.Int64
	ahead.Store(12345)
	s.h.Position = func(code string) (int64, time.Duration, bool) {
		if code != "0:99" {
			return 0, -1, false
		}
		n := ahead.Load()
		return n, time.Duration(n) * time.Millisecond, true
	}
	e := results.Entry{RequestNo: "1-1001-43", Activity: 1, SKU: 1001, Owner: 7, State: sale.ResultWaiting, Code: "0:99"}
	if err := s.res.Write(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	st := s.open(t, "1-1001-43", 7)
	if l := st.next(t, "data: ", time.Second); !strings.Contains(l, `"WAITING"`) || !strings.Contains(l, `"position":12345`) || !strings.Contains(l, `"etaMs":12345`) {
		t.Fatalf("first event %q", l)
	}
	ahead.Store(10)
	if l := st.next(t, "data: ", 2*time.Second); !strings.Contains(l, `"position":10,`) {
		t.Fatalf("after the line moved: %q", l)
	}
	e.State, e.Code = sale.ResultQueuing, ""
	if err := s.res.Write(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	if l := st.next(t, "data: ", 2*time.Second); !strings.Contains(l, `"QUEUING"`) || strings.Contains(l, "position") {
		t.Fatalf("after the drain: %q", l)
	}
	e.State, e.OrderNo = sale.ResultSuccess, "O43"
	if err := s.res.Write(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	if l := st.next(t, "data: ", 2*time.Second); !strings.Contains(l, `"SUCCESS"`) {
		t.Fatalf("the end: %q", l)
	}
}
