package web

// maxUserDigits is the longest X-User-Id accepted: every 18-digit decimal
// fits an int64.
const maxUserDigits = 18

// userID parses X-User-Id exactly as the edge's purchase route does
// (edge/reject.go): 1 to 18 decimal digits, positive. present is false for
// a missing header (401), valid false for anything else malformed (400).
// The edge's copy is unexported and the edge is being split; a shared leaf
// is where both should end up.
func userID(h []byte) (id int64, present, valid bool) {
	if len(h) == 0 {
		return 0, false, false
	}
	if len(h) > maxUserDigits {
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
