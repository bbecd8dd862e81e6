package sale

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"hash"
	"sync"

	"seckill/internal/keyring"
)

// SigningConfig is the order_signing section: the HMAC-SHA256 keys the
// engine signs order messages with and the consumer verifies them by. The
// keys are read and checked like the token keys (keyring.Key, "id:secret" in
// SECKILL_ORDER_SIGNING_KEYS=k2:<new>,k1:<old>): the first signs, every
// listed key verifies, so a key rotates without a message refused —
// deploy the new key second everywhere, then first, then drop the old one
// once the orders topic holds nothing it signed.
type SigningConfig struct {
	Keys []keyring.Key `yaml:"keys"`
}

// SigningSetting names the setting in errors.
const SigningSetting = "order_signing.keys (SECKILL_ORDER_SIGNING_KEYS)"

// Validate checks the keys; it does not require one (see Required).
func (c *SigningConfig) Validate() error {
	return keyring.Validate("order_signing.keys", c.Keys)
}

// Required is Validate plus at least one key: what the engine and the
// consumer need to start.
func (c *SigningConfig) Required() error {
	if len(c.Keys) == 0 {
		return errors.New(SigningSetting + " must name at least one key: the engine signs every order message and the consumer dead-letters any it cannot verify")
	}
	return c.Validate()
}

// Errors of Verify: the consumer dead-letters the message with the reason.
var (
	ErrUnsigned     = errors.New("order message is not signed")
	ErrUnknownKey   = errors.New("order message signed with an unknown key")
	ErrBadSignature = errors.New("order message signature invalid")
)

// Signer signs and verifies order messages. The signature is HMAC-SHA256
// under one key over the bytes of the message as it travels: Encode's
// output (the signature fields left out, a fixed field order). A signed
// message is those bytes with `,"keyId":"<id>","sig":"<64 hex>"` before
// the closing brace, so the signed bytes are the wire bytes before
// `,"keyId":` and a closing brace. Verify checks those bytes themselves,
// never a re-encoding of what was decoded from them: whatever a string
// holds, the consumer verifies what the engine signed, and any byte a
// forger changes (quantity, price, user, ticket, a quote) breaks the
// signature. Safe for concurrent use; neither Sign nor Verify allocates in
// the steady state.
type Signer struct {
	keys []signKey
}

type signKey struct {
	id  string
	mac sync.Pool // *macState
}

type macState struct {
	h   hash.Hash
	sum [sha256.Size]byte
}

// NewSigner returns a Signer over cfg's keys (at least one).
func NewSigner(cfg SigningConfig) (*Signer, error) {
	if err := cfg.Required(); err != nil {
		return nil, err
	}
	s := &Signer{keys: make([]signKey, len(cfg.Keys))}
	for i, k := range cfg.Keys {
		secret := []byte(k.Secret)
		s.keys[i].id = k.ID
		s.keys[i].mac.New = func() any {
			return &macState{h: hmac.New(sha256.New, secret)}
		}
	}
	return s, nil
}

// KeyID is the id of the key Sign uses.
func (s *Signer) KeyID() string { return s.keys[0].id }

func (k *signKey) sum(b []byte, st *macState) []byte {
	st.h.Reset()
	st.h.Write(b)
	return st.h.Sum(st.sum[:0])
}

// AppendSigned appends m's signed JSON to dst (m.KeyID and m.Sig are
// ignored and left as they are).
func (s *Signer) AppendSigned(dst []byte, m *Message) []byte {
	k := &s.keys[0]
	start := len(dst)
	dst = m.Encode(dst)
	st := k.mac.Get().(*macState)
	sum := k.sum(dst[start:], st)
	dst = append(dst[:len(dst)-1], `,"keyId":`...)
	dst = appendString(dst, k.id)
	dst = append(dst, `,"sig":"`...)
	dst = hex.AppendEncode(dst, sum)
	k.mac.Put(st)
	return append(dst, `"}`...)
}

// closeBrace ends the signed bytes Verify hashes.
var closeBrace = []byte{'}'}

// Verify checks the signature DecodeMessage left in m.KeyID and m.Sig
// against b, the bytes m was decoded from: the HMAC of b's signed part
// (see Signer); a message not decoded (m.signed unset) never verifies.
func (s *Signer) Verify(b []byte, m *Message) error {
	if m.KeyID == "" && m.Sig == "" {
		return ErrUnsigned
	}
	var k *signKey
	for i := range s.keys {
		if s.keys[i].id == m.KeyID {
			k = &s.keys[i]
			break
		}
	}
	if k == nil {
		return ErrUnknownKey
	}
	var got [sha256.Size]byte
	if !decodeHex(got[:], m.Sig) || m.signed <= 0 || m.signed >= len(b) {
		return ErrBadSignature
	}
	st := k.mac.Get().(*macState)
	st.h.Reset()
	st.h.Write(b[:m.signed])
	st.h.Write(closeBrace)
	ok := hmac.Equal(st.h.Sum(st.sum[:0]), got[:])
	k.mac.Put(st)
	if !ok {
		return ErrBadSignature
	}
	return nil
}

// decodeHex fills dst from lower-case hex s (hex.AppendEncode's spelling
// only: a signature has one spelling), without converting s to bytes.
func decodeHex(dst []byte, s string) bool {
	if len(s) != 2*len(dst) {
		return false
	}
	for i := range dst {
		hi, ok1 := fromHex(s[2*i])
		lo, ok2 := fromHex(s[2*i+1])
		if !ok1 || !ok2 {
			return false
		}
		dst[i] = hi<<4 | lo
	}
	return true
}

func fromHex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}
