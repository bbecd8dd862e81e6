package store

import "errors"

var (
	// ErrNotFound: no row under that key.
	ErrNotFound = errors.New("not found")
	// ErrPaymentRefReused: a payment provider's reference that already
	// paid another order (ConfirmPayment).
	ErrPaymentRefReused = errors.New("provider reference already paid another order")
	// ErrPaymentAmount: a payment whose amount is not the order's, or a
	// replayed reference with another amount (ConfirmPayment).
	ErrPaymentAmount = errors.New("payment amount differs from the order's")
	// ErrNoSnapshot: a batch names a SKU that has no stock snapshot (the
	// activity was never put into the database). The batch rolls back.
	ErrNoSnapshot = errors.New("no stock snapshot")
	// ErrConflict: a row a batch inserts exists already although the batch
	// did not see it (a concurrent writer won); the batch rolled back and a
	// retry sees the winner.
	ErrConflict = errors.New("concurrent order insert")
	// ErrStockGuard: the snapshot's conditional decrement matched no row
	// although the batch held the row's lock; the batch rolled back.
	ErrStockGuard = errors.New("stock snapshot guard refused the decrement")
)
