package edge

import (
	"time"

	"github.com/valyala/fasthttp"

	"seckill/internal/identity"
)

// Answer is one fixed answer of the table in answers.go, for the buyer
// routes another package serves (package web: the result stream, "my
// orders", the buyer page), so that every buyer route speaks with one
// spelling of each code. Sending one allocates nothing and counts no early
// rejection (those are the purchase route's). The zero Answer is invalid.
type Answer struct{ a *answer }

// The answers of the buyer routes outside the edge.
var (
	// AnswerNotFound: no such ticket, not the caller's ticket, no such file.
	AnswerNotFound = Answer{ansNotFound}
	// AnswerBusy: a dependency did not answer; send it with Retry.
	AnswerBusy = Answer{ansBusy}
	// AnswerReadsLimited: over the caller's per-user read limit; send it
	// with Retry.
	AnswerReadsLimited = Answer{ansReadsLimited}
	// AnswerTooManyStreams: the caller holds edge.result_stream.max_per_user
	// streams open; send it with Retry.
	AnswerTooManyStreams = Answer{ansTooManyStreams}
	// AnswerBadLimit: ?limit= is not a positive integer.
	AnswerBadLimit = Answer{ansBadLimit}
	// AnswerBadCursor: ?cursor= is not one the server gave.
	AnswerBadCursor = Answer{ansBadCursor}
)

// IdentityAnswer is the answer to an X-User-Id check that failed: the same
// as the purchase route's. identity.OK, or a result the table does not
// know, is 500 INTERNAL: a caller's bug, never a pass.
func IdentityAnswer(r identity.Result) Answer {
	if int(r) >= len(identityAnswers) || identityAnswers[r] == nil {
		return Answer{ansInternal}
	}
	return Answer{identityAnswers[r]}
}

// Status is the answer's HTTP status.
func (a Answer) Status() int { return a.a.status }

// Code is the answer's code, as in its body.
func (a Answer) Code() string { return a.a.code }

// Body is the answer's JSON body, {"code":…,"message":…}. The caller must
// not modify it.
func (a Answer) Body() []byte { return a.a.body }

// Write sends the answer.
func (a Answer) Write(ctx *fasthttp.RequestCtx) { send(ctx, a.a) }

// Retry sends the answer with Retry-After: wait in whole seconds, rounded
// up, at least 1.
func (a Answer) Retry(ctx *fasthttp.RequestCtx, wait time.Duration) {
	send(ctx, a.a)
	setRetryAfter(ctx, wait)
}
