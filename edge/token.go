package edge

import (
	"time"

	"seckill/internal/sale"
)

// TokenVerifier checks a qualification token for activities that require
// one (DESIGN §4: the token's user must match the buyer). token aliases
// the request body and must not be kept after Verify returns. An error
// refuses the request with 403 TOKEN_INVALID, except an error that wraps
// engine.ErrBusy, which answers 503 (fail closed when a dependency is
// down). Implementations must be safe for concurrent use and should not
// allocate on success.
type TokenVerifier interface {
	Verify(token []byte, user int64, a *sale.Activity, sku int64, now time.Time) error
}
