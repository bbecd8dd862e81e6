package shard

import (
	"strings"
	"testing"
	"time"
)

func TestValidateNamesTheWaitKeys(t *testing.T) {
	for _, tc := range []struct {
		name     string
		replicas int
		timeout  time.Duration
		want     string
	}{
		{"off by default", 0, 50 * time.Millisecond, ""},
		{"off needs no timeout", 0, 0, ""},
		{"one replica, 50ms", 1, 50 * time.Millisecond, ""},
		{"a negative count", -1, 50 * time.Millisecond, "redis.wait_replicas"},
		{"no timeout (WAIT 0 would block for ever)", 1, 0, "redis.wait_timeout"},
		{"a timeout in part of a millisecond", 1, 1500 * time.Microsecond, "redis.wait_timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			c.WaitReplicas, c.WaitTimeout = tc.replicas, tc.timeout
			err := c.Validate()
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("%v, want %q", err, tc.want)
			}
		})
	}
	if d := DefaultConfig(); d.WaitReplicas != 0 || d.WaitTimeout != 50*time.Millisecond {
		t.Fatalf("defaults %d, %v", d.WaitReplicas, d.WaitTimeout)
	}
}
