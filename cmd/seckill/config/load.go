// Package config loads the YAML configuration and applies SECKILL_*
// environment overrides: every key path in upper snake case, e.g.
// edge.listen -> SECKILL_EDGE_LISTEN, admin.token -> SECKILL_ADMIN_TOKEN.
// Lists are comma-separated; durations use Go syntax ("250ms").
package config

import (
	"encoding"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// EnvPrefix starts every override variable.
const EnvPrefix = "SECKILL_"

// LoadFile decodes the YAML file at path into dst (which holds defaults
// already), then applies environment overrides. An empty path applies only
// the environment.
func LoadFile(path string, dst any) error {
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("config: %w", err)
		}
		if err := Decode(b, dst); err != nil {
			return fmt.Errorf("config %s: %w", path, err)
		}
	}
	return ApplyEnv(dst, os.LookupEnv)
}

// Decode decodes YAML into dst, refusing unknown keys.
func Decode(b []byte, dst any) error {
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(dst); err != nil && !errors.Is(err, errEOF) && err.Error() != "EOF" {
		return err
	}
	return nil
}

var errEOF = errors.New("EOF")

// ApplyEnv walks dst's yaml-tagged fields and sets each one whose variable
// lookup finds.
func ApplyEnv(dst any, lookup func(string) (string, bool)) error {
	v := reflect.ValueOf(dst)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return errors.New("config: ApplyEnv wants a pointer to a struct")
	}
	return walk(v.Elem(), EnvPrefix[:len(EnvPrefix)-1], lookup)
}

// EnvNames lists every variable ApplyEnv reads for dst's type, for docs
// and tests.
func EnvNames(dst any) []string {
	var out []string
	_ = walk(reflect.ValueOf(dst).Elem(), EnvPrefix[:len(EnvPrefix)-1], func(k string) (string, bool) {
		out = append(out, k)
		return "", false
	})
	return out
}

// envApplier is a config value that applies its own overrides, given its
// variable prefix (e.g. shard.HotShards under SECKILL_REDIS_HOT).
type envApplier interface {
	ApplyEnv(prefix string, lookup func(string) (string, bool)) error
}

var durationType = reflect.TypeOf(time.Duration(0))

func walk(v reflect.Value, prefix string, lookup func(string) (string, bool)) error {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := strings.Split(f.Tag.Get("yaml"), ",")[0]
		if tag == "-" {
			continue
		}
		fv := v.Field(i)
		if tag == "" && f.Anonymous && fv.Kind() == reflect.Struct {
			if err := walk(fv, prefix, lookup); err != nil {
				return err
			}
			continue
		}
		if tag == "" {
			tag = strings.ToLower(f.Name)
		}
		name := prefix + "_" + strings.ToUpper(tag)
		// A value the walk cannot name key by key (redis.hot, one shard
		// or a list of them) reads its own variables.
		if fv.CanAddr() {
			if a, ok := fv.Addr().Interface().(envApplier); ok {
				if err := a.ApplyEnv(name, lookup); err != nil {
					return fmt.Errorf("config: %w", err)
				}
				continue
			}
		}
		if fv.Kind() == reflect.Struct && fv.Type() != reflect.TypeOf(time.Time{}) {
			if err := walk(fv, name, lookup); err != nil {
				return err
			}
			continue
		}
		s, ok := lookup(name)
		if !ok {
			continue
		}
		if err := set(fv, s); err != nil {
			if secretName(name) {
				return fmt.Errorf("config: %s (value not shown): %w", name, err)
			}
			return fmt.Errorf("config: %s=%q: %w", name, s, err)
		}
	}
	return nil
}

// SecretName reports whether the variable name holds a secret (a token,
// a key, a password, a DSN): its value never appears in an error, and a
// manifest must take it from a secret store, not write it literally.
func SecretName(name string) bool { return secretName(name) }

// secretName: a variable whose value must not appear in an error.
func secretName(name string) bool {
	for _, w := range []string{"TOKEN", "SECRET", "KEYS", "PASSWORD", "DSN"} {
		if strings.Contains(name, w) {
			return true
		}
	}
	return false
}

func set(fv reflect.Value, s string) error {
	// A type that parses itself from text (token.Key: "id:secret"), so a
	// list of them can come from one comma-separated variable too.
	if fv.CanAddr() {
		if u, ok := fv.Addr().Interface().(encoding.TextUnmarshaler); ok {
			return u.UnmarshalText([]byte(s))
		}
	}
	if fv.Type() == durationType {
		d, err := time.ParseDuration(s)
		if err != nil {
			return err
		}
		fv.SetInt(int64(d))
		return nil
	}
	switch fv.Kind() {
	case reflect.String:
		fv.SetString(s)
	case reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return err
		}
		fv.SetBool(b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return err
		}
		fv.SetInt(n)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return err
		}
		fv.SetUint(n)
	case reflect.Float32, reflect.Float64:
		n, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return err
		}
		fv.SetFloat(n)
	case reflect.Slice:
		parts := []string{}
		if s != "" {
			parts = strings.Split(s, ",")
		}
		out := reflect.MakeSlice(fv.Type(), len(parts), len(parts))
		for i, p := range parts {
			if err := set(out.Index(i), strings.TrimSpace(p)); err != nil {
				return err
			}
		}
		fv.Set(out)
	default:
		return fmt.Errorf("cannot set a %s from the environment", fv.Type())
	}
	return nil
}
