package identity

// MaxUserIDDigits is the longest X-User-Id accepted: every 18-digit decimal
// fits an int64.
const MaxUserIDDigits = 18

// ParseUserID parses an X-User-Id header value, the one rule every route
// uses: 1 to 18 decimal digits (no sign, no spaces), positive. present is
// false for a missing or empty header (401); valid is false for anything
// else that is not such a number (400). It does not allocate.
func ParseUserID(h []byte) (id int64, present, valid bool) {
	if len(h) == 0 {
		return 0, false, false
	}
	if len(h) > MaxUserIDDigits {
		return 0, true, false
	}
	for _, c := range h {
		if c < '0' || c > '9' {
			return 0, true, false
		}
		id = id*10 + int64(c-'0')
	}
	return id, true, id > 0
}
