package deploy

import (
	"os"
	"strings"
	"testing"

	"seckill/cmd/seckill/config"
)

// loadProd decodes configs/prod.yaml strictly over the defaults, as the
// binary does, without applying the environment.
func loadProd(t *testing.T) config.Config {
	t.Helper()
	b, err := os.ReadFile("../configs/prod.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c := config.Default()
	if err := config.Decode(b, &c); err != nil {
		t.Fatalf("configs/prod.yaml: %v", err)
	}
	return c
}

// configFlag is the value of --config in a container's arguments.
func configFlag(args []string) string {
	for i, a := range args {
		if a == "--config" && i+1 < len(args) {
			return args[i+1]
		}
		if v, ok := strings.CutPrefix(a, "--config="); ok {
			return v
		}
	}
	return ""
}
