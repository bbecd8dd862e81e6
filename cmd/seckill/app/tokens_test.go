package app

import (
	"context"
	"errors"
	"testing"
	"time"

	"seckill/edge"
	"seckill/internal/testenv"
	"seckill/internal/token"
	"seckill/sale"
)

// The adapter sorts token.Tokens' answers into the edge's two kinds: a
// token that is not good is refused (403), a token store that cannot answer
// is unavailable (503) — never the engine's busy, never a refusal.
func TestTokenVerifierSortsRefusalsFromOutages(t *testing.T) {
	r := testenv.StartRedis(t)
	key := token.Key{ID: "k1", Secret: "0123456789abcdef-adapter"}
	tk, err := token.New(token.Config{Keys: []token.Key{key}, TTL: time.Minute}, r.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	v := tokenVerifier{tk}
	a := &sale.Activity{ID: 7}
	now := time.Now()
	ctx := context.Background()
	good, _, _ := tk.Issue(7, 7001, 42, now)
	other, _ := token.New(token.Config{Keys: []token.Key{{ID: "k1", Secret: "not-the-same-secret-at-all"}}, TTL: time.Minute}, nil)
	forged, _, _ := other.Issue(7, 7001, 42, now)

	if err := v.Check([]byte(good), 42, a, 7001, now); err != nil {
		t.Fatalf("check of a good token: %v", err)
	}
	for _, c := range []struct {
		name string
		err  error
		want error
	}{
		{"check of a forged token", v.Check([]byte(forged), 42, a, 7001, now), token.ErrSignature},
		{"check of another user's token", v.Check([]byte(good), 43, a, 7001, now), token.ErrMismatch},
		{"verify of a forged token", v.Verify(ctx, []byte(forged), 42, a, 7001, now), token.ErrSignature},
	} {
		if !errors.Is(c.err, edge.ErrTokenRefused) || !errors.Is(c.err, c.want) || errors.Is(c.err, edge.ErrTokenUnavailable) {
			t.Errorf("%s: %v, want a refusal wrapping %v", c.name, c.err, c.want)
		}
	}

	if err := v.Verify(ctx, []byte(good), 42, a, 7001, now); err != nil {
		t.Fatalf("verify of a good token: %v", err)
	}
	if err := v.Verify(ctx, []byte(good), 42, a, 7001, now); !errors.Is(err, edge.ErrTokenRefused) || !errors.Is(err, token.ErrReplayed) {
		t.Fatalf("a replay: %v, want a refusal (replayed)", err)
	}
	// The engine answered busy: the token is given back and good again.
	v.Refund(ctx, []byte(good))
	if err := v.Verify(ctx, []byte(good), 42, a, 7001, now); err != nil {
		t.Fatalf("verify after a refund: %v", err)
	}

	again, _, _ := tk.Issue(7, 7001, 42, now)
	r.Stop()
	err = v.Verify(ctx, []byte(again), 42, a, 7001, now)
	if !errors.Is(err, edge.ErrTokenUnavailable) || errors.Is(err, edge.ErrTokenRefused) {
		t.Fatalf("verify with Redis down: %v, want unavailable, not refused", err)
	}
}
