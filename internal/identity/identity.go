// Package identity decides who a request is: the one check every route
// that reads X-User-Id runs (the edge's purchase, submit, token and result
// routes, the result stream, my orders, pay). The edge sits behind a
// gateway that has authenticated the buyer; how far the edge believes the
// gateway's X-User-Id is the mode (edge.identity):
//
//   - any: any peer's X-User-Id (dev and bench only);
//   - trusted_proxies: only from a TCP peer inside edge.trusted_proxies;
//     anyone else 401;
//   - signed: the gateway signs the request with a shared key,
//     HMAC-SHA256 over
//     "v2|<METHOD>|<request-target>|<hex SHA-256 of the body>|<userId>|<ts>"
//     (the request-target exactly as sent: path and query; the body
//     digest of the bytes sent, the empty body's digest when there is
//     none), sent as X-User-Id, X-User-Ts and X-User-Sig: <keyid>:<hex>.
//     A signature is good for that one method, target and body, from ts
//     until ts + skew (a clock up to FutureSkew ahead passes). A
//     missing, stale or wrong signature, or an unknown key id, is 401.
//     Keys rotate like token keys: the first signs, every listed key
//     verifies.
//
// In every mode the id itself is 1 to 18 decimal digits, positive
// (ParseUserID), and a request with more than one X-User-Id header is
// 400. Verification does not allocate (pooled HMAC states).
package identity

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"net/netip"
	"seckill/internal/keyring"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fasthttp"
)

// The modes of edge.identity.
const (
	ModeAny            = "any"
	ModeTrustedProxies = "trusted_proxies"
	ModeSigned         = "signed"
)

// The headers a signing gateway sets.
const (
	HeaderUser = "X-User-Id"
	HeaderTs   = "X-User-Ts"
	HeaderSig  = "X-User-Sig"
)

// Result is the outcome of a check. OK is the only one that lets a request
// through; Status and Message are what the buyer is told otherwise.
type Result uint8

const (
	OK        Result = iota
	Missing          // no X-User-Id (401)
	Malformed        // X-User-Id not a positive integer of at most 18 digits (400)
	Doubled          // more than one X-User-Id header (400)
	Untrusted        // trusted_proxies: the peer is not a trusted proxy (401)
	BadSig           // signed: signature or timestamp missing, stale, forged or under an unknown key (401)
	numResults
)

// Status is the HTTP status of a refusal (200 for OK).
func (r Result) Status() int {
	switch r {
	case OK:
		return fasthttp.StatusOK
	case Malformed, Doubled:
		return fasthttp.StatusBadRequest
	}
	return fasthttp.StatusUnauthorized
}

// Code is the answer code of a refusal.
func (r Result) Code() string {
	switch r {
	case OK:
		return "OK"
	case Malformed, Doubled:
		return "BAD_REQUEST"
	}
	return "UNAUTHORIZED"
}

// Message is the answer message of a refusal. It never says which part of
// a signature was wrong.
func (r Result) Message() string {
	switch r {
	case Missing:
		return "X-User-Id header required"
	case Malformed:
		return "X-User-Id must be a positive integer"
	case Doubled:
		return "exactly one X-User-Id header allowed"
	case Untrusted:
		return "X-User-Id accepted only from the gateway"
	case BadSig:
		return "X-User-Id signature missing, stale or invalid"
	}
	return "ok"
}

// Key is one gateway signing key, written "id:secret" in the environment
// (SECKILL_EDGE_IDENTITY_KEYS=g2:<new secret>,g1:<old secret>): the
// project's one key type (internal/keyring).
type Key = keyring.Key

// Config is what a Verifier is built from (the edge section's identity,
// identity_keys, identity_skew and trusted_proxies).
type Config struct {
	Mode    string
	Trusted []netip.Prefix
	Keys    []Key
	Skew    time.Duration
}

// MinSecret is the shortest accepted signing secret.
const MinSecret = 32

// MaxSkew is the longest accepted identity_skew: a signature is a bearer
// credential for its one request until it is this old.
const MaxSkew = 30 * time.Second

// FutureSkew is how far ahead of the edge's clock X-User-Ts may be (a
// gateway whose clock runs a little fast).
const FutureSkew = 2 * time.Second

// Validate names the first bad setting.
func (c *Config) Validate() error { return c.validate(false) }

// Check is Validate plus what the mode needs to run: trusted_proxies its
// proxies, signed its keys. What an edge checks at start; a process that
// runs no edge (engine, consumer) validates the shape only.
func (c *Config) Check() error { return c.validate(true) }

func (c *Config) validate(complete bool) error {
	switch c.Mode {
	case ModeAny:
	case ModeTrustedProxies:
		if complete && len(c.Trusted) == 0 {
			return errors.New("edge.identity trusted_proxies needs edge.trusted_proxies (the gateway's addresses)")
		}
	case ModeSigned:
		if complete && len(c.Keys) == 0 {
			return errors.New("edge.identity signed needs edge.identity_keys (SECKILL_EDGE_IDENTITY_KEYS=id:secret,…)")
		}
		seen := map[string]bool{}
		for i, k := range c.Keys {
			if k.ID == "" || len(k.ID) > 16 || strings.ContainsAny(k.ID, ":, ") {
				return fmt.Errorf("edge.identity_keys[%d].id must be 1-16 characters without ':', ',' or spaces", i)
			}
			if seen[k.ID] {
				return fmt.Errorf("edge.identity_keys[%d].id %q is listed twice", i, k.ID)
			}
			seen[k.ID] = true
			if len(k.Secret) < MinSecret {
				return fmt.Errorf("edge.identity_keys[%d].secret must be at least %d characters", i, MinSecret)
			}
		}
		if c.Skew < time.Second || c.Skew > MaxSkew {
			return errors.New("edge.identity_skew must be 1s to 30s")
		}
	default:
		return fmt.Errorf("edge.identity must be %s, %s or %s", ModeAny, ModeTrustedProxies, ModeSigned)
	}
	return nil
}

// Verifier runs the check. Safe for concurrent use.
type Verifier struct {
	mode    string
	trusted []netip.Prefix
	keys    []verifyKey
	skew    int64 // seconds
	now     func() time.Time
}

type verifyKey struct {
	id   string
	pool *sync.Pool // of *macState
}

// macState is one HMAC state, a body hash and their scratch space:
// pooled, so a check allocates nothing.
type macState struct {
	h      hash.Hash
	body   hash.Hash
	sum    [sha256.Size]byte
	got    [sha256.Size]byte
	digest [2 * sha256.Size]byte
}

// New builds a Verifier; now is the clock (nil: time.Now).
func New(c Config, now func() time.Time) (*Verifier, error) {
	if err := c.Check(); err != nil {
		return nil, err
	}
	if now == nil {
		now = time.Now
	}
	v := &Verifier{mode: c.Mode, trusted: c.Trusted, now: now, skew: int64((c.Skew + time.Second - 1) / time.Second)}
	for _, k := range c.Keys {
		secret := []byte(k.Secret)
		v.keys = append(v.keys, verifyKey{id: k.ID, pool: &sync.Pool{New: func() any {
			return &macState{h: hmac.New(sha256.New, secret), body: sha256.New()}
		}}})
	}
	return v, nil
}

// Mode is the verifier's mode.
func (v *Verifier) Mode() string { return v.mode }

// User is the check: the user id of the request when the result is OK.
// It allocates nothing. A nil Verifier checks as mode any (handlers built
// without one, in tests).
func (v *Verifier) User(ctx *fasthttp.RequestCtx) (int64, Result) {
	all := ctx.Request.Header.PeekAll(HeaderUser)
	switch len(all) {
	case 0:
		return 0, Missing
	case 1:
	default:
		return 0, Doubled
	}
	raw := all[0]
	user, present, valid := ParseUserID(raw)
	switch {
	case !present:
		return 0, Missing
	case !valid:
		return 0, Malformed
	}
	if v == nil {
		return user, OK
	}
	switch v.mode {
	case ModeTrustedProxies:
		if !v.trustedPeer(ctx) {
			return 0, Untrusted
		}
	case ModeSigned:
		if !v.signed(ctx, raw) {
			return 0, BadSig
		}
	}
	return user, OK
}

func (v *Verifier) trustedPeer(ctx *fasthttp.RequestCtx) bool {
	a, ok := peerAddr(ctx)
	if !ok {
		return false
	}
	for _, p := range v.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// peerAddr is the TCP peer's address (never X-Forwarded-For).
func peerAddr(ctx *fasthttp.RequestCtx) (netip.Addr, bool) {
	ip := ctx.RemoteIP()
	a, ok := netip.AddrFromSlice(ip)
	if !ok {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

var (
	prefix = []byte("v2|")
	sep    = []byte("|")
)

// future is FutureSkew in seconds.
const future = int64(FutureSkew / time.Second)

func (v *Verifier) signed(ctx *fasthttp.RequestCtx, user []byte) bool {
	ts := ctx.Request.Header.Peek(HeaderTs)
	sig := ctx.Request.Header.Peek(HeaderSig)
	t, ok := parseTs(ts)
	if !ok {
		return false
	}
	if d := v.now().Unix() - t; d > v.skew || d < -future {
		return false
	}
	i := indexByte(sig, ':')
	if i <= 0 || len(sig)-i-1 != 2*sha256.Size {
		return false
	}
	id, hexSig := sig[:i], sig[i+1:]
	for k := range v.keys {
		if string(id) != v.keys[k].id { // no allocation: compared in place
			continue
		}
		m := v.keys[k].pool.Get().(*macState)
		ok := false
		if _, err := hex.Decode(m.got[:], hexSig); err == nil {
			m.body.Reset()
			m.body.Write(ctx.Request.Body())
			hex.Encode(m.digest[:], m.body.Sum(m.sum[:0]))
			m.h.Reset()
			m.h.Write(prefix)
			m.h.Write(ctx.Method())
			m.h.Write(sep)
			m.h.Write(ctx.Request.Header.RequestURI())
			m.h.Write(sep)
			m.h.Write(m.digest[:])
			m.h.Write(sep)
			m.h.Write(user)
			m.h.Write(sep)
			m.h.Write(ts)
			ok = hmac.Equal(m.h.Sum(m.sum[:0]), m.got[:])
		}
		v.keys[k].pool.Put(m)
		return ok
	}
	return false
}

func indexByte(b []byte, c byte) int {
	for i := range b {
		if b[i] == c {
			return i
		}
	}
	return -1
}

// parseTs reads 1 to 12 decimal digits.
func parseTs(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 12 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// Sign returns the X-User-Ts and X-User-Sig values a gateway sends for
// user's request method target (path and query, exactly as sent) with
// body, at now under key (the first of the configured keys signs). Tests
// and tools use it; the gateway implements the same few lines.
func Sign(key Key, method, target string, body []byte, user int64, now time.Time) (ts, sig string) {
	ts = strconv.FormatInt(now.Unix(), 10)
	digest := sha256.Sum256(body)
	h := hmac.New(sha256.New, []byte(key.Secret))
	h.Write([]byte("v2|" + method + "|" + target + "|" + hex.EncodeToString(digest[:]) + "|" +
		strconv.FormatInt(user, 10) + "|" + ts))
	return ts, key.ID + ":" + hex.EncodeToString(h.Sum(nil))
}
