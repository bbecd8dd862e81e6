package token

import (
	"context"
	"errors"
	"testing"
	"time"

	"seckill/internal/shard"
	"seckill/internal/testenv"
)

// TestVerifyWhileRedisLoads: Redis restarted and is loading its dataset.
// Verify then neither accepts the token nor refuses it as used or forged:
// it returns Redis' LOADING answer (the edge answers 503 BUSY, fail closed)
// and does not spend the token, which verifies once Redis has loaded — and
// only once.
func TestVerifyWhileRedisLoads(t *testing.T) {
	r := testenv.StartRedis(t)
	tk, err := New(Config{Keys: []Key{k1}, TTL: time.Minute}, r.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tok, _, err := tk.Issue(7, 7001, 42, now)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	r.Fill(t, 20000, 64)
	if err := r.RestartLoading(3 * time.Second); err != nil {
		t.Fatal(err)
	}
	// The first calls may meet the connections the restart broke (EOF).
	for i := 0; ; i++ {
		_, err := tk.Verify(ctx, tok, 7, 7001, 42, now)
		if err == nil {
			t.Fatal("a token verified while Redis was loading")
		}
		for _, rej := range []error{ErrMalformed, ErrSignature, ErrExpired, ErrMismatch, ErrReplayed} {
			if errors.Is(err, rej) {
				t.Fatalf("Verify while Redis loads: %v, a rejection; want Redis' error", err)
			}
		}
		if shard.IsLoading(err) {
			break
		}
		if i == 10 {
			t.Fatalf("Verify while Redis loads: %v, never LOADING", err)
		}
	}
	if l, err := r.Loading(); err != nil || !l {
		t.Fatalf("loading ended before the check (%v): the test needs a longer load", err)
	}
	if err := r.WaitLoaded(60 * time.Second); err != nil {
		t.Fatal(err)
	}
	var verr error
	for i := 0; i < 10; i++ {
		if _, verr = tk.Verify(ctx, tok, 7, 7001, 42, now); verr == nil || errors.Is(verr, ErrReplayed) {
			break
		}
	}
	if verr != nil {
		t.Fatalf("Verify after loading: %v, want the unspent token accepted", verr)
	}
	if _, err := tk.Verify(ctx, tok, 7, 7001, 42, now); !errors.Is(err, ErrReplayed) {
		t.Fatalf("a second Verify: %v, want ErrReplayed", err)
	}
}
