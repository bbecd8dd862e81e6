package edge

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"seckill/engine"
	"seckill/sale"
	"seckill/stock/results"
)

// Queue mode at the edge (DESIGN §13). A purchase of a SKU in queue mode
// (sale.ModeQueue) runs the direct path's cheap checks, then is appended
// to the SKU's waiting line instead of occupying: 202 WAITING with the
// ticket, its position in line, an estimated wait and when to poll. The
// position is the attempt's offset (the broker's ack) less how far the
// drainer has drained its partition, which this edge reads from
// sale.DrainedKey every edge.queue_progress (100 ms): no Kafka call per
// answer or poll.

// Queue appends attempts to their SKU's waiting line (engine.Line).
type Queue interface {
	Append(ctx context.Context, r *engine.Request, nowMs int64) (engine.Waiting, error)
}

// WithQueue takes the purchases of SKUs in queue mode into q. Without it
// such a SKU is served direct.
func WithQueue(q Queue) Option {
	return func(s *Server) { s.line = &line{q: q} }
}

// Answers of queue mode.
const (
	msgWaiting        = "waiting in line; poll the result with the requestNo"
	msgAlreadyWaiting = "you already wait in this sku's line"
	msgPrequeued      = "in the pre-queue: everyone in it is served in a random order drawn at the start; poll the result with the requestNo"
	// maxWaitPoll bounds the poll interval a long wait asks for.
	maxWaitPoll = 30 * time.Second
	// queueProgressEvery is how often the drained offsets are read.
	queueProgressEvery = 100 * time.Millisecond
)

// line is the edge's side of the waiting lines.
type line struct {
	q       Queue
	drained atomic.Pointer[map[int32]drained]
}

// drained is one partition's progress as its drainer published it.
type drained struct {
	next   int64
	perSec float64
}

// load reads the drainers' progress.
func (l *line) load(ctx context.Context, s *Server) error {
	m, err := s.rdb.Do(ctx, s.rdb.B().Hgetall().Key(sale.DrainedKey).Build()).AsStrMap()
	if err != nil {
		return err
	}
	out := make(map[int32]drained, len(m))
	for f, v := range m {
		p, err := strconv.ParseInt(f, 10, 32)
		next, perSec, _, ok := sale.ParseDrained(v)
		if err != nil || !ok {
			continue
		}
		out[int32(p)] = drained{next: next, perSec: perSec}
	}
	l.drained.Store(&out)
	return nil
}

// position is how many attempts are ahead of the one at (part, off),
// itself included, and the wait they should take (-1: unknown, nothing
// drained yet).
func (l *line) position(part int32, off int64) (int64, time.Duration) {
	var d drained
	if m := l.drained.Load(); m != nil {
		d = (*m)[part]
	}
	pos := max(off-d.next+1, 0)
	if d.perSec <= 0 {
		return pos, -1
	}
	return pos, time.Duration(float64(pos) / d.perSec * float64(time.Second))
}

// waitPoll is how long a buyer in line should wait before polling: half
// the estimated wait, within the activity's poll interval and maxWaitPoll.
func (s *Server) waitPoll(activity int64, eta time.Duration) time.Duration {
	poll := s.pollAfter(activity)
	if eta/2 > poll {
		poll = min(eta/2, maxWaitPoll)
	}
	return poll
}

// appendWaitFields appends ,"position":N,"etaMs":M (etaMs left out when
// unknown) and the poll field.
func appendWaitFields(b []byte, pos int64, eta, poll time.Duration) []byte {
	b = append(b, `,"position":`...)
	b = strconv.AppendInt(b, pos, 10)
	if eta >= 0 {
		b = append(b, `,"etaMs":`...)
		b = strconv.AppendInt(b, eta.Milliseconds(), 10)
	}
	return appendPollField(b, poll)
}

// enqueue is the queue-mode end of order: the buyer is appended to the
// SKU's line and answered 202 WAITING, 409 naming the ticket they already
// wait with, or 503 BUSY with Retry-After when the line cannot take the
// attempt durably (never a WAITING that is not in the topic).
func (s *Server) enqueue(ctx *fasthttp.RequestCtx, v *view, req *engine.Request, now int64) (engine.Waiting, error) {
	if rn, held := s.hold.held(v.activity, req.SKU.ID, req.UserID, now); held {
		// The engine told this edge the buyer holds a ticket: a place in
		// line could only end DUPLICATE.
		s.out.ticket(ctx, fasthttp.StatusConflict, "DUPLICATE", rn, msgDuplicate)
		return engine.Waiting{}, errHeld
	}
	w, err := s.line.q.Append(s.bgCtx, req, now/int64(time.Millisecond))
	switch {
	case err == nil:
		var buf [256]byte
		var poll time.Duration
		if until := time.Duration(v.start - now); until > 0 {
			// Pre-queued: no place in line until the draw at the start.
			poll = s.prequeuePoll(v.activity, until)
			b := appendBody(buf[:0], sale.ResultWaiting, w.RequestNo, msgPrequeued)
			b = append(appendPrequeueFields(b[:len(b)-1], until, poll), '}')
			ctx.SetBody(b)
		} else {
			pos, eta := s.line.position(w.Partition, w.Offset)
			poll = s.waitPoll(v.activity, eta)
			b := appendBody(buf[:0], sale.ResultWaiting, w.RequestNo, msgWaiting)
			b = append(appendWaitFields(b[:len(b)-1], pos, eta, poll), '}')
			ctx.SetBody(b)
		}
		ctx.SetStatusCode(fasthttp.StatusAccepted)
		ctx.SetContentTypeBytes(contentTypeJSON)
		setRetryAfter(ctx, poll)
		s.m.engineCalls[outcomeQueued].Inc()
	case errors.Is(err, engine.ErrWaiting):
		s.out.ticket(ctx, fasthttp.StatusConflict, sale.ResultWaiting, w.RequestNo, msgAlreadyWaiting)
	case errors.Is(err, engine.ErrBusy):
		s.m.engineCalls[outcomeBusy].Inc()
		s.out.retry(ctx, ansBusy, time.Second)
	default:
		s.answer(ctx, req.SKU.ID, v.activity, engine.Ticket{Remaining: -1}, err, false)
	}
	return w, err
}

// errHeld: enqueue answered from the holders cache.
var errHeld = errors.New("the buyer holds a ticket")

// WaitPosition reads a WAITING result's code, "<partition>:<offset>", as
// the ticket's position in line and its estimated wait (-1: unknown);
// false for a code of another form or an edge without queue mode.
func (s *Server) WaitPosition(code string) (int64, time.Duration, bool) {
	if s.line == nil {
		return 0, -1, false
	}
	ps, os, ok := strings.Cut(code, ":")
	p, err1 := strconv.ParseInt(ps, 10, 32)
	o, err2 := strconv.ParseInt(os, 10, 64)
	if !ok || err1 != nil || err2 != nil || p < 0 || o < 0 {
		return 0, -1, false
	}
	pos, eta := s.line.position(int32(p), o)
	return pos, eta, true
}

// appendWaitingResult appends the body of a result still WAITING: its position from the
// code "<partition>:<offset>" the edge wrote.
func (s *Server) appendWaitingResult(b []byte, e *results.Entry) ([]byte, time.Duration) {
	head := func(msg string) []byte {
		b = appendJSONString(b, sale.ResultWaiting)
		b = append(b, `,"requestNo":`...)
		b = appendJSONString(b, e.RequestNo)
		b = append(b, `,"message":`...)
		return appendJSONString(b, msg)
	}
	if a, ok := s.views.cat.Activity(e.Activity); ok && a.Prequeue > 0 {
		if until := time.Duration(a.Start.UnixNano() - s.clock.now()); until > 0 {
			// Pre-queued: no place in line until the draw at the start.
			poll := s.prequeuePoll(e.Activity, until)
			return appendPrequeueFields(head(msgPrequeued), until, poll), poll
		}
	}
	pos, eta, known := s.WaitPosition(e.Code)
	poll := s.waitPoll(e.Activity, eta)
	b = head(msgWaiting)
	if known {
		return appendWaitFields(b, pos, eta, poll), poll
	}
	return appendPollField(b, poll), poll
}

// prequeueOpen reports whether the purchase of v's SKU at (edge time) at,
// before the start, is taken into its line's pre-queue: a SKU in queue
// mode whose activity's line has opened.
func (s *Server) prequeueOpen(v *view, at int64) bool {
	return s.line != nil && v.sku.Queued() && v.lineOpens < v.start && at >= v.lineOpens
}

// prequeuePoll is how long a pre-queued buyer should wait before polling:
// until the start (nothing changes before it), within the activity's poll
// interval and maxWaitPoll.
func (s *Server) prequeuePoll(activity int64, until time.Duration) time.Duration {
	return max(s.pollAfter(activity), min(until, maxWaitPoll))
}

// appendPrequeueFields appends ,"prequeued":true,"startsInMs":N and the
// poll field: a pre-queued ticket has no position before the draw.
func appendPrequeueFields(b []byte, until, poll time.Duration) []byte {
	b = append(b, `,"prequeued":true,"startsInMs":`...)
	b = strconv.AppendInt(b, until.Milliseconds(), 10)
	return appendPollField(b, poll)
}
