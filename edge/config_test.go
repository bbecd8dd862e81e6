package edge

import (
	"strings"
	"testing"
	"time"
)

func TestConfigRefusesBadAdmissionKeys(t *testing.T) {
	for key, f := range map[string]func(*Config){
		"edge.trusted_proxies":            func(c *Config) { c.TrustedProxies = []string{"10.0.0.0/33"} },
		"edge.rate.ip_exempt":             func(c *Config) { c.Rate.IPExempt = []string{"localhost"} },
		"edge.rate.ip_burst":              func(c *Config) { c.Rate.IPBurst = 0 },
		"edge.rate.user_burst":            func(c *Config) { c.Rate.UserBurst = 0 },
		"edge.rate.ip_per_second":         func(c *Config) { c.Rate.IPPerSecond = -1 },
		"edge.rate.max_keys":              func(c *Config) { c.Rate.MaxKeys = 10 },
		"edge.rate.user_sku_window":       func(c *Config) { c.Rate.UserSKUWindow = 0 },
		"edge.rate.gate_floor":            func(c *Config) { c.Rate.GateFloor = 0 },
		"edge.rate.gate_edges":            func(c *Config) { c.Rate.GateEdges = -1 },
		"edge.rate.sku_inflight":          func(c *Config) { c.Rate.SKUInflight = -1 },
		"edge.rate.sku_inflight_wait":     func(c *Config) { c.Rate.SKUInflightWait = -time.Second },
		"edge.blocklist":                  func(c *Config) { c.Blocklist.Users = []int64{-1} },
		"edge.blocklist.refresh_interval": func(c *Config) { c.Blocklist.RefreshInterval = 0 },
		"edge.max_conns_per_ip":           func(c *Config) { c.MaxConnsPerIP = -1 },
	} {
		c := DefaultConfig()
		f(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%s: error %v should name it", key, err)
		}
	}
	// Each layer is switched off by its zero.
	c := DefaultConfig()
	c.Identity = "any"
	c.Rate = RateConfig{MaxKeys: 1024}
	if err := c.Validate(); err != nil {
		t.Fatalf("every layer off: %v", err)
	}
}

func TestConfigRefusesBadTokenTimeouts(t *testing.T) {
	for key, f := range map[string]func(*Config){
		"edge.token_verify_timeout": func(c *Config) { c.TokenVerifyTimeout = 0 },
		"edge.token_refund_timeout": func(c *Config) { c.TokenRefundTimeout = -time.Second },
	} {
		c := DefaultConfig()
		f(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%s: error %v should name it", key, err)
		}
	}
}

func TestConfigBoundsTheHoldersTable(t *testing.T) {
	for _, n := range []int{1023, 1<<22 + 1} {
		c := DefaultConfig()
		c.HoldersMax = n
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "edge.holders_max") {
			t.Errorf("holders_max %d: error %v should name it", n, err)
		}
	}
	c := DefaultConfig()
	c.HoldersTTL, c.HoldersMax = 0, 1<<30 // off: no table
	if err := c.Validate(); err != nil {
		t.Errorf("holders off: %v", err)
	}
}
