package edge

import "errors"

// ErrClosed is returned by Serve after Shutdown.
var ErrClosed = errors.New("edge: server closed")

// Errors of a TokenVerifier, which wraps one of them around its cause. The
// edge answers ErrTokenUnavailable with 503 BUSY (fail closed: the token
// could not be judged) and any other error with 403 TOKEN_INVALID.
var (
	// ErrTokenRefused: the token is not good for this purchase — malformed,
	// forged, expired, for another user, activity or SKU, or spent already.
	ErrTokenRefused = errors.New("edge: qualification token refused")
	// ErrTokenUnavailable: the token could not be checked (its store failed
	// or did not answer within edge.token_verify_timeout).
	ErrTokenUnavailable = errors.New("edge: qualification token could not be checked")
)

// errNoIssuer is logged when a token is asked for but no TokenIssuer is
// configured (token.keys empty).
var errNoIssuer = errors.New("edge: no token issuer configured")

// errBadEntries is logged when the admin API's blocklist in Redis holds
// entries that do not parse; the others apply.
type errBadEntries []string

func (e errBadEntries) Error() string {
	msg := "bad blocklist entries:"
	for _, b := range e {
		msg += " " + b
	}
	return msg
}
