package sale

import (
	"encoding/json"
	"math"
	"testing"
)

func TestEncodeIsJSONMarshal(t *testing.T) {
	tests := []struct {
		name string
		m    Message
	}{
		{"a plain ticket", Message{RequestNo: "1J2k3", ActivityID: 1, SKUID: 1001, UserID: 42, Quantity: 1, UnitPrice: 9900, AcceptedAt: 1764400000000, TraceID: "t-1"}},
		{"zero values", Message{}},
		{"cents below one unit and negative", Message{UnitPrice: -5, TraceID: ""}},
		{"extreme integers", Message{ActivityID: math.MaxInt64, SKUID: math.MinInt64 + 1, UserID: -1, UnitPrice: math.MaxInt64}},
		{"a trace id that needs escaping", Message{RequestNo: "r", TraceID: "a\"b\\c<d>&e\n\x00\u2028é\xff"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want, err := json.Marshal(&tc.m)
			if err != nil {
				t.Fatal(err)
			}
			if got := tc.m.Encode([]byte("prefix")); string(got) != "prefix"+string(want) {
				t.Fatalf("Encode:\n got %s\nwant prefix%s", got, want)
			}
		})
	}
}

func FuzzMessageEncode(f *testing.F) {
	f.Add("1J2k3", int64(1), int64(1001), int64(42), int64(1), int64(9900), int64(1764400000000), "trace")
	f.Add("", int64(0), int64(0), int64(0), int64(0), int64(-7), int64(0), "<script>\"\\\u2029\xfe")
	f.Fuzz(func(t *testing.T, rn string, a, sku, u, q, price, at int64, trace string) {
		m := Message{RequestNo: rn, ActivityID: a, SKUID: sku, UserID: u, Quantity: q, UnitPrice: Cents(price), AcceptedAt: at, TraceID: trace}
		if price == math.MinInt64 {
			return // no price is that negative (its negation overflows)
		}
		want, err := json.Marshal(&m)
		if err != nil {
			t.Fatal(err)
		}
		if got := m.Encode(nil); string(got) != string(want) {
			t.Fatalf("Encode:\n got %s\nwant %s", got, want)
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
