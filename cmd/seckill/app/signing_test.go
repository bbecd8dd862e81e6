package app

import (
	"strings"
	"testing"

	"go.uber.org/zap/zaptest"

	"seckill/cmd/seckill/config"
	"seckill/internal/keyring"
	"seckill/sale"
)

// testOrderSigning is the order-signing key of the tests' systems.
var testOrderSigning = sale.SigningConfig{Keys: []keyring.Key{{ID: "t1", Secret: "app-test-order-secret-0123456789"}}}

// TestProductionWithoutOrderSigningKeyRefusesToStart: configs/prod.yaml
// ships no order-signing key; an engine or consumer process refuses to
// start, before it dials anything (the Redis address here leads nowhere),
// naming the setting. An edge in front of a sidecar engine signs nothing
// and needs none.
func TestProductionWithoutOrderSigningKeyRefusesToStart(t *testing.T) {
	cfg, err := config.Load("../../../configs/prod.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg.OrderSigning.Keys = nil
	cfg.Edge.Engine = "" // prod.yaml's edge calls its sidecar; here the engine runs in process
	for name, roles := range map[string]Roles{
		"edge with the engine in process": {Edge: true, Engine: true},
		"engine sidecar":                  {Engine: true},
		"consumer":                        {Consumer: true},
	} {
		_, err := New(cfg, zaptest.NewLogger(t), roles)
		if err == nil || !strings.Contains(err.Error(), "SECKILL_ORDER_SIGNING_KEYS") {
			t.Errorf("%s without a signing key: %v", name, err)
		}
	}
	cfg.OrderSigning.Keys = []keyring.Key{{ID: "k1", Secret: "prod-order-secret-0123456789abcdef"}}
	cfg.Redis.Default.Addrs = []string{"127.0.0.1:1"}
	cfg.Redis.Timeout = 200_000_000
	_, err = New(cfg, zaptest.NewLogger(t), Roles{Consumer: true})
	if err != nil && strings.Contains(err.Error(), "SECKILL_ORDER_SIGNING_KEYS") {
		t.Errorf("with a key: %v", err)
	}
}

// TestOrderSigningKeysFromTheEnvironment: SECKILL_ORDER_SIGNING_KEYS is
// read like SECKILL_TOKEN_KEYS (keyring.Key), newest first.
func TestOrderSigningKeysFromTheEnvironment(t *testing.T) {
	cfg := config.Default()
	env := map[string]string{"SECKILL_ORDER_SIGNING_KEYS": "k2:new-order-secret-0123456789abcdef,k1:old-order-secret-0123456789abcdef"}
	if err := config.ApplyEnv(&cfg, func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
		t.Fatal(err)
	}
	k := cfg.OrderSigning.Keys
	if len(k) != 2 || k[0].ID != "k2" || k[1].Secret != "old-order-secret-0123456789abcdef" {
		t.Fatalf("keys %+v", k)
	}
	if err := cfg.OrderSigning.Required(); err != nil {
		t.Fatal(err)
	}
}
