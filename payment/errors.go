package payment

import "errors"

// Outcomes of Pay other than success; Handler maps each to one status.
var (
	// ErrNotFound: no such order of this buyer (someone else's order is
	// not found either, so order numbers cannot be probed).
	ErrNotFound = errors.New("order not found")
	// ErrClosed: the order was closed unpaid; its unit is on sale again.
	ErrClosed = errors.New("order closed unpaid")
	// ErrExpired: the payment deadline passed; the closer is about to
	// close the order.
	ErrExpired = errors.New("payment deadline passed")
	// ErrBusy: the database failed or timed out; nothing is known to have
	// changed, the buyer may retry (Pay is idempotent).
	ErrBusy = errors.New("system busy")
)
