package edge

import (
	"errors"
	"net"

	"github.com/valyala/fasthttp"
)

var (
	contentTypeJSON = []byte("application/json")
	tooEarlyText    = []byte("Too Early")
)

// write sends a fixed answer without copying its body, and counts it when
// it is an early rejection. No allocation.
func (s *Server) write(ctx *fasthttp.RequestCtx, a *answer) {
	ctx.SetStatusCode(a.status)
	if a.status == statusTooEarly {
		// fasthttp knows no reason phrase for 425.
		ctx.Response.Header.SetStatusMessage(tooEarlyText)
	}
	ctx.SetContentTypeBytes(contentTypeJSON)
	ctx.Response.SetBodyRaw(a.body)
	if a.reason >= 0 {
		s.m.rejections[a.reason].Inc()
	}
}

// httpError answers what fasthttp could not read as a request: a body over
// MaxRequestBodySize (refused from its Content-Length, before it is read),
// oversized headers, a timeout, or garbage.
func (s *Server) httpError(ctx *fasthttp.RequestCtx, err error) {
	var small *fasthttp.ErrSmallBuffer
	var ne net.Error
	switch {
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		s.write(ctx, ansTooLarge)
	case errors.As(err, &small):
		s.write(ctx, ansHeaderTooBig)
	case errors.As(err, &ne) && ne.Timeout():
		s.write(ctx, ansTimeout)
	default:
		s.write(ctx, ansBadHTTP)
	}
}

// userID parses X-User-Id: 1 to 18 decimal digits, positive. ok is false
// when the header is missing.
func userID(h []byte) (id int64, ok, valid bool) {
	if len(h) == 0 {
		return 0, false, false
	}
	if len(h) > maxIntDigits {
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
