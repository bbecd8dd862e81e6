package keyring

import (
	"strings"
	"testing"
)

// TestValidateNamesTheSettingAndNeverTheSecret covers the rules both key
// lists share.
func TestValidateNamesTheSettingAndNeverTheSecret(t *testing.T) {
	good := Key{ID: "k1", Secret: "secret-0123456789abcdef"}
	for want, keys := range map[string][]Key{
		"order_signing.keys: at most two":                 {good, {ID: "k2", Secret: good.Secret}, {ID: "k3", Secret: good.Secret}},
		"order_signing.keys[1].id \"k1\" is listed twice": {good, good},
		"order_signing.keys[0].secret must be at least":   {{ID: "k1", Secret: "short"}},
		"order_signing.keys[0].id must be 1-16":           {{ID: "", Secret: good.Secret}},
		"order_signing.keys[0].id must not contain":       {{ID: "a.b", Secret: good.Secret}},
	} {
		err := Validate("order_signing.keys", keys)
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), good.Secret) {
			t.Errorf("%v: %v, want %q", keys, err, want)
		}
	}
	if err := Validate("x", []Key{good, {ID: "k2", Secret: good.Secret}}); err != nil {
		t.Fatal(err)
	}
	var k Key
	if err := k.UnmarshalText([]byte("k9:a:b")); err != nil || k.ID != "k9" || k.Secret != "a:b" {
		t.Fatalf("%+v %v", k, err)
	}
}
