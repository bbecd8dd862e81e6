package main

import "testing"

func TestConfigPath(t *testing.T) {
	for _, c := range []struct{ config, want string }{
		{"", ""},
		{"configs/bench.yaml", "/repo/configs/bench.yaml"},
		{"/tmp/x.yaml", "/tmp/x.yaml"},
	} {
		if got := (options{root: "/repo", config: c.config}).configPath(); got != c.want {
			t.Errorf("configPath(%q) = %q, want %q", c.config, got, c.want)
		}
	}
}
