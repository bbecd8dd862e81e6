package testenv

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/rueidis"
)

// Commands counts the commands a redis-server executed, by name, from INFO
// commandstats: commands run inside a script count under their own names
// (a script call that runs HGET twice adds evalsha 1 and hget 2). Take one
// count before and one after the work and compare with Since.
type Commands map[string]int64

// connection is what a client sends on its own: connection set-up, the
// keep-alive pings rueidis sends on an idle connection, and the counting
// itself. Since leaves these out, so a count says what the work cost.
var connection = map[string]bool{"info": true, "ping": true, "hello": true, "client": true, "select": true, "command": true}

// CommandStats returns the server's command counts now, read on c (pass
// the same client for every count, so no connection set-up falls in
// between).
func CommandStats(t testing.TB, c rueidis.Client) Commands {
	t.Helper()
	s, err := c.Do(context.Background(), c.B().Info().Section("commandstats").Build()).ToString()
	if err != nil {
		t.Fatalf("INFO commandstats: %v", err)
	}
	out := Commands{}
	for _, line := range strings.Split(s, "\n") {
		// cmdstat_hget:calls=3,usec=12,usec_per_call=4.00,rejected_calls=0,failed_calls=0
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		for _, f := range strings.Split(rest, ",") {
			if v, ok := strings.CutPrefix(f, "calls="); ok {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					t.Fatalf("INFO commandstats: %q: %v", line, err)
				}
				out[strings.TrimPrefix(name, "cmdstat_")] = n
			}
		}
	}
	return out
}

// Since returns the commands run between before and c, without the
// connection's own (see connection).
func (c Commands) Since(before Commands) Commands {
	out := Commands{}
	for name, n := range c {
		base, _, _ := strings.Cut(name, "|") // client|setinfo
		if d := n - before[name]; d != 0 && !connection[base] {
			out[name] = d
		}
	}
	return out
}
