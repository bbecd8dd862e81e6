package edge

import (
	"context"
	"time"

	"github.com/redis/rueidis"
	"go.uber.org/zap"

	"seckill/sale"
)

// HandleEvent applies an event at once: soldout raises the SKU's flag (and
// tells the admission gate nothing is left), available drops it (the gate
// forgets the remaining stock until the engine's next answer), activity
// reloads the catalog, blocklist re-reads the blocklist, routes the route
// switches. The stock ledger in
// the same process calls it directly (the ledger's event hook, wired by
// cmd/seckill/app) so the edge need not wait for the pub/sub round trip; the same events also arrive by
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
		s.flags.raise(e.SKU, e.Activity)
		s.admit.observe(e.SKU, 0)
		s.observePropagation(e)
	case sale.EventAvailable:
		s.flags.drop(e.SKU)
		s.admit.observe(e.SKU, -1)
		s.observePropagation(e)
	case sale.EventBlocklist:
		s.admit.block.reload()
	case sale.EventRoutes:
		s.routeSw.reload()
	case sale.EventActivity:
		// In-process, the catalog object is shared and already updated;
		// dropping the cached views takes effect now, the load catches up
		// with other writers.
		s.views.invalidate()
		s.views.triggerLoad()
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
			s.flags.newEpoch()
			s.views.invalidate()
			s.views.triggerLoad()
			s.admit.block.reload()
			s.routeSw.reload()
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
