package sale

import (
	"errors"
	"strings"
	"testing"

	"seckill/internal/keyring"
)

var (
	sigNew = keyring.Key{ID: "k2", Secret: "new-order-secret-0123456789abcdef"}
	sigOld = keyring.Key{ID: "k1", Secret: "old-order-secret-0123456789abcdef"}
)

func signedMessage() Message {
	return Message{RequestNo: "1J2k3abcdEFG", ActivityID: 1, SKUID: 1001, UserID: 42, Quantity: 1,
		UnitPrice: 990, AcceptedAt: 1764400000000, TraceID: "t-1"}
}

func mustSigner(t testing.TB, keys ...keyring.Key) *Signer {
	t.Helper()
	s, err := NewSigner(SigningConfig{Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSignedMessageVerifies: what the engine signs decodes and verifies
// under the same keys, and under a rotated list where the signing key is
// second; a decoded copy re-encodes to the canonical bytes.
func TestSignedMessageVerifies(t *testing.T) {
	m := signedMessage()
	b := mustSigner(t, sigNew, sigOld).AppendSigned(nil, &m)
	if !strings.Contains(string(b), `"keyId":"k2","sig":"`) {
		t.Fatalf("signed message %s names no key", b)
	}
	got, err := DecodeMessage(b)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []*Signer{mustSigner(t, sigNew), mustSigner(t, sigOld, sigNew)} {
		if err := v.Verify(&got); err != nil {
			t.Fatalf("verify %s: %v", b, err)
		}
	}
	if string(got.Encode(nil)) != string(m.Encode(nil)) {
		t.Fatalf("decoded copy encodes to %s, want %s", got.Encode(nil), m.Encode(nil))
	}
}

// TestForgedOrUnsignedMessagesFail: each field changed after signing, an
// unsigned message, an unknown key, a signature in another spelling.
func TestForgedOrUnsignedMessagesFail(t *testing.T) {
	s := mustSigner(t, sigNew)
	m := signedMessage()
	signed, err := DecodeMessage(s.AppendSigned(nil, &m))
	if err != nil {
		t.Fatal(err)
	}
	forge := map[string]func(*Message){
		"quantity":       func(m *Message) { m.Quantity = 5 },
		"price":          func(m *Message) { m.UnitPrice = 1 },
		"user":           func(m *Message) { m.UserID = 43 },
		"ticket":         func(m *Message) { m.RequestNo = "other" },
		"sku":            func(m *Message) { m.SKUID = 1002 },
		"activity":       func(m *Message) { m.ActivityID = 2 },
		"accepted":       func(m *Message) { m.AcceptedAt++ },
		"trace":          func(m *Message) { m.TraceID = "t-2" },
		"upper-case hex": func(m *Message) { m.Sig = strings.ToUpper(m.Sig) },
		"short sig":      func(m *Message) { m.Sig = m.Sig[:10] },
	}
	for name, f := range forge {
		c := signed
		f(&c)
		if err := s.Verify(&c); !errors.Is(err, ErrBadSignature) {
			t.Errorf("%s changed: %v, want %v", name, err, ErrBadSignature)
		}
	}
	unsigned, err := DecodeMessage(m.Encode(nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Verify(&unsigned); !errors.Is(err, ErrUnsigned) {
		t.Errorf("unsigned: %v", err)
	}
	other := signed
	other.KeyID = "k9"
	if err := s.Verify(&other); !errors.Is(err, ErrUnknownKey) {
		t.Errorf("unknown key: %v", err)
	}
	// Signed with a key the verifier does not hold under that id.
	forger := mustSigner(t, keyring.Key{ID: "k2", Secret: "a-guessed-secret-0123456789abcdef"})
	f, _ := DecodeMessage(forger.AppendSigned(nil, &m))
	if err := s.Verify(&f); !errors.Is(err, ErrBadSignature) {
		t.Errorf("forged with another secret: %v", err)
	}
}

// TestSigningKeysAreRequired names the setting.
func TestSigningKeysAreRequired(t *testing.T) {
	_, err := NewSigner(SigningConfig{})
	if err == nil || !strings.Contains(err.Error(), "SECKILL_ORDER_SIGNING_KEYS") {
		t.Fatalf("no keys: %v", err)
	}
	_, err = NewSigner(SigningConfig{Keys: []keyring.Key{sigNew, sigNew}})
	if err == nil || !strings.Contains(err.Error(), "order_signing.keys[1]") {
		t.Fatalf("duplicate id: %v", err)
	}
}

func BenchmarkSignAndVerify(b *testing.B) {
	s := mustSigner(b, sigNew)
	m := signedMessage()
	buf := make([]byte, 0, 512)
	d, _ := DecodeMessage(s.AppendSigned(nil, &m))
	b.ReportAllocs()
	for b.Loop() {
		buf = s.AppendSigned(buf[:0], &m)
		_ = s.Verify(&d)
	}
}
