package main

import (
	"fmt"

	"seckill/cmd/seckill/app"
	"seckill/engine"
)

// rateReloader is SIGHUP for `seckill edge` and `seckill dev`: it re-reads
// the configuration file and the environment with load (the loader the
// process started with, so dev re-reads over the dev defaults, not the
// production ones) and applies the edge.rate
// section to the running edge (edge.Server.SetRate logs what changed) and
// its user × SKU window to the in-process engine, whose occupy script counts
// it (engine.Local.SetWindow; an engine sidecar takes the window when it
// starts). A file that does not load or validate is refused whole, and the
// limits in force stay. Nothing else of the file is applied: other changes
// need a restart.
func rateReloader(sys *app.System, load loader, path string) func() error {
	return func() error {
		cfg, err := load(path)
		if err == nil {
			err = cfg.Validate()
		}
		if err != nil {
			return fmt.Errorf("reload %q: %w", path, err)
		}
		if sys.Local != nil {
			w := engine.Window{Limit: cfg.Edge.Rate.UserSKULimit, Period: cfg.Edge.Rate.UserSKUWindow}
			if err := sys.Local.SetWindow(w); err != nil {
				return fmt.Errorf("reload %q: %w", path, err)
			}
		}
		_, err = sys.Edge.SetRate(cfg.Edge.Rate)
		return err
	}
}
