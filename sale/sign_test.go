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
		if err := v.Verify(b, &got); err != nil {
			t.Fatalf("verify %s: %v", b, err)
		}
	}
	if string(got.Encode(nil)) != string(m.Encode(nil)) {
		t.Fatalf("decoded copy encodes to %s, want %s", got.Encode(nil), m.Encode(nil))
	}
	if got.KeyID != "k2" || len(got.Sig) != 64 {
		t.Fatalf("decoded signature fields %q %q", got.KeyID, got.Sig)
	}
	got.KeyID, got.Sig, got.signed = "", "", 0
	if got != m {
		t.Fatalf("decoded %+v, want %+v", got, m)
	}
}

// resigned is m's bytes carrying the signature fields of another message:
// a forger's copy with changed fields and a signature it saw.
func resigned(m Message, keyID, sig string) []byte {
	b := m.Encode(nil)
	b = append(b[:len(b)-1], `,"keyId":"`+keyID+`","sig":"`+sig+`"}`...)
	return b
}

// TestForgedOrUnsignedMessagesFail: each field changed after signing, an
// unsigned message, an unknown key, a signature in another spelling, a
// message checked against other bytes than its own.
func TestForgedOrUnsignedMessagesFail(t *testing.T) {
	s := mustSigner(t, sigNew)
	m := signedMessage()
	wire := s.AppendSigned(nil, &m)
	signed, err := DecodeMessage(wire)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Verify(wire, &signed); err != nil {
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
		b := resigned(c, c.KeyID, c.Sig)
		d, err := DecodeMessage(b)
		if err != nil {
			t.Fatalf("%s changed: %s does not decode: %v", name, b, err)
		}
		if err := s.Verify(b, &d); !errors.Is(err, ErrBadSignature) {
			t.Errorf("%s changed: %v, want %v", name, err, ErrBadSignature)
		}
	}
	// The same fields spelled otherwise (an escape for a plain letter)
	// are other bytes: not what was signed.
	esc := []byte(strings.Replace(string(wire), `"t-1"`, `"\u0074-1"`, 1))
	if d, err := DecodeMessage(esc); err != nil || d.TraceID != "t-1" {
		t.Fatalf("escaped copy: %+v, %v", d, err)
	} else if err := s.Verify(esc, &d); !errors.Is(err, ErrBadSignature) {
		t.Errorf("escaped copy: %v, want %v", err, ErrBadSignature)
	}
	if err := s.Verify(resigned(Message{RequestNo: "x"}, "k2", signed.Sig), &signed); !errors.Is(err, ErrBadSignature) {
		t.Errorf("verified against other bytes: %v", err)
	}
	if err := s.Verify(wire, &m); !errors.Is(err, ErrUnsigned) {
		t.Errorf("a message not decoded: %v", err)
	}
	unsignedWire := m.Encode(nil)
	unsigned, err := DecodeMessage(unsignedWire)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Verify(unsignedWire, &unsigned); !errors.Is(err, ErrUnsigned) {
		t.Errorf("unsigned: %v", err)
	}
	other := resigned(m, "k9", signed.Sig)
	o, err := DecodeMessage(other)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Verify(other, &o); !errors.Is(err, ErrUnknownKey) {
		t.Errorf("unknown key: %v", err)
	}
	// Signed with a key the verifier does not hold under that id.
	forger := mustSigner(t, keyring.Key{ID: "k2", Secret: "a-guessed-secret-0123456789abcdef"})
	fb := forger.AppendSigned(nil, &m)
	f, err := DecodeMessage(fb)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Verify(fb, &f); !errors.Is(err, ErrBadSignature) {
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
	wire := s.AppendSigned(nil, &m)
	b.ReportAllocs()
	for b.Loop() {
		buf = s.AppendSigned(buf[:0], &m)
		d, _ := DecodeMessage(wire)
		_ = s.Verify(wire, &d)
	}
}
