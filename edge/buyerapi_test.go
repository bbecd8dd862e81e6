package edge

import (
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"seckill/internal/identity"
)

// TestPayGuardAnswersFromTheTable: the pay route's guard refuses an
// unknown caller and a caller past the database bound with the table's
// answers, byte for byte, Retry-After on the 429, never cached.
func TestPayGuardAnswersFromTheTable(t *testing.T) {
	do := payGuard(t, func(ctx *fasthttp.RequestCtx) { ctx.SetStatusCode(fasthttp.StatusAccepted) })
	for _, c := range []struct {
		user string
		want Answer
	}{{"", IdentityAnswer(identity.Missing)}, {"x", IdentityAnswer(identity.Malformed)}} {
		r := do(c.user)
		if r.StatusCode() != c.want.Status() || string(r.Body()) != string(c.want.Body()) || string(r.Header.Peek("Cache-Control")) != "no-store" {
			t.Errorf("user %q: %d %s, want %d %s", c.user, r.StatusCode(), r.Body(), c.want.Status(), c.want.Body())
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		r := do("5")
		if r.StatusCode() == fasthttp.StatusAccepted && time.Now().Before(deadline) {
			continue
		}
		if r.StatusCode() != AnswerReadsLimited.Status() || string(r.Body()) != string(AnswerReadsLimited.Body()) ||
			len(r.Header.Peek("Retry-After")) == 0 || string(r.Header.Peek("Cache-Control")) != "no-store" {
			t.Fatalf("past the bound: %d %s Retry-After %q", r.StatusCode(), r.Body(), r.Header.Peek("Retry-After"))
		}
		break
	}
}
