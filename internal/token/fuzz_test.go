package token

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"
)

func rawURL(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

// FuzzParse feeds arbitrary strings to the token parser: it must never
// panic, and whatever it accepts must re-encode to the same payload.
func FuzzParse(f *testing.F) {
	tk, _ := New(Config{Keys: []Key{k1}, TTL: time.Minute}, nil)
	good, _, _ := tk.Issue(7, 7001, 42, time.Unix(1700000000, 0))
	f.Add(good)
	f.Add("")
	f.Add(".")
	f.Add("a.b")
	f.Add(rawURL("v1|k1|1|2|3|4|n") + "." + rawURL("short"))
	f.Fuzz(func(t *testing.T, s string) {
		c, p, sig, err := parse(s)
		if err != nil {
			return
		}
		if payload(c) != p || len(sig) != 32 {
			t.Fatalf("accepted %q with payload %q", s, p)
		}
		if c.Activity <= 0 || c.SKU <= 0 || c.User <= 0 {
			t.Fatalf("accepted non-positive ids: %+v", c)
		}
		// Only the one spelling Issue makes of these claims carries a good
		// signature: anything else the parser takes is refused by the key.
		if c2, err := tk.Parse(s); err == nil && s != tk.sign(k1, c2) {
			t.Fatalf("accepted %q, which is not the signed spelling of %+v", s, c2)
		}
	})
}

// FuzzIssuedTokenVerifies goes the other way: a token minted for fuzzed
// claims must be accepted — by its key alone and beside a newer key, as
// during a rotation — exactly for its user, activity and SKU until its
// expiry, and refused once any single character of it is changed, whether
// in the signed payload or in the signature.
func FuzzIssuedTokenVerifies(f *testing.F) {
	f.Add(int64(7), int64(7001), int64(42), int64(1700000000), int64(300), uint16(0), byte('A'))
	f.Add(int64(1), int64(1), int64(1), int64(0), int64(1), uint16(9), byte('.'))
	f.Add(int64(9223372036854775807), int64(9223372036854775807), int64(9223372036854775807),
		int64(4102444799), int64(86400), uint16(500), byte('_'))
	f.Add(int64(123456789012), int64(2001), int64(385465232614494208), int64(1767225600), int64(59), uint16(77), byte(0))
	f.Fuzz(func(t *testing.T, activity, sku, user, nowSec, ttlSec int64, pos uint16, b byte) {
		if activity <= 0 || sku <= 0 || user <= 0 {
			return // ids are positive: the edge never asks for another token
		}
		const maxTTL = 10 * 365 * 24 * 3600
		ttl := time.Duration(1+uint64(ttlSec)%maxTTL) * time.Second
		now := time.Unix(int64(uint64(nowSec)%4102444800), 0) // up to 2100
		issuer, err := New(Config{Keys: []Key{k1}, TTL: ttl}, nil)
		if err != nil {
			t.Fatal(err)
		}
		rotated, err := New(Config{Keys: []Key{k2, k1}, TTL: ttl}, nil)
		if err != nil {
			t.Fatal(err)
		}
		s, exp, err := issuer.Issue(activity, sku, user, now)
		if err != nil {
			t.Fatal(err)
		}
		if !exp.Equal(now.Add(ttl)) {
			t.Fatalf("expiry %v, want %v", exp, now.Add(ttl))
		}
		for _, v := range []*Tokens{issuer, rotated} {
			c, err := v.Check(s, activity, sku, user, now)
			if err != nil {
				t.Fatalf("a token issued for %d/%d/%d at %v (ttl %v) is refused: %v", activity, sku, user, now, ttl, err)
			}
			if c.Activity != activity || c.SKU != sku || c.User != user || !c.ExpireAt.Equal(exp) || c.KeyID != k1.ID {
				t.Fatalf("claims %+v, want %d/%d/%d until %v", c, activity, sku, user, exp)
			}
			if _, err := v.Check(s, activity, sku, user, exp.Add(-time.Second)); err != nil {
				t.Fatalf("refused in its last second: %v", err)
			}
			if _, err := v.Check(s, activity, sku, user, exp); !errors.Is(err, ErrExpired) {
				t.Fatalf("at its expiry: %v, want ErrExpired", err)
			}
			if _, err := v.Check(s, activity, sku, user^1, now); !errors.Is(err, ErrMismatch) {
				t.Fatalf("for another user: %v, want ErrMismatch", err)
			}
		}
		// One edit anywhere the fuzzer says, and one on each side of the
		// dot at the same offset: payload and signature.
		dot := strings.IndexByte(s, '.')
		for _, i := range []int{int(pos) % len(s), int(pos) % dot, dot + 1 + int(pos)%(len(s)-dot-1)} {
			e := []byte(s)
			if e[i] = b; e[i] == s[i] {
				e[i] = s[i] ^ 1 // the fuzzer picked the same byte: change it anyway
			}
			if c, err := issuer.Check(string(e), activity, sku, user, now); err == nil {
				t.Fatalf("a token with byte %d changed (%q -> %q) is accepted: %+v", i, s[i], e[i], c)
			}
		}
	})
}
