package edge

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestParseOrder(t *testing.T) {
	type want struct {
		activity, sku, quantity int64
		token, requestID        string
	}
	cases := []struct {
		name string
		body string
		want want
		err  error
	}{
		{"the seed wrk body parses", `{"skuId":1001,"quantity":1}`, want{sku: 1001, quantity: 1}, nil},
		{"quantity defaults to one", `{"skuId":1001}`, want{sku: 1001, quantity: 1}, nil},
		{"every known field parses", `{"activityId":7,"skuId":1001,"quantity":3,"token":"tk","requestId":"r1"}`,
			want{7, 1001, 3, "tk", "r1"}, nil},
		{"field order does not matter", `{"requestId":"r1","quantity":2,"token":"tk","skuId":5,"activityId":9}`,
			want{9, 5, 2, "tk", "r1"}, nil},
		{"whitespace is allowed everywhere", " \n{ \"skuId\" :\t1001 ,\r\n \"quantity\" : 2 } \n", want{sku: 1001, quantity: 2}, nil},
		{"ids may be numeric strings", `{"activityId":"7","skuId":"1001","quantity":"2"}`, want{7, 1001, 2, "", ""}, nil},
		{"null means absent", `{"activityId":null,"skuId":1,"quantity":null,"token":null,"requestId":null}`, want{sku: 1, quantity: 1}, nil},
		{"activity zero means absent", `{"activityId":0,"skuId":1}`, want{sku: 1, quantity: 1}, nil},
		{"unknown fields of any shape are skipped", `{"a":[1,{"b":[true,false,null,"x\"]"]}],"skuId":1,"c":{"d":-1.5e3},"e":""}`,
			want{sku: 1, quantity: 1}, nil},
		{"strings are unescaped", `{"skuId":1,"token":"a\"b\\c\/d\n\u00e9\ud83d\ude00","requestId":"\u0041"}`,
			want{sku: 1, quantity: 1, token: "a\"b\\c/d\né😀", requestID: "A"}, nil},
		{"a lone surrogate becomes U+FFFD", `{"skuId":1,"token":"\ud800x"}`, want{sku: 1, quantity: 1, token: "\uFFFDx"}, nil},
		{"an escaped key is the key it spells", `{"sku\u0049d":8}`, want{sku: 8, quantity: 1}, nil},
		{"keys are case-sensitive", `{"SKUID":1}`, want{}, errBadSKUID},
		{"an empty body is malformed", ``, want{}, errMalformed},
		{"an array is malformed", `[{"skuId":1}]`, want{}, errMalformed},
		{"a truncated object is malformed", `{"skuId":1`, want{}, errMalformed},
		{"trailing data is malformed", `{"skuId":1} {}`, want{}, errMalformed},
		{"a trailing comma is malformed", `{"skuId":1,}`, want{}, errMalformed},
		{"single quotes are malformed", `{'skuId':1}`, want{}, errMalformed},
		{"a bad escape is malformed", `{"skuId":1,"token":"\x"}`, want{}, errMalformed},
		{"a raw control character is malformed", "{\"skuId\":1,\"token\":\"a\tb\"}", want{}, errMalformed},
		{"a bad literal in an unknown field is malformed", `{"skuId":1,"x":tru}`, want{}, errMalformed},
		{"a leading zero is malformed", `{"skuId":01}`, want{}, errMalformed},
		{"deep nesting is refused", `{"skuId":1,"x":` + strings.Repeat("[", 40) + strings.Repeat("]", 40) + `}`, want{}, errMalformed},
		{"a missing skuId is refused", `{"quantity":1}`, want{}, errBadSKUID},
		{"skuId zero is refused", `{"skuId":0}`, want{}, errBadSKUID},
		{"a negative skuId is refused", `{"skuId":-1}`, want{}, errBadSKUID},
		{"a fractional skuId is refused", `{"skuId":1.5}`, want{}, errBadSKUID},
		{"an exponent skuId is refused", `{"skuId":1e3}`, want{}, errBadSKUID},
		{"a 19-digit skuId is refused", `{"skuId":1234567890123456789}`, want{}, errBadSKUID},
		{"a boolean skuId is refused", `{"skuId":true}`, want{}, errBadSKUID},
		{"a non-numeric string skuId is refused", `{"skuId":"12a"}`, want{}, errBadSKUID},
		{"an empty string skuId is refused", `{"skuId":""}`, want{}, errBadSKUID},
		{"a padded string skuId is refused", `{"skuId":" 1"}`, want{}, errBadSKUID},
		{"a negative activityId is refused", `{"activityId":-7,"skuId":1}`, want{}, errBadActivityID},
		{"quantity zero is refused", `{"skuId":1,"quantity":0}`, want{}, errBadQuantity},
		{"quantity 101 is refused", `{"skuId":1,"quantity":101}`, want{}, errBadQuantity},
		{"quantity 100 is allowed", `{"skuId":1,"quantity":100}`, want{sku: 1, quantity: 100}, nil},
		{"a duplicate known field is refused", `{"skuId":1,"skuId":2}`, want{}, errDuplicate},
		{"a duplicate spelled with an escape is refused", `{"skuId":1,"sku\u0049d":2}`, want{}, errDuplicate},
		{"a duplicate null is refused", `{"skuId":1,"token":null,"token":"x"}`, want{}, errDuplicate},
		{"duplicate unknown fields are skipped", `{"x":1,"x":2,"skuId":1}`, want{sku: 1, quantity: 1}, nil},
		{"a numeric token is refused", `{"skuId":1,"token":5}`, want{}, errBadString},
		{"an overlong requestId is refused", `{"skuId":1,"requestId":"` + strings.Repeat("r", 65) + `"}`, want{}, errTooLong},
		{"a requestId that is not UTF-8 is refused", "{\"skuId\":1,\"requestId\":\"\xff\xfe\"}", want{}, errBadText},
		{"a requestId with an escaped NUL is refused", `{"skuId":1,"requestId":"a\u0000"}`, want{}, errBadText},
		{"a requestId with DEL is refused", "{\"skuId\":1,\"requestId\":\"a\x7f\"}", want{}, errBadText},
		{"a requestId with a C1 control is refused", `{"skuId":1,"requestId":"a\u0085"}`, want{}, errBadText},
		{"a requestId of other scripts parses", `{"skuId":1,"requestId":"订单\u00e9"}`, want{sku: 1, quantity: 1, requestID: "订单é"}, nil},
		{"a token need not be text", "{\"skuId\":1,\"token\":\"\xff\"}", want{sku: 1, quantity: 1, token: "\xff"}, nil},
		{"an overlong token is refused", `{"skuId":1,"token":"` + strings.Repeat("t", 1025) + `"}`, want{}, errTooLong},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var o order
			err := parseOrder([]byte(c.body), &o)
			if err != c.err {
				t.Fatalf("error %v, want %v", err, c.err)
			}
			if err != nil {
				return
			}
			got := want{o.ActivityID, o.SKUID, o.Quantity, string(o.Token), string(o.RequestID)}
			if got != c.want {
				t.Fatalf("got %+v, want %+v", got, c.want)
			}
		})
	}
}

// checkParse holds the parser's properties for one body: it never panics;
// it accepts only valid JSON; what it accepts agrees with encoding/json on
// every known field; and an accepted order re-encoded parses to the same
// order.
func checkParse(t *testing.T, body []byte) {
	t.Helper()
	var o order
	if err := parseOrder(bytes.Clone(body), &o); err != nil {
		return
	}
	if !json.Valid(body) {
		t.Fatalf("accepted invalid JSON %q", body)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatalf("accepted %q that encoding/json refuses: %v", body, err)
	}
	checkInt(t, body, m["activityId"], o.ActivityID, 0)
	checkInt(t, body, m["skuId"], o.SKUID, 0)
	checkInt(t, body, m["quantity"], o.Quantity, 1)
	if utf8.Valid(body) {
		checkString(t, body, m["token"], o.Token)
		checkString(t, body, m["requestId"], o.RequestID)
	}
	if o.SKUID <= 0 || o.ActivityID < 0 || o.Quantity < 1 || o.Quantity > maxQuantity {
		t.Fatalf("accepted out-of-range %+v from %q", o, body)
	}
	if !plainText(o.RequestID) {
		t.Fatalf("accepted requestId %q from %q: not UTF-8 or holds a control character", o.RequestID, body)
	}

	if !utf8.Valid(o.Token) || !utf8.Valid(o.RequestID) {
		return // encoding/json would replace the bytes
	}
	re, err := json.Marshal(struct {
		ActivityID int64  `json:"activityId,omitempty"`
		SKUID      int64  `json:"skuId"`
		Quantity   int64  `json:"quantity"`
		Token      string `json:"token,omitempty"`
		RequestID  string `json:"requestId,omitempty"`
	}{o.ActivityID, o.SKUID, o.Quantity, string(o.Token), string(o.RequestID)})
	if err != nil {
		t.Fatal(err)
	}
	var o2 order
	if err := parseOrder(re, &o2); err != nil {
		t.Fatalf("re-encoded %s of %q: %v", re, body, err)
	}
	if o.ActivityID != o2.ActivityID || o.SKUID != o2.SKUID || o.Quantity != o2.Quantity ||
		!bytes.Equal(o.Token, o2.Token) || !bytes.Equal(o.RequestID, o2.RequestID) {
		t.Fatalf("round trip of %q: %+v became %+v", body, o, o2)
	}
}

func checkInt(t *testing.T, body []byte, raw json.RawMessage, got, absent int64) {
	t.Helper()
	if raw == nil || string(raw) == "null" {
		if got != absent {
			t.Fatalf("%q: absent field read as %d", body, got)
		}
		return
	}
	s := string(raw)
	if s[0] == '"' {
		if err := json.Unmarshal(raw, &s); err != nil {
			t.Fatal(err)
		}
	}
	want, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("%q: accepted %s: %v", body, raw, err)
	}
	if got != want {
		t.Fatalf("%q: read %d, encoding/json %d", body, got, want)
	}
}

func checkString(t *testing.T, body []byte, raw json.RawMessage, got []byte) {
	t.Helper()
	if raw == nil || string(raw) == "null" {
		if len(got) != 0 {
			t.Fatalf("%q: absent string read as %q", body, got)
		}
		return
	}
	var want string
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatalf("%q: accepted %s: %v", body, raw, err)
	}
	if string(got) != want {
		t.Fatalf("%q: read %q, encoding/json %q", body, got, want)
	}
}

func FuzzParseOrder(f *testing.F) {
	for _, s := range []string{
		`{"skuId":1001,"quantity":1}`,
		`{"activityId":"7","skuId":"1001","token":"a\u00e9\ud83d\ude00","requestId":"r"}`,
		`{"x":[{"y":null}],"skuId":1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) { checkParse(t, body) })
}

func BenchmarkParseOrder(b *testing.B) {
	body := []byte(`{"activityId":7,"skuId":1001,"quantity":1,"token":"eyJhbGciOi\u0041.abc","requestId":"c0ffee-1"}`)
	buf := make([]byte, len(body))
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	var o order
	for b.Loop() {
		copy(buf, body) // parseOrder unescapes in place
		if err := parseOrder(buf, &o); err != nil {
			b.Fatal(err)
		}
	}
}
