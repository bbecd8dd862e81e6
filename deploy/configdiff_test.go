package deploy

import (
	"seckill/cmd/seckill/config"

	"fmt"
	"reflect"
	"strings"
)

// configDiff lists the keys (YAML paths, e.g. "engine.kafka.brokers")
// whose values differ between a and b, with both values.
func configDiff(a, b config.Config) []string {
	var out []string
	diffValue(reflect.ValueOf(a), reflect.ValueOf(b), "", &out)
	return out
}

func diffValue(a, b reflect.Value, path string, out *[]string) {
	if a.Kind() == reflect.Struct && a.Type().String() != "time.Time" {
		for i := 0; i < a.NumField(); i++ {
			f := a.Type().Field(i)
			if !f.IsExported() {
				continue
			}
			tag, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if tag == "-" {
				continue
			}
			p := path
			switch {
			case tag == "" && f.Anonymous:
			case tag == "":
				p = join(path, strings.ToLower(f.Name))
			default:
				p = join(path, tag)
			}
			diffValue(a.Field(i), b.Field(i), p, out)
		}
		return
	}
	if a.Kind() == reflect.Slice && a.Len() == 0 && b.Len() == 0 {
		return // nil and empty: the same configuration
	}
	if !reflect.DeepEqual(a.Interface(), b.Interface()) {
		*out = append(*out, fmt.Sprintf("%s: %v != %v", path, a.Interface(), b.Interface()))
	}
}

func join(a, b string) string {
	if a == "" {
		return b
	}
	return a + "." + b
}
