package token

import (
	"encoding/base64"
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
		_, _ = tk.Parse(s)
	})
}
