// Package keyring is the one definition of an HMAC signing-key list: how a
// key is written ("id:secret", so a list comes from one comma-separated
// environment variable) and which lists are valid. Qualification tokens
// (token.keys) and order messages (order_signing.keys) both use it. A list
// rotates the same way everywhere: the first key signs, every listed key
// verifies.
package keyring

import (
	"errors"
	"fmt"
	"strings"
)

// Key is one HMAC signing key.
type Key struct {
	ID     string `yaml:"id"`
	Secret string `yaml:"secret"`
}

// UnmarshalText reads a key written "id:secret" (the id ends at the first
// colon), so keys can come from the environment as a comma-separated
// list: SECKILL_TOKEN_KEYS=k2:<new secret>,k1:<old secret>. A secret that
// holds a comma cannot be written this way (use hex or base64 secrets).
// The error never shows the secret.
func (k *Key) UnmarshalText(b []byte) error {
	s := string(b)
	i := strings.IndexByte(s, ':')
	if i <= 0 || i == len(s)-1 {
		return errors.New("a signing key is written id:secret")
	}
	k.ID, k.Secret = s[:i], s[i+1:]
	return nil
}

// MaxKeys is how many keys a key list may hold: the one that signs and the
// one it replaces, which still verifies while what it signed lives.
const MaxKeys = 2

// Validate checks a signing-key list named setting (its config path,
// e.g. "token.keys"): at most MaxKeys, ids of 1-16 characters without '.'
// or '|', no id twice, secrets of at least 16 characters. Every HMAC key
// list of the project (qualification tokens, order messages) is read and
// checked by this one rule. The error never shows a secret.
func Validate(setting string, keys []Key) error {
	if len(keys) > MaxKeys {
		return fmt.Errorf("%s: at most two keys may be active", setting)
	}
	for i, k := range keys {
		if k.ID == "" || len(k.ID) > 16 {
			return fmt.Errorf("%s[%d].id must be 1-16 characters", setting, i)
		}
		if len(k.Secret) < 16 {
			return fmt.Errorf("%s[%d].secret must be at least 16 characters", setting, i)
		}
		for _, r := range k.ID {
			if r == '.' || r == '|' || r == '"' || r == '\\' {
				return fmt.Errorf("%s[%d].id must not contain '.', '|', '\"' or '\\'", setting, i)
			}
		}
		for _, o := range keys[:i] {
			if o.ID == k.ID {
				return fmt.Errorf("%s[%d].id %q is listed twice", setting, i, k.ID)
			}
		}
	}
	return nil
}
