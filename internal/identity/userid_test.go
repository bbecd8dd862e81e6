package identity

import "testing"

func TestParseUserID(t *testing.T) {
	for _, tc := range []struct {
		in             string
		id             int64
		present, valid bool
	}{
		{"", 0, false, false},
		{"1", 1, true, true},
		{"555", 555, true, true},
		{"000123", 123, true, true},
		{"999999999999999999", 999999999999999999, true, true},
		{"1000000000000000000", 0, true, false}, // 19 digits
		{"0", 0, true, false},
		{"+555", 0, true, false},
		{"-5", 0, true, false},
		{" 5", 0, true, false},
		{"5 ", 0, true, false},
		{"5a", 0, true, false},
		{"0x10", 0, true, false},
	} {
		id, present, valid := ParseUserID([]byte(tc.in))
		if present != tc.present || valid != tc.valid || (valid && id != tc.id) {
			t.Errorf("ParseUserID(%q) = %d, %v, %v; want %d, %v, %v", tc.in, id, present, valid, tc.id, tc.present, tc.valid)
		}
	}
}
