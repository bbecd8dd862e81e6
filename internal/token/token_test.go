package token

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"seckill/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func newTokens(t *testing.T, keys ...Key) *Tokens {
	t.Helper()
	r := testenv.StartRedis(t)
	tk, err := New(Config{Keys: keys, TTL: time.Minute}, r.Client(t))
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

var (
	k1 = Key{ID: "k1", Secret: "0123456789abcdef-one"}
	k2 = Key{ID: "k2", Secret: "0123456789abcdef-two"}
)

func TestVerify(t *testing.T) {
	tk := newTokens(t, k1)
	ctx := context.Background()
	now := time.Now()
	fresh := func() string {
		s, _, err := tk.Issue(7, 7001, 42, now)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	forged := func() string {
		other := newTokens(t, Key{ID: "k1", Secret: "another-secret-entirely"})
		s, _, _ := other.Issue(7, 7001, 42, now)
		return s
	}()
	tampered := func() string {
		s := fresh()
		c, _, sig, _ := parse(s)
		c.User = 43
		return rawURL(payload(c)) + "." + rawURL(string(sig))
	}()
	tests := []struct {
		name          string
		token         string
		act, sku, usr int64
		at            time.Time
		want          error
	}{
		{"a fresh token of the right user and sku passes", fresh(), 7, 7001, 42, now, nil},
		{"a token signed with an unknown secret is forged", forged, 7, 7001, 42, now, ErrSignature},
		{"a token whose claims were edited fails the signature", tampered, 7, 7001, 43, now, ErrSignature},
		{"an expired token is refused", fresh(), 7, 7001, 42, now.Add(2 * time.Minute), ErrExpired},
		{"another user's token is refused", fresh(), 7, 7001, 43, now, ErrMismatch},
		{"a token for another sku is refused", fresh(), 7, 7002, 42, now, ErrMismatch},
		{"a token for another activity is refused", fresh(), 8, 7001, 42, now, ErrMismatch},
		{"another spelling of a good token is malformed", respelled(fresh()), 7, 7001, 42, now, ErrMalformed},
		{"garbage is malformed", "not-a-token", 7, 7001, 42, now, ErrMalformed},
		{"an empty token is malformed", "", 7, 7001, 42, now, ErrMalformed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Check judges the same without spending: it runs first and
			// twice, and Verify must still accept a good token afterwards.
			for range 2 {
				if _, err := tk.Check(tc.token, tc.act, tc.sku, tc.usr, tc.at); !errors.Is(err, tc.want) && !(err == nil && tc.want == nil) {
					t.Fatalf("Check: got %v, want %v", err, tc.want)
				}
			}
			_, err := tk.Verify(ctx, tc.token, tc.act, tc.sku, tc.usr, tc.at)
			if !errors.Is(err, tc.want) && !(err == nil && tc.want == nil) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

func TestReplayIsRefused(t *testing.T) {
	tk := newTokens(t, k1)
	ctx := context.Background()
	now := time.Now()
	s, exp, _ := tk.Issue(7, 7001, 42, now)
	if !exp.After(now) {
		t.Fatalf("expireAt %v not after now", exp)
	}
	if _, err := tk.Verify(ctx, s, 7, 7001, 42, now); err != nil {
		t.Fatal(err)
	}
	if _, err := tk.Verify(ctx, s, 7, 7001, 42, now); !errors.Is(err, ErrReplayed) {
		t.Fatalf("second use: %v, want ErrReplayed", err)
	}
}

// A token given back (the engine was busy) verifies once more, and only
// once; a forged token cannot be given back.
func TestUnspendGivesTheTokenBackOnce(t *testing.T) {
	tk := newTokens(t, k1)
	ctx := context.Background()
	now := time.Now()
	s, _, _ := tk.Issue(7, 7001, 42, now)
	if _, err := tk.Verify(ctx, s, 7, 7001, 42, now); err != nil {
		t.Fatal(err)
	}
	if err := tk.Unspend(ctx, s); err != nil {
		t.Fatal(err)
	}
	if _, err := tk.Verify(ctx, s, 7, 7001, 42, now); err != nil {
		t.Fatalf("after Unspend: %v, want the token good once more", err)
	}
	if _, err := tk.Verify(ctx, s, 7, 7001, 42, now); !errors.Is(err, ErrReplayed) {
		t.Fatalf("third use: %v, want ErrReplayed", err)
	}
	other := newTokens(t, Key{ID: "k1", Secret: "another-secret-entirely"})
	forged, _, _ := other.Issue(7, 7001, 42, now)
	if err := tk.Unspend(ctx, forged); !errors.Is(err, ErrSignature) {
		t.Fatalf("Unspend of a forged token: %v, want ErrSignature", err)
	}
}

func TestRotationKeepsOldTokensValid(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	r := testenv.StartRedis(t)
	old, _ := New(Config{Keys: []Key{k1}, TTL: time.Minute}, r.Client(t))
	s, _, _ := old.Issue(7, 7001, 42, now)
	rotated, _ := New(Config{Keys: []Key{k2, k1}, TTL: time.Minute}, r.Client(t))
	if _, err := rotated.Verify(ctx, s, 7, 7001, 42, now); err != nil {
		t.Fatalf("old-key token after rotation: %v", err)
	}
	s2, _, _ := rotated.Issue(7, 7001, 43, now)
	if c, _ := rotated.Parse(s2); c.KeyID != "k2" {
		t.Fatalf("new tokens must be signed by the first key, got %q", c.KeyID)
	}
	retired, _ := New(Config{Keys: []Key{k2}, TTL: time.Minute}, r.Client(t))
	s3, _, _ := old.Issue(7, 7001, 44, now)
	if _, err := retired.Verify(ctx, s3, 7, 7001, 44, now); !errors.Is(err, ErrSignature) {
		t.Fatalf("token of a retired key: %v, want ErrSignature", err)
	}
}

func TestConfigValidation(t *testing.T) {
	for _, c := range []Config{
		{Keys: []Key{{ID: "a", Secret: "short"}}, TTL: time.Minute},
		{Keys: []Key{k1, k2, {ID: "k3", Secret: strings.Repeat("x", 16)}}, TTL: time.Minute},
		{Keys: []Key{{ID: "a.b", Secret: strings.Repeat("x", 16)}}, TTL: time.Minute},
		{TTL: 0},
	} {
		if err := c.Validate(); err == nil {
			t.Errorf("config %+v should be refused", c)
		}
	}
}

// respelled sets an unused low bit of the token's last character: lenient
// base64 would decode it to the same signature.
func respelled(tok string) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	last := strings.IndexByte(alphabet, tok[len(tok)-1])
	return tok[:len(tok)-1] + string(alphabet[last|1])
}
