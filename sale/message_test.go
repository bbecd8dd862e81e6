package sale

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// valid is s as Encode carries it: each byte that is not UTF-8 becomes
// U+FFFD.
func valid(s string) string { return string([]rune(s)) }

// TestEncodeDecodesToItsFields: what Encode writes, encoding/json and
// DecodeMessage read back to the same fields, whatever the strings hold.
func TestEncodeDecodesToItsFields(t *testing.T) {
	tests := []struct {
		name string
		m    Message
	}{
		{"a plain ticket", Message{RequestNo: "1J2k3", ActivityID: 1, SKUID: 1001, UserID: 42, Quantity: 1, UnitPrice: 9900, AcceptedAt: 1764400000000, TraceID: "t-1"}},
		{"cents below one unit and negative", Message{RequestNo: "r", ActivityID: 1, SKUID: 1, UserID: 1, Quantity: 1, UnitPrice: -5}},
		{"extreme integers", Message{RequestNo: "r", ActivityID: math.MaxInt64, SKUID: math.MaxInt64, UserID: math.MaxInt64, Quantity: 1, UnitPrice: math.MaxInt64, AcceptedAt: math.MinInt64}},
		{"a trace id that needs escaping", Message{RequestNo: "r", ActivityID: 1, SKUID: 1, UserID: 1, Quantity: 1, TraceID: "a\"b\\c<d>&e\n\x00\u2028é\x7f"}},
		{"bytes that are not UTF-8", Message{RequestNo: "\xff\xfe", ActivityID: 1, SKUID: 1001, UserID: 1, Quantity: 1, TraceID: "é\xc3"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.m.Encode([]byte("prefix"))
			if !strings.HasPrefix(string(b), "prefix") {
				t.Fatalf("Encode dropped dst: %s", b)
			}
			b = b[len("prefix"):]
			want := tc.m
			want.RequestNo, want.TraceID = valid(want.RequestNo), valid(want.TraceID)
			var j Message
			if err := json.Unmarshal(b, &j); err != nil || j != want {
				t.Fatalf("encoding/json reads %s as %+v, %v; want %+v", b, j, err, want)
			}
			got, err := DecodeMessage(b)
			if err != nil || got != want {
				t.Fatalf("DecodeMessage(%s) = %+v, %v; want %+v", b, got, err, want)
			}
		})
	}
}

// TestDecodeMessageRefusesOtherSpellings: the decoder reads one shape;
// JSON that encoding/json would take in another spelling is refused.
func TestDecodeMessageRefusesOtherSpellings(t *testing.T) {
	good := `{"requestNo":"r","activityId":1,"skuId":2,"userId":3,"quantity":1,"unitPrice":"9.90","acceptedAt":5,"traceId":"t"}`
	if _, err := DecodeMessage([]byte(good)); err != nil {
		t.Fatalf("the one shape: %v", err)
	}
	for name, b := range map[string]string{
		"whitespace":               strings.Replace(good, `"skuId":2`, `"skuId": 2`, 1),
		"fields reordered":         `{"activityId":1,"requestNo":"r","skuId":2,"userId":3,"quantity":1,"unitPrice":"9.90","acceptedAt":5,"traceId":"t"}`,
		"a field twice":            strings.Replace(good, `}`, `,"traceId":"u"}`, 1),
		"an unknown field":         strings.Replace(good, `}`, `,"x":1}`, 1),
		"a key in another case":    strings.Replace(good, `"skuId"`, `"SkuId"`, 1),
		"a leading zero":           strings.Replace(good, `"skuId":2`, `"skuId":02`, 1),
		"minus zero":               strings.Replace(good, `"acceptedAt":5`, `"acceptedAt":-0`, 1),
		"an exponent":              strings.Replace(good, `"skuId":2`, `"skuId":2e0`, 1),
		"a number past int64":      strings.Replace(good, `"skuId":2`, `"skuId":9223372036854775808`, 1),
		"a price of one decimal":   strings.Replace(good, `"9.90"`, `"9.9"`, 1),
		"a price as a number":      strings.Replace(good, `"9.90"`, `9.90`, 1),
		"minus zero cents":         strings.Replace(good, `"9.90"`, `"-0.00"`, 1),
		"bytes that are not UTF-8": strings.Replace(good, `"t"`, "\"\xff\"", 1),
		"a raw control character":  strings.Replace(good, `"t"`, "\"\x01\"", 1),
		"a lone surrogate":         strings.Replace(good, `"t"`, `"\ud800"`, 1),
		"a bad escape":             strings.Replace(good, `"t"`, `"\x41"`, 1),
		"trailing data":            good + " ",
		"a key id without a sig":   strings.Replace(good, `}`, `,"keyId":"k1"}`, 1),
		"a sig before the key id":  strings.Replace(good, `}`, `,"sig":"00","keyId":"k1"}`, 1),
		"a null":                   strings.Replace(good, `"t"`, `null`, 1),
		"a missing ticket":         strings.Replace(good, `"r"`, `""`, 1),
		"a zero quantity":          strings.Replace(good, `"quantity":1`, `"quantity":0`, 1),
	} {
		if m, err := DecodeMessage([]byte(b)); err == nil {
			t.Errorf("%s: %s decoded to %+v", name, b, m)
		}
	}
}

// FuzzDecodeMessage: whatever DecodeMessage's parser accepts,
// encoding/json reads to the same fields; whatever encoding/json refuses,
// the parser refuses too.
func FuzzDecodeMessage(f *testing.F) {
	m := Message{RequestNo: "1J2k3", ActivityID: 1, SKUID: 1001, UserID: 42, Quantity: 1, UnitPrice: 9900, AcceptedAt: 1764400000000, TraceID: "t-1"}
	f.Add(m.Encode(nil))
	f.Add(mustSigner(f, sigNew).AppendSigned(nil, &m))
	m.TraceID = "a\"b\\c\n\x00é\U0001F600"
	f.Add(mustSigner(f, sigNew).AppendSigned(nil, &m))
	f.Add([]byte(`{"requestNo":"\ud83d\ude00\u00e9\/","activityId":-1,"skuId":0,"userId":3,"quantity":1,"unitPrice":"-0.05","acceptedAt":5,"traceId":""}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, perr := parseMessage(b)
		var j Message
		jerr := json.Unmarshal(b, &j)
		if perr != nil {
			return
		}
		if jerr != nil {
			t.Fatalf("parsed %q, which encoding/json refuses: %v", b, jerr)
		}
		got.signed = 0
		if got != j {
			t.Fatalf("%q:\n parsed %+v\n  json  %+v", b, got, j)
		}
	})
}

// FuzzMessageEncode: for arbitrary field values, encode → sign → decode
// → verify holds and gives back the fields (strings as UTF-8), and a
// change of one byte (at16, by flip) of the signed message never verifies.
func FuzzMessageEncode(f *testing.F) {
	f.Add("1J2k3", int64(1), int64(1001), int64(42), int64(1), int64(9900), int64(1764400000000), "trace", uint16(40), byte(1))
	f.Add("", int64(0), int64(0), int64(0), int64(0), int64(-7), int64(0), "<script>\"\\\u2029\xfe", uint16(500), byte(0x80))
	s := mustSigner(f, sigNew)
	f.Fuzz(func(t *testing.T, rn string, a, sku, u, q, price, at int64, trace string, at16 uint16, flip byte) {
		m := Message{RequestNo: rn, ActivityID: a, SKUID: sku, UserID: u, Quantity: q, UnitPrice: Cents(price), AcceptedAt: at, TraceID: trace}
		if price == math.MinInt64 {
			return // no price is that negative (its negation overflows)
		}
		b := s.AppendSigned(nil, &m)
		got, err := DecodeMessage(b)
		if rn == "" || a <= 0 || sku <= 0 || u <= 0 || q <= 0 {
			if err == nil {
				t.Fatalf("%s decoded with a missing or invalid field", b)
			}
			if got, err = parseMessage(b); err != nil {
				t.Fatalf("%s does not parse: %v", b, err)
			}
		} else if err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		if err := s.Verify(b, &got); err != nil {
			t.Fatalf("%s does not verify: %v", b, err)
		}
		want := m
		want.RequestNo, want.TraceID = valid(rn), valid(trace)
		want.KeyID, want.Sig, want.signed = got.KeyID, got.Sig, got.signed
		if got != want {
			t.Fatalf("%s decoded to %+v, want %+v", b, got, want)
		}
		if flip == 0 {
			flip = 1
		}
		i := int(at16) % len(b)
		b[i] ^= flip
		if d, err := parseMessage(b); err == nil && s.Verify(b, &d) == nil {
			t.Fatalf("byte %d changed (^%#x) and still verifies: %s", i, flip, b)
		}
	})
}

func BenchmarkMessageEncode(b *testing.B) {
	m := Message{RequestNo: "1J2k3abcdEFG", ActivityID: 1, SKUID: 1001, UserID: 1234567890, Quantity: 1, UnitPrice: 9900, AcceptedAt: 1764400000000, TraceID: "1J2k3abcdEFG"}
	buf := make([]byte, 0, 256)
	b.ReportAllocs()
	for b.Loop() {
		buf = m.Encode(buf[:0])
	}
}

// BenchmarkMessageDecode compares the consumer's decoder with
// encoding/json on one signed message.
func BenchmarkMessageDecode(b *testing.B) {
	m := Message{RequestNo: "7-7001-385465232614494208", ActivityID: 7, SKUID: 7001, UserID: 1234567890, Quantity: 1, UnitPrice: 9900, AcceptedAt: 1764400000000, TraceID: "7-7001-385465232614494208"}
	wire := mustSigner(b, sigNew).AppendSigned(nil, &m)
	b.Run("hand", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := DecodeMessage(wire); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var d Message
			if err := json.Unmarshal(wire, &d); err != nil {
				b.Fatal(err)
			}
		}
	})
}
