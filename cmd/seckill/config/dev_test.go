package config

import (
	"bytes"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"seckill/configs"
)

const devYAML, benchYAML = "../../../configs/dev.yaml", "../../../configs/bench.yaml"

// TestDevDefaultsAreConfigsDevYAML: `seckill dev` without --config runs
// exactly what `make run` (--config configs/dev.yaml) runs, so the two
// cannot drift: the built-in defaults are the repository's file, read over
// the production defaults as --config reads it.
func TestDevDefaultsAreConfigsDevYAML(t *testing.T) {
	file, err := os.ReadFile(devYAML)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(configs.Dev, file) {
		t.Fatal("the dev defaults built into the binary are not configs/dev.yaml")
	}
	fromFile := Default()
	if err := Decode(file, &fromFile); err != nil {
		t.Fatal(err)
	}
	dev, err := DevDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if d := diffPaths(dev, fromFile); len(d) > 0 {
		t.Fatalf("DevDefaults differs from Default + configs/dev.yaml at %v", d)
	}
	noFile, err := LoadDev("")
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]Config{"Load(dev.yaml)": mustLoad(t, devYAML), "LoadDev(dev.yaml)": mustLoadDev(t, devYAML)} {
		if d := diffPaths(noFile, c); len(d) > 0 {
			t.Errorf("seckill dev without --config differs from %s at %v", name, d)
		}
	}
	if err := noFile.Validate(); err != nil {
		t.Fatal(err)
	}
	// What the issue found missing without a file: tokens, the admin
	// token, the demo sale.
	if len(noFile.Token.Keys) == 0 || noFile.Admin.Token == "" || !noFile.Dev.Demo {
		t.Fatalf("dev defaults: token keys %d, admin token set %v, demo %v", len(noFile.Token.Keys), noFile.Admin.Token != "", noFile.Dev.Demo)
	}
}

// TestDevFileIsReadOverTheDevDefaults: a --config file given to dev
// changes only the keys it names; the rest keep their dev values, not the
// production ones.
func TestDevFileIsReadOverTheDevDefaults(t *testing.T) {
	p := t.TempDir() + "/small.yaml"
	if err := os.WriteFile(p, []byte("consumer:\n  max_wait: 7ms\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got := mustLoadDev(t, p)
	want, err := DevDefaults()
	if err != nil {
		t.Fatal(err)
	}
	want.Consumer.MaxWait = 7 * time.Millisecond
	if d := diffPaths(got, want); len(d) > 0 {
		t.Fatalf("LoadDev(small file) differs from the dev defaults + its one key at %v", d)
	}
}

// benchMayDiffer are the keys where configs/bench.yaml may differ from
// configs/dev.yaml: what a person reading the logs of a load test needs
// (machine-readable, nothing per request) and the data directory. Every
// key that changes what the system does under load is the same, so the
// harness measures what `make run` runs.
var benchMayDiffer = []string{"log.format", "log.level", "edge.access_log_every", "dev.data_dir"}

func TestBenchYAMLIsDevYAMLWithOtherLogs(t *testing.T) {
	// The differ sees differences where there are some.
	if d := diffPaths(Default(), mustLoad(t, devYAML)); !slices.Contains(d, "edge.rate.ip_exempt") || !slices.Contains(d, "token.keys") {
		t.Fatalf("production defaults vs dev.yaml: the differ found only %v", d)
	}
	for _, p := range diffPaths(mustLoad(t, devYAML), mustLoad(t, benchYAML)) {
		if !slices.Contains(benchMayDiffer, p) {
			t.Errorf("configs/bench.yaml differs from configs/dev.yaml at %s: only %v may (tune dev.yaml, copy the change to bench.yaml)", p, benchMayDiffer)
		}
	}
}

func mustLoadDev(t *testing.T, path string) Config {
	t.Helper()
	c, err := LoadDev(path)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// diffPaths lists the YAML key paths (edge.rate.ip_exempt) where a and b,
// two values of one struct type, differ; a list is compared whole.
func diffPaths(a, b any) []string {
	var out []string
	var walk func(x, y reflect.Value, prefix string)
	walk = func(x, y reflect.Value, prefix string) {
		t := x.Type()
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			tag := strings.Split(f.Tag.Get("yaml"), ",")[0]
			if tag == "-" {
				continue
			}
			if tag == "" {
				tag = strings.ToLower(f.Name)
			}
			name := strings.TrimPrefix(prefix+"."+tag, ".")
			fx, fy := x.Field(i), y.Field(i)
			if fx.Kind() == reflect.Struct && fx.Type() != reflect.TypeOf(time.Time{}) {
				walk(fx, fy, name)
				continue
			}
			if !reflect.DeepEqual(fx.Interface(), fy.Interface()) {
				out = append(out, name)
			}
		}
	}
	walk(reflect.ValueOf(a), reflect.ValueOf(b), "")
	return out
}
