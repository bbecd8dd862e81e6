package edge

import (
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func TestAccessLogIsSampled(t *testing.T) {
	for _, tc := range []struct {
		name  string
		every int
		want  func(n int) bool
	}{
		{"every request is logged when the sample is 1", 1, func(n int) bool { return n == 200 }},
		{"none is logged when the sample is 0", 0, func(n int) bool { return n == 0 }},
		{"about one in ten is logged when the sample is 10", 10, func(n int) bool { return n > 0 && n < 60 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			core, logs := observer.New(zapcore.InfoLevel)
			e := newEdge(t, withLogger(zap.New(core)), withConfig(func(c *Config) { c.AccessLogEvery = tc.every }))
			for i := 0; i < 200; i++ {
				e.do("GET", "/healthz", "", "")
			}
			n := logs.FilterMessage("access (sampled)").Len()
			if !tc.want(n) {
				t.Fatalf("%d access lines for 200 requests", n)
			}
			if n > 0 {
				f := logs.FilterMessage("access (sampled)").All()[0].ContextMap()
				if f["path"] != "/healthz" || f["status"] != int64(200) {
					t.Fatalf("access line fields %v", f)
				}
			}
		})
	}
}
