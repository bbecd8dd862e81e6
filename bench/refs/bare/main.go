// Command bare is the bench harness's ceiling reference: a fasthttp server
// that answers every POST /api/v1/flash-sale/order with a fixed QUEUING
// body, doing nothing else. What the real edge reaches on its reject path is
// compared with it.
//
//	bare -listen 127.0.0.1:18080
package main

import (
	"flag"
	"log"

	"github.com/valyala/fasthttp"
)

var body = []byte(`{"code":"QUEUING","requestNo":"1","message":"queued"}`)

func main() {
	listen := flag.String("listen", "127.0.0.1:18080", "listen address (loopback)")
	flag.Parse()
	ct := []byte("application/json")
	srv := &fasthttp.Server{
		Name: "bare",
		Handler: func(ctx *fasthttp.RequestCtx) {
			ctx.SetContentTypeBytes(ct)
			ctx.Response.SetBodyRaw(body)
		},
	}
	log.Fatal(srv.ListenAndServe(*listen))
}
