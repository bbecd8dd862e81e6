package testenv

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"
)

// Messages are what a test's subscription to one pub/sub channel received.
type Messages struct{ ch chan string }

// Subscribe subscribes to channel on rdb and returns once the subscription
// is confirmed; it ends with the test.
func Subscribe(t testing.TB, rdb rueidis.Client, channel string) *Messages {
	t.Helper()
	m := &Messages{ch: make(chan string, 256)}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan struct{})
	var once sync.Once
	done := make(chan struct{})
	go func() {
		defer close(done)
		hctx := rueidis.WithOnSubscriptionHook(ctx, func(rueidis.PubSubSubscription) { once.Do(func() { close(ready) }) })
		_ = rdb.Receive(hctx, rdb.B().Subscribe().Channel(channel).Build(), func(msg rueidis.PubSubMessage) {
			select {
			case m.ch <- msg.Message:
			default: // a test that never reads must not block rueidis
			}
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
	select {
	case <-ready:
	case <-time.After(5 * time.Second):
		t.Fatalf("no subscription to %s", channel)
	}
	return m
}

// Want waits up to 5s for a message that starts with prefix, skipping
// others, and returns it.
func (m *Messages) Want(t testing.TB, prefix string) string {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case msg := <-m.ch:
			if strings.HasPrefix(msg, prefix) {
				return msg
			}
		case <-deadline:
			t.Fatalf("no message starting %q", prefix)
			return ""
		}
	}
}
