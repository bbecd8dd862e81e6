package edge

import (
	"fmt"
	"reflect"
	"strings"

	"go.uber.org/zap"
)

// SetRate replaces the rate limits (edge.rate) of a running edge, e.g. on
// SIGHUP. An invalid c is refused with the error naming its key, and the
// limits in force stay. Otherwise the new settings apply to every request
// that starts after SetRate returns: the in-process layers are swapped with
// one atomic pointer store (requests never take a lock for them), a layer
// whose settings did not change keeps its state, a changed per-IP or
// per-user layer starts afresh (every key gets its burst again), the gate
// keeps the stock it learnt and the in-flight bound keeps counting the
// attempts already inside. It logs what changed and returns the changes
// as "edge.rate.key: old → new" (none: nothing changed). Safe for
// concurrent use.
func (s *Server) SetRate(c RateConfig) ([]string, error) { return s.admit.setRate(c) }

// Rate returns the rate limits in force.
func (s *Server) Rate() RateConfig { return s.admit.rate() }

func (a *admission) setRate(c RateConfig) ([]string, error) {
	if err := c.validate(); err != nil {
		return nil, err
	}
	a.rateMu.Lock()
	defer a.rateMu.Unlock()
	old := a.lim.Load()
	changes := rateChanges(old.cfg, c)
	if len(changes) == 0 {
		a.log.Info("edge rate limits reloaded: nothing changed")
		return nil, nil
	}
	next := newLimits(c, a.rdb, old)
	a.gate.Set(c.gateShare(a.live.Load()))
	a.inflight.SetLimit(c.SKUInflight)
	a.inflight.SetWait(c.SKUInflightWait)
	a.lim.Store(next)
	a.log.Info("edge rate limits reloaded", zap.Strings("changed", changes))
	return changes, nil
}

func (a *admission) rate() RateConfig {
	c := a.lim.Load().cfg
	c.IPExempt = append([]string(nil), c.IPExempt...)
	return c
}

// rateChanges lists the keys of edge.rate whose values differ, in field
// order, as "edge.rate.key: old → new".
func rateChanges(old, cur RateConfig) []string {
	var out []string
	ov, cv := reflect.ValueOf(old), reflect.ValueOf(cur)
	t := ov.Type()
	for i := range t.NumField() {
		a, b := ov.Field(i).Interface(), cv.Field(i).Interface()
		if reflect.DeepEqual(a, b) || isEmptyList(a) && isEmptyList(b) {
			continue
		}
		key := strings.Split(t.Field(i).Tag.Get("yaml"), ",")[0]
		out = append(out, fmt.Sprintf("edge.rate.%s: %v → %v", key, a, b))
	}
	return out
}

// isEmptyList treats a nil and an empty list (ip_exempt: []) alike.
func isEmptyList(v any) bool {
	l, ok := v.([]string)
	return ok && len(l) == 0
}
