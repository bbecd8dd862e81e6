package jsontext

import "testing"

func TestAppendUnescaped(t *testing.T) {
	cases := []struct {
		raw, want   string
		strict, bad bool
	}{
		{raw: `plain`, want: "plain"},
		{raw: `a\"b\\c\/d\b\f\n\r\t`, want: "a\"b\\c/d\b\f\n\r\t"},
		{raw: `\u00e9\ud83d\ude00`, want: "é😀"},
		{raw: `\ud800x`, want: "\uFFFDx"},
		{raw: `\ud800x`, strict: true, bad: true},
		{raw: `\ud83d\u0041`, strict: true, bad: true},
		{raw: `\x`, bad: true},
		{raw: `\u12`, bad: true},
		{raw: `\`, bad: true},
	}
	for _, c := range cases {
		b := []byte(c.raw)
		out, ok := AppendUnescaped(b[:0], b, c.strict) // in place
		if ok == c.bad || ok && string(out) != c.want {
			t.Errorf("%q strict %v: %q %v, want %q ok %v", c.raw, c.strict, out, ok, c.want, !c.bad)
		}
	}
	if Hex4([]byte("00e9")) != 0xe9 || Hex4([]byte("00g9")) != -1 || Hex4([]byte("0")) != -1 {
		t.Error("Hex4")
	}
}
