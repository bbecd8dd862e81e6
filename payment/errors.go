package payment

import "errors"

// Outcomes of Intent and Confirm other than success; the handlers map each
// to one status.
var (
	// ErrNotFound: no such order (of this buyer, for Intent: someone
	// else's order is not found either, so order numbers cannot be probed).
	ErrNotFound = errors.New("order not found")
	// ErrClosed: the order was closed unpaid; its unit is on sale again.
	ErrClosed = errors.New("order closed unpaid")
	// ErrExpired: the payment deadline passed; the closer is about to
	// close the order.
	ErrExpired = errors.New("payment deadline passed")
	// ErrSignature: a callback without a valid provider signature (or no
	// provider key is configured: fail closed).
	ErrSignature = errors.New("payment callback signature invalid")
	// ErrAmount: a callback whose amount is not the order's (or a replay
	// of a recorded reference with another amount).
	ErrAmount = errors.New("payment amount differs from the order's")
	// ErrRefReused: a callback whose provider reference already paid
	// another order.
	ErrRefReused = errors.New("provider reference already paid another order")
	// ErrAlreadyPaid: the order was paid under another provider reference
	// (a double payment: the provider must refund this one).
	ErrAlreadyPaid = errors.New("order already paid under another reference")
	// ErrBusy: the database failed or timed out; nothing is known to have
	// changed, the caller may retry (both calls are idempotent).
	ErrBusy = errors.New("system busy")
)
