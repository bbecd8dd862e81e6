package edge

import (
	"context"
	"time"

	"github.com/redis/rueidis"
	"go.uber.org/zap"

	"seckill/internal/sale"
)

// soldOutFlag is a local sold-out flag. It counts only while its epoch is
// the server's: every re-subscription to the events channel bumps the
// epoch, dropping flags whose "available" event may have been missed while
// the subscription was down.
type soldOutFlag struct {
	epoch    uint64
	activity int64 // the activity it was raised for; 0: any
}

// soldOut reports a live local sold-out flag for sku in activity.
// No allocation.
func (s *Server) soldOut(sku, activity int64) bool {
	f, ok := s.flags.Get(sku)
	return ok && f.epoch == s.epoch.Load() && (f.activity == 0 || f.activity == activity)
}

// setSoldOut raises (or refreshes) the flag for SoldOutTTL: the fallback
// that bounds a flag whose "available" event never arrives. The set is
// buffered by ristretto and visible a moment later.
func (s *Server) setSoldOut(sku, activity int64) {
	s.flags.SetWithTTL(sku, soldOutFlag{epoch: s.epoch.Load(), activity: activity}, 1, s.cfg.SoldOutTTL)
	// ristretto applies the Set of a new key from a buffer, later: wait
	// for it, so the flag holds for the next request already and a Del
	// that follows (an available event) cannot be overtaken by it.
	s.flags.Wait()
	if s.stockCheck != nil {
		s.flagged.raise(sku, activity)
	}
}

// HandleEvent applies an event at once: soldout raises the SKU's flag (and
// tells the admission gate nothing is left), available drops it (the gate
// forgets the remaining stock until the engine's next answer), activity
// reloads the catalog, blocklist re-reads the blocklist. The in-process engine
// calls it directly (engine.WithEventHook) so the edge in the same process
// need not wait for the pub/sub round trip; the same events also arrive by
// pub/sub, and applying one twice is harmless. It does not block on I/O and
// is safe for concurrent use, also after Shutdown (then it does nothing).
func (s *Server) HandleEvent(e sale.Event) {
	s.evMu.RLock()
	defer s.evMu.RUnlock()
	if s.closed {
		return
	}
	if e.SKU <= 0 && (e.Kind == sale.EventSoldOut || e.Kind == sale.EventAvailable) {
		return
	}
	switch e.Kind {
	case sale.EventSoldOut:
		s.setSoldOut(e.SKU, e.Activity)
		s.gate.Observe(e.SKU, 0)
		s.observePropagation(e)
	case sale.EventAvailable:
		// Del is immediate, but a Set of the same key still in
		// ristretto's buffer would land after it and raise the flag again
		// until the buffered delete follows: delete, let the buffer
		// drain, delete again, so a flag never outlives the stock coming
		// back.
		s.flagged.drop(e.SKU)
		s.flags.Del(e.SKU)
		s.gate.Observe(e.SKU, -1)
		s.observePropagation(e) // when the flag first drops
		s.flags.Wait()
		s.flags.Del(e.SKU)
	case sale.EventBlocklist:
		s.reloadBlocklist()
	case sale.EventActivity:
		// In-process, the catalog object is shared and already updated;
		// the generation bump drops cached views now, the load catches up
		// with other writers.
		s.gen.Add(1)
		s.triggerLoad()
	}
}

func (s *Server) observePropagation(e sale.Event) {
	if e.At <= 0 {
		return
	}
	d := time.Now().UnixNano() - e.At
	if d < 0 { // sender's clock ahead of ours
		d = 0
	}
	s.m.propagation.Observe(time.Duration(d).Seconds())
}

// triggerLoad asks the loader for a catalog load now; requests coalesce.
func (s *Server) triggerLoad() {
	select {
	case s.loadCh <- struct{}{}:
	default:
	}
}

// subscribe keeps a subscription to sale.EventsChannel until ctx ends,
// re-subscribing by itself after any failure with a capped backoff.
func (s *Server) subscribe(ctx context.Context) {
	defer s.wg.Done()
	const minBackoff, maxBackoff = 50 * time.Millisecond, 2 * time.Second
	backoff := minBackoff
	// The hook runs on rueidis' pipeline goroutine for every subscribe
	// confirmation, including the client's own re-subscriptions after a
	// reconnect: no blocking work here.
	hctx := rueidis.WithOnSubscriptionHook(ctx, func(sub rueidis.PubSubSubscription) {
		if sub.Kind != "subscribe" {
			if sub.Kind == "unsubscribe" {
				s.subscribed.Store(false)
			}
			return
		}
		if s.subscribedOnce.Swap(true) {
			// Events may have been missed while we were away.
			s.epoch.Add(1)
			s.gen.Add(1)
			s.triggerLoad()
			s.reloadBlocklist()
		}
		s.subscribed.Store(true)
	})
	cmd := s.rdb.B().Subscribe().Channel(sale.EventsChannel).Build()
	for {
		start := time.Now()
		err := s.rdb.Receive(hctx, cmd, s.onMessage)
		s.subscribed.Store(false)
		if ctx.Err() != nil {
			return
		}
		if time.Since(start) > maxBackoff {
			backoff = minBackoff
		}
		s.log.Warn("edge events subscription lost; re-subscribing", zap.String("channel", sale.EventsChannel), zap.Duration("backoff", backoff), zap.Error(err))
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

func (s *Server) onMessage(msg rueidis.PubSubMessage) {
	e, err := sale.ParseEvent(msg.Message)
	if err != nil {
		s.log.Warn("edge ignores a malformed event", zap.String("channel", msg.Channel), zap.Error(err))
		return
	}
	s.HandleEvent(e)
}

// poll runs step (bounded by RedisTimeout) every interval and whenever
// kick fires (nil: never), until ctx ends; first says whether it runs once
// at the start too. A failure is logged once per outage, as failed, and its
// end once, as recovered: the part keeps serving from its last good state
// meanwhile.
func (s *Server) poll(ctx context.Context, every time.Duration, kick <-chan struct{}, first bool, failed, recovered string,
	step func(context.Context) error) {
	defer s.wg.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	failing := false
	for {
		if first {
			sctx, cancel := context.WithTimeout(ctx, s.cfg.RedisTimeout)
			err := step(sctx)
			cancel()
			switch {
			case err == nil:
				if failing {
					s.log.Info(recovered)
				}
				failing = false
			case ctx.Err() != nil:
				return
			case !failing:
				s.log.Warn(failed, zap.Error(err))
				failing = true
			}
		}
		first = true
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-kick:
		}
	}
}

// loadCatalog is the catalog refresh's step: a fresh snapshot also drops
// the views cached on the old one.
func (s *Server) loadCatalog(ctx context.Context) error {
	if err := s.cat.Load(ctx); err != nil {
		return err
	}
	s.gen.Add(1)
	return nil
}
