package consumer

import "errors"

var (
	// ErrClosed: Run was called after Close.
	ErrClosed = errors.New("consumer closed")
	// ErrUncommitted: a dependency (Redis, the database, the dead-letter
	// topic) stayed down past the bounded retries, so the batch's offsets
	// were not committed; the session ends and the messages are delivered
	// again, which is safe because every step is idempotent.
	ErrUncommitted = errors.New("batch left uncommitted for redelivery")
)
