package config

import (
	"fmt"
	"path"
	"strings"
	"testing"
)

// TestComposeRunsTheEngineAsTheEdgesSidecar: as in deploy/k8s, the stack
// runs `seckill engine` beside the edge, and the edge calls it over the
// unix socket prod.yaml names (engine.listen = edge.engine), in a
// directory both containers mount from one volume: a tmpfs owned by the
// image's nonroot user (the socket is mode 0600, both run as that user).
// The edge starts after the engine; the engine has its node id.
func TestComposeRunsTheEngineAsTheEdgesSidecar(t *testing.T) {
	f := loadCompose(t)
	c := loadProd(t)
	sock, ok := strings.CutPrefix(c.Engine.Listen, "unix://")
	if !ok {
		t.Fatalf("prod.yaml engine.listen %q is not a unix socket", c.Engine.Listen)
	}
	if c.Edge.Engine != c.Engine.Listen {
		t.Fatalf("prod.yaml edge.engine %q is not engine.listen %q", c.Edge.Engine, c.Engine.Listen)
	}
	dir := path.Dir(sock)
	mountOf := func(name string) string {
		for _, v := range f.Services[name].Volumes {
			if src, dst := volume(v); dst == dir {
				return src
			}
		}
		return ""
	}
	engines := 0
	for name, s := range seckillServices(f) {
		if command(s)[0] != "engine" {
			continue
		}
		engines++
		vol := mountOf(name)
		if vol == "" || f.Volumes == nil {
			t.Fatalf("%s: nothing mounted at the socket's directory %s", name, dir)
		}
		if _, ok := f.Volumes[vol]; !ok {
			t.Fatalf("%s mounts %q at %s: not a named volume", name, vol, dir)
		}
		if got := mountOf("edge"); got != vol {
			t.Errorf("the edge mounts %q at %s, the engine %q: want one volume in both", got, dir, vol)
		}
		if opts := fmt.Sprint(f.Volumes[vol]); !strings.Contains(opts, "tmpfs") || !strings.Contains(opts, "uid=65532") {
			t.Errorf("volume %s: %s; want a tmpfs owned by uid 65532 (the image's nonroot user)", vol, opts)
		}
		if v := environment(s)["SECKILL_ENGINE_NODE"]; v == nil || *v == "" {
			t.Errorf("%s: no SECKILL_ENGINE_NODE: every engine needs its own node id", name)
		}
		deps, _ := f.Services["edge"].DependsOn.(map[string]any)
		if _, ok := deps[name]; !ok {
			t.Errorf("the edge does not depend on %s", name)
		}
	}
	if engines != 1 {
		t.Errorf("%d engine services beside the one edge, want 1", engines)
	}
}
