package web

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/rueidis"
	"go.uber.org/zap"

	"seckill/stock/results"
)

// ResultHub is a process's one subscription to results.Channel, fanned out
// to the result streams it serves: a stream waits on its ticket's channel
// instead of polling Redis, and reads the result once when the writer of
// results (the consumer, the engine's compensation) says it is final. Safe
// for concurrent use.
type ResultHub struct {
	rdb rueidis.Client
	log *zap.Logger

	mu      sync.Mutex
	waiters map[string]map[chan struct{}]struct{}

	subscribed     atomic.Bool
	subscribedOnce atomic.Bool
}

// NewResultHub returns a hub on rdb (the default Redis, where
// results.Store publishes the final results; the results themselves live on
// their SKU's shard); Run keeps its subscription.
func NewResultHub(rdb rueidis.Client, log *zap.Logger) *ResultHub {
	if log == nil {
		log = zap.NewNop()
	}
	return &ResultHub{rdb: rdb, log: log, waiters: map[string]map[chan struct{}]struct{}{}}
}

// Subscribed reports whether the subscription is live.
func (h *ResultHub) Subscribed() bool { return h.subscribed.Load() }

// Run keeps the subscription until ctx ends, re-subscribing after any
// failure with a capped backoff. After a re-subscription every waiting
// stream is woken to read once: notifications may have been missed.
func (h *ResultHub) Run(ctx context.Context) {
	const minBackoff, maxBackoff = 50 * time.Millisecond, 2 * time.Second
	backoff := minBackoff
	hctx := rueidis.WithOnSubscriptionHook(ctx, func(sub rueidis.PubSubSubscription) {
		switch sub.Kind {
		case "subscribe":
			h.subscribed.Store(true)
			if h.subscribedOnce.Swap(true) {
				h.wakeAll()
			}
		case "unsubscribe":
			h.subscribed.Store(false)
		}
	})
	cmd := h.rdb.B().Subscribe().Channel(results.Channel).Build()
	for {
		start := time.Now()
		err := h.rdb.Receive(hctx, cmd, h.onMessage)
		h.subscribed.Store(false)
		if ctx.Err() != nil {
			return
		}
		if time.Since(start) > maxBackoff {
			backoff = minBackoff
		}
		h.log.Warn("result stream subscription lost; re-subscribing", zap.String("channel", results.Channel),
			zap.Duration("backoff", backoff), zap.Error(err))
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

func (h *ResultHub) onMessage(msg rueidis.PubSubMessage) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, rn := range strings.Fields(msg.Message) {
		for ch := range h.waiters[rn] {
			wake(ch)
		}
	}
}

func (h *ResultHub) wakeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, chs := range h.waiters {
		for ch := range chs {
			wake(ch)
		}
	}
}

// wake never blocks: one pending wake-up is as good as many.
func wake(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// watch registers a stream of ticket rn; stop unregisters it.
func (h *ResultHub) watch(rn string) (ch chan struct{}, stop func()) {
	ch = make(chan struct{}, 1)
	h.mu.Lock()
	m := h.waiters[rn]
	if m == nil {
		m = map[chan struct{}]struct{}{}
		h.waiters[rn] = m
	}
	m[ch] = struct{}{}
	h.mu.Unlock()
	return ch, func() {
		h.mu.Lock()
		delete(m, ch)
		if len(m) == 0 {
			delete(h.waiters, rn)
		}
		h.mu.Unlock()
	}
}
