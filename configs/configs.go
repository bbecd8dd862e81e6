// Package configs embeds dev.yaml, the built-in defaults of `seckill dev`
// (cmd/seckill/config.DevDefaults reads it over the production defaults), so that
// `seckill dev` without --config runs exactly what `make run` runs. The
// other files here are read from disk by whoever names them.
package configs

import _ "embed"

// Dev is configs/dev.yaml.
//
//go:embed dev.yaml
var Dev []byte
