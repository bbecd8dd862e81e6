// Package token issues and verifies qualification tokens (DESIGN §4): an
// HMAC-SHA256 signature over activityId, skuId, userId, expireAt and a
// nonce, under one of up to two active signing keys (so keys rotate without
// downtime). Verification checks the signature, expiry, user, SKU and
// activity, then spends the nonce in Redis (SET NX until expiry), so a
// replayed token is refused.
package token

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"seckill/internal/keyring"
)

// Errors of Verify. All of them mean 403 to the buyer.
var (
	ErrMalformed = errors.New("token malformed")
	ErrSignature = errors.New("token signature invalid")
	ErrExpired   = errors.New("token expired")
	ErrMismatch  = errors.New("token is for another user, activity or sku")
	ErrReplayed  = errors.New("token already used")
)

// Key is one signing key (keyring.Key: "id:secret", shared with the order
// message keys).
type Key = keyring.Key

// Config is the token section.
type Config struct {
	// Keys: the first signs new tokens; every listed key verifies. List the
	// new key first and keep the old one second while old tokens live.
	Keys []Key `yaml:"keys"`
	// TTL is a token's lifetime. Default 5m.
	TTL time.Duration `yaml:"ttl"`
}

// DefaultConfig has no keys: tokens cannot be issued until one is set.
func DefaultConfig() Config { return Config{TTL: 5 * time.Minute} }

// Validate names the first bad key.
func (c *Config) Validate() error {
	if err := keyring.Validate("token.keys", c.Keys); err != nil {
		return err
	}
	if c.TTL <= 0 {
		return errors.New("token.ttl must be positive")
	}
	return nil
}

// Claims are what a token says.
type Claims struct {
	KeyID    string
	Activity int64
	SKU      int64
	User     int64
	ExpireAt time.Time // second precision
	Nonce    string
}

// Tokens issues and verifies. Safe for concurrent use.
type Tokens struct {
	keys []Key
	ttl  time.Duration
	rdb  rueidis.Client
}

// New returns Tokens with cfg's keys; rdb (the default Redis) records spent
// nonces.
func New(cfg Config, rdb rueidis.Client) (*Tokens, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Tokens{keys: cfg.Keys, ttl: cfg.TTL, rdb: rdb}, nil
}

// CanIssue reports whether a signing key is configured.
func (t *Tokens) CanIssue() bool { return len(t.keys) > 0 }

// Issue signs a token for user on (activity, sku), valid until now+TTL.
func (t *Tokens) Issue(activity, sku, user int64, now time.Time) (string, time.Time, error) {
	if len(t.keys) == 0 {
		return "", time.Time{}, errors.New("token: no signing key configured (token.keys)")
	}
	var n [12]byte
	if _, err := rand.Read(n[:]); err != nil {
		return "", time.Time{}, err
	}
	c := Claims{KeyID: t.keys[0].ID, Activity: activity, SKU: sku, User: user,
		ExpireAt: now.Add(t.ttl).Truncate(time.Second), Nonce: hex.EncodeToString(n[:])}
	return t.sign(t.keys[0], c), c.ExpireAt, nil
}

func payload(c Claims) string {
	return "v1|" + c.KeyID + "|" + strconv.FormatInt(c.Activity, 10) + "|" + strconv.FormatInt(c.SKU, 10) + "|" +
		strconv.FormatInt(c.User, 10) + "|" + strconv.FormatInt(c.ExpireAt.Unix(), 10) + "|" + c.Nonce
}

func mac(k Key, p string) []byte {
	h := hmac.New(sha256.New, []byte(k.Secret))
	h.Write([]byte(p))
	return h.Sum(nil)
}

func (t *Tokens) sign(k Key, c Claims) string {
	p := payload(c)
	enc := base64.RawURLEncoding
	return enc.EncodeToString([]byte(p)) + "." + enc.EncodeToString(mac(k, p))
}

// Parse decodes a token and checks its signature against the active keys.
// It does not check expiry, match or replay.
func (t *Tokens) Parse(s string) (Claims, error) {
	c, p, sig, err := parse(s)
	if err != nil {
		return c, err
	}
	for _, k := range t.keys {
		if k.ID == c.KeyID {
			if hmac.Equal(mac(k, p), sig) {
				return c, nil
			}
			return c, ErrSignature
		}
	}
	return c, ErrSignature
}

// parse splits and decodes without any key.
func parse(s string) (Claims, string, []byte, error) {
	var c Claims
	if len(s) == 0 || len(s) > 512 {
		return c, "", nil, ErrMalformed
	}
	dot := -1
	for i := 0; i < len(s); i++ {
		switch b := s[i]; {
		case b == '.':
			if dot >= 0 {
				return c, "", nil, ErrMalformed
			}
			dot = i
		case b >= 'A' && b <= 'Z', b >= 'a' && b <= 'z', b >= '0' && b <= '9', b == '-', b == '_':
		default:
			// Only the base64url alphabet: the decoder skips \r and \n,
			// which would give a token a second spelling.
			return c, "", nil, ErrMalformed
		}
	}
	if dot <= 0 || dot == len(s)-1 {
		return c, "", nil, ErrMalformed
	}
	// Strict: a token has one spelling. Without it the unused low bits of
	// the last character are ignored, so up to 16 strings decode to the
	// same token.
	enc := base64.RawURLEncoding.Strict()
	pb, err := enc.DecodeString(s[:dot])
	if err != nil {
		return c, "", nil, ErrMalformed
	}
	sig, err := enc.DecodeString(s[dot+1:])
	if err != nil || len(sig) != sha256.Size {
		return c, "", nil, ErrMalformed
	}
	p := string(pb)
	var f [7]string
	n, start := 0, 0
	for i := 0; i <= len(p); i++ {
		if i == len(p) || p[i] == '|' {
			if n == len(f) {
				return c, "", nil, ErrMalformed
			}
			f[n] = p[start:i]
			n++
			start = i + 1
		}
	}
	if n != len(f) || f[0] != "v1" || f[1] == "" || f[6] == "" {
		return c, "", nil, ErrMalformed
	}
	c.KeyID, c.Nonce = f[1], f[6]
	var exp int64
	for i, dst := range []*int64{&c.Activity, &c.SKU, &c.User, &exp} {
		v, err := strconv.ParseInt(f[2+i], 10, 64)
		if err != nil || v <= 0 {
			return c, "", nil, ErrMalformed
		}
		*dst = v
	}
	c.ExpireAt = time.Unix(exp, 0)
	// Only the canonical encoding verifies: reject re-encodings that would
	// parse to the same claims.
	if payload(c) != p {
		return c, "", nil, ErrMalformed
	}
	return c, p, sig, nil
}

// Check reports whether s is a valid, unexpired token of user for
// (activity, sku) without spending it and without I/O: what Verify checks
// before it touches Redis.
func (t *Tokens) Check(s string, activity, sku, user int64, now time.Time) (Claims, error) {
	c, err := t.Parse(s)
	if err != nil {
		return c, err
	}
	if !now.Before(c.ExpireAt) {
		return c, ErrExpired
	}
	if c.User != user || c.SKU != sku || c.Activity != activity {
		return c, ErrMismatch
	}
	return c, nil
}

// Unspend gives a spent token back: its nonce is forgotten, so the same
// token verifies once more. The edge calls it when the engine answered a
// purchase the token paid for with "busy" (the buyer retries with the
// token they hold). It adds no purchase a buyer could not make anyway: the
// token stays bound to its user, SKU and expiry, and one buyer, one unit
// is enforced by the occupy script's per-user record, not by the token. A
// token whose signature does not verify is left alone.
func (t *Tokens) Unspend(ctx context.Context, s string) error {
	c, err := t.Parse(s)
	if err != nil {
		return err
	}
	if err := t.rdb.Do(ctx, t.rdb.B().Del().Key(nonceKey(c)).Build()).Error(); err != nil {
		return fmt.Errorf("token nonce: %w", err)
	}
	return nil
}

func nonceKey(c Claims) string { return "sk:tok:" + c.KeyID + ":" + c.Nonce }

// Verify checks that s is a valid, unexpired token of user for (activity,
// sku) and spends it: a second Verify of the same token is ErrReplayed.
// A Redis failure is returned as is (the caller answers busy).
func (t *Tokens) Verify(ctx context.Context, s string, activity, sku, user int64, now time.Time) (Claims, error) {
	c, err := t.Check(s, activity, sku, user, now)
	if err != nil {
		return c, err
	}
	ok, err := t.rdb.Do(ctx, t.rdb.B().Set().Key(nonceKey(c)).Value("1").Nx().
		Pxat(c.ExpireAt.Add(time.Second)).Build()).AsBool()
	if rueidis.IsRedisNil(err) {
		return c, ErrReplayed
	}
	if err != nil {
		return c, fmt.Errorf("token nonce: %w", err)
	}
	if !ok {
		return c, ErrReplayed
	}
	return c, nil
}
