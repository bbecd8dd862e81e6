package main

import (
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
	"go.uber.org/zap"

	"seckill/cmd/seckill/app"
	"seckill/cmd/seckill/config"
	"seckill/internal/shard"
)

// startLine is what a process says about itself when it starts: its
// role, where it listens and what it connects to. It never holds a
// secret: no Redis password, no admin token, no token keys, and the
// database DSN without its password.
type startLine struct {
	role      string
	listeners map[string]string   // name → address
	redis     map[string][]string // "default", "hot" → addresses
	brokers   []string
	engine    string // the sidecar an edge calls ("" in-process)
	store     string // driver
	dsn       string // redacted
}

// partsLine is the start line of a process running roles of cfg: the
// Redis deployments, brokers and store it uses, chosen as app.New and
// dependencies choose them.
func partsLine(role string, cfg config.Config, roles app.Roles, listeners map[string]string) startLine {
	l := startLine{role: role, listeners: listeners, redis: redisAddrs(cfg.Redis)}
	inProcess := roles.Engine && (!roles.Edge || cfg.Edge.Engine == "")
	if inProcess {
		l.brokers = append(l.brokers, cfg.Engine.Kafka.Brokers...)
	}
	// The consumer reads its group's brokers; an edge reads the lag there.
	if roles.Consumer || roles.Edge {
		l.brokers = append(l.brokers, cfg.Consumer.Brokers...)
	}
	if roles.Edge && cfg.Edge.Engine != "" {
		l.engine = cfg.Edge.Engine
	}
	if roles.Consumer || roles.Edge || roles.Engine && cfg.Edge.Engine == "" {
		l.store, l.dsn = cfg.Store.Driver, redactDSN(cfg.Store.Driver, cfg.Store.DSN)
	}
	return l
}

// redisAddrs are the addresses of each Redis deployment: "default", and
// "hot0", "hot1", … for each hot shard ("hot" is default's when there is
// none).
func redisAddrs(c shard.Config) map[string][]string {
	out := map[string][]string{"default": hostPorts(c.Default.Addrs)}
	hot := c.Hot.Shards()
	if len(hot) == 0 {
		out["hot"] = hostPorts(c.Default.Addrs)
	}
	for i, h := range hot {
		out[shard.HotName(i)] = hostPorts(h.Addrs)
	}
	return out
}

// hostPorts drops any user information from addresses (a password never
// belongs in an address, but should one be written there it is not
// logged).
func hostPorts(addrs []string) []string {
	out := make([]string, len(addrs))
	for i, a := range addrs {
		if at := strings.LastIndexByte(a, '@'); at >= 0 {
			a = a[at+1:]
		}
		out[i] = a
	}
	return out
}

// redactDSN is a DSN fit for a log: MySQL's with its password replaced,
// SQLite's path without its query (pragmas). A MySQL DSN that does not
// parse is not shown at all.
func redactDSN(driver, dsn string) string {
	if driver == "mysql" {
		mc, err := mysql.ParseDSN(dsn)
		if err != nil {
			return "(not shown: does not parse)"
		}
		if mc.Passwd != "" {
			mc.Passwd = "xxxxx"
		}
		return mc.FormatDSN()
	}
	path, _, _ := strings.Cut(dsn, "?")
	return path
}

// fields are the start line as log fields.
func (l startLine) fields() []zap.Field {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown (" + err.Error() + ")"
	}
	brokers := slices.Compact(slices.Sorted(slices.Values(hostPorts(l.brokers))))
	f := []zap.Field{zap.String("role", l.role), zap.Any("listeners", l.listeners)}
	if l.redis != nil {
		f = append(f, zap.Any("redis", l.redis))
	}
	if len(brokers) > 0 {
		f = append(f, zap.Strings("brokers", brokers))
	}
	if l.engine != "" {
		f = append(f, zap.String("engine", l.engine))
	}
	if l.store != "" {
		f = append(f, zap.String("store", l.store), zap.String("dsn", l.dsn))
	}
	return append(f, zap.String("host", host), zap.Int("pid", os.Getpid()), zap.String("version", version))
}

// startup logs a process's two start-up lines: "starting" with its start
// line, and "ready" once it serves (after the waits for its servers and
// the building of its parts).
type startup struct {
	log   *zap.Logger
	role  string
	began time.Time
}

// announce logs l and answers the startup whose ready logs the second
// line.
func announce(log *zap.Logger, l startLine) *startup {
	log = log.WithOptions(zap.AddCallerSkip(1)) // the caller is the process's command
	log.Info("starting", l.fields()...)
	return &startup{log: log, role: l.role, began: time.Now()}
}

// ready logs that the process serves, and how long it took since
// announce (waiting for its servers included). A nil startup logs
// nothing.
func (s *startup) ready(fields ...zap.Field) {
	if s == nil {
		return
	}
	s.log.Info("ready", append([]zap.Field{zap.String("role", s.role), zap.Duration("took", time.Since(s.began))}, fields...)...)
}

// named pairs names with addresses (name, address, name, address, …),
// leaving out the empty ones.
func named(pairs ...string) map[string]string {
	m := map[string]string{}
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i+1] != "" {
			m[pairs[i]] = pairs[i+1]
		}
	}
	return m
}

// addrOf is ln's address, "" for none.
func addrOf(ln net.Listener) string {
	if ln == nil {
		return ""
	}
	return ln.Addr().String()
}
