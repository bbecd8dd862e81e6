package chaos

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"seckill/internal/faultproxy"
	"seckill/internal/testenv"
)

const (
	adminToken  = "chaos-admin-token-0123456789abcdef"
	tokenKeyID  = "k1"
	tokenSecret = "chaos-token-secret-0123456789abcdef"
	activityID  = 1
	skuNormal   = 101 // on the default Redis
	skuHot      = 102 // on the hot-SKU Redis
)

// Options shape one system.
type Options struct {
	// Sidecar runs the engine as its own process (`seckill engine`) that
	// the edge calls over a unix socket; otherwise in-process.
	Sidecar bool
	// RedisPersist runs both redis-servers with the append-only file as
	// production does (appendonly yes, appendfsync everysec); otherwise
	// without any persistence, so a restart comes back empty.
	RedisPersist bool
	// DBProxy puts a fault proxy (internal/faultproxy: latency, refusal,
	// partition) between the processes and MariaDB.
	DBProxy bool
	// BrokerProxy puts a fault proxy between the processes and the broker:
	// the broker advertises the proxy's address, so every Kafka
	// connection goes through it.
	BrokerProxy bool
	// EdgeEnv and ConsumerEnv are extra SECKILL_* overrides for the edge
	// and the consumer processes (README "Configuration").
	EdgeEnv, ConsumerEnv []string
	// Partitions of the orders topic. Default 4.
	Partitions int
	// NoConsumer leaves the consumer out (security tests that need no
	// orders).
	NoConsumer bool
	// Queue turns queue mode on in every process (engine.queue.enabled):
	// the edge takes the attempts of a SKU switched to queue mode into
	// the attempts topic, the engine — in-process, or the sidecar — runs
	// the drainer.
	Queue bool
	// RedisAddr, when set, is the default Redis as the processes address
	// it, run by the test (the failover test's master and replica behind
	// an address that moves); otherwise the system starts its own.
	RedisAddr string
}

// System is one seckill deployment as separate processes on real servers.
type System struct {
	t    testing.TB
	opts Options
	dir  string
	bin  string

	Redis, Hot *testenv.Redis
	Broker     *proc
	brokerAddr string
	Engine     *proc // sidecar mode only
	engineAddr string
	Edge       *proc
	Consumer   *proc
	consumers  []*proc // every consumer process ever started (replay)

	edgeAddr, adminAddr string
	cfgPath             string
	dsn                 string            // what the processes use (through the proxy if any)
	directDSN           string            // what the checker uses
	proxy               *faultproxy.Proxy // DBProxy only
	brokerProxy         *faultproxy.Proxy // BrokerProxy only
	brokerListen        string            // where the broker listens (brokerAddr unless proxied)
	db                  *sql.DB
	env                 []string
	client              *http.Client
	procs               []*proc
	answers             atomic.Int64 // purchase answers since the crowd started
	expects             []verdict    // scenario preconditions, reported with the invariants
	// sweeper: the code has an orphan sweeper (reconcile.orphan_grace), so
	// no occupancy may hold stock without an order at quiescence.
	sweeper bool

	// Where the checker reads Redis (books.go). defaultAddrs, when
	// set, is the default Redis as the processes address it (a Redis
	// Cluster's nodes, or a failover address); otherwise Redis.Addr.
	// skuShard names the single redis-server of a SKU that does not live
	// on the default Redis (the fleet's hot SKUs); otherwise skuHot lives
	// on Hot.
	defaultAddrs []string
	skuShard     map[int64]string
	// edgeAddrs, when set, are several edges: each buyer buys at one of
	// them (user id mod count), as a load balancer with sticky sessions
	// would send it.
	edgeAddrs []string
}

// startSystem starts redis-servers, the broker, the engine sidecar (in
// sidecar mode), the edge and the consumer, and waits until each is ready.
func startSystem(t testing.TB, o Options) *System {
	t.Helper()
	if o.Partitions == 0 {
		o.Partitions = 4
	}
	s := &System{t: t, opts: o, dir: t.TempDir(), bin: seckillBinary(t)}
	var redisOpts []testenv.RedisOption
	if o.RedisPersist {
		redisOpts = append(redisOpts, testenv.WithRedisArgs("--appendonly", "yes", "--appendfsync", "everysec"))
	}
	if o.RedisAddr != "" {
		s.defaultAddrs = []string{o.RedisAddr}
	} else {
		s.Redis = testenv.StartRedis(t, redisOpts...)
	}
	s.Hot = testenv.StartRedis(t, redisOpts...)

	s.directDSN = testenv.MySQL(t)
	s.dsn = s.directDSN
	if o.DBProxy {
		host := dsnHost(t, s.directDSN)
		s.proxy = startProxy(t, host)
		s.dsn = strings.Replace(s.directDSN, "tcp("+host+")", "tcp("+s.proxy.Addr()+")", 1)
	}
	db, err := sql.Open("mysql", s.directDSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	s.db = db

	s.brokerAddr = fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	s.brokerListen = s.brokerAddr
	brokerArgs := []string{}
	if o.BrokerProxy {
		s.brokerListen = fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
		s.brokerProxy = startProxy(t, s.brokerListen)
		s.brokerAddr = s.brokerProxy.Addr()
		brokerArgs = append(brokerArgs, "--advertise", s.brokerAddr)
	}
	s.edgeAddr = fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	s.adminAddr = fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	s.engineAddr = "unix://" + filepath.Join(s.dir, "engine.sock")
	s.writeConfig()
	s.env = testenv.CleanEnv()
	s.client = &http.Client{
		Transport: &http.Transport{MaxIdleConnsPerHost: 128, MaxConnsPerHost: 128, IdleConnTimeout: 30 * time.Second},
		Timeout:   10 * time.Second,
	}
	t.Cleanup(s.client.CloseIdleConnections)

	s.Broker = s.newProc("broker", append([]string{"broker", "--listen", s.brokerListen,
		"--data-dir", filepath.Join(s.dir, "broker"), "--partitions", fmt.Sprint(o.Partitions)}, brokerArgs...), nil)
	s.mustStart(s.Broker, s.waitBroker)
	if o.Sidecar {
		s.Engine = s.newProc("engine", []string{"engine", "--config", s.cfgPath, "--listen", s.engineAddr}, nil)
		s.mustStart(s.Engine, s.waitEngine)
	}
	edgeArgs := []string{"edge", "--config", s.cfgPath, "--listen", s.edgeAddr, "--admin-listen", s.adminAddr}
	if o.Sidecar {
		edgeArgs = append(edgeArgs, "--engine", s.engineAddr)
	}
	s.Edge = s.newProc("edge", edgeArgs, o.EdgeEnv)
	s.mustStart(s.Edge, s.waitEdge)
	if !o.NoConsumer {
		s.Consumer = s.newConsumer("consumer", "")
		s.mustStart(s.Consumer, nil)
	}
	s.cleanupAtEnd()
	return s
}

// cleanupAtEnd stops every process at the end of the test, fails it on a
// data race any of them reported, and keeps the logs of a failed test.
func (s *System) cleanupAtEnd() {
	t := s.t
	t.Cleanup(func() {
		s.stopAll()
		// A process built with -race writes what it found to its log
		// (and exits 66); a race found at any time fails the scenario.
		for _, r := range s.raceReports() {
			t.Errorf("data race:\n%s", r)
		}
	})
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("SECKILL_CHAOS_KEEP_LOGS") != "" {
			s.dumpLogs()
		}
	})
}

// newConsumer makes a consumer process, in its own group when group is set.
func (s *System) newConsumer(name, group string) *proc {
	// A static member of its group (consumer.instance_id): restarted after
	// a SIGKILL, it takes its partitions back at once.
	env := append([]string{"SECKILL_CONSUMER_INSTANCE_ID=chaos-" + name}, s.opts.ConsumerEnv...)
	if group != "" {
		env = append(env, "SECKILL_CONSUMER_GROUP="+group)
	}
	p := s.newProc(name, []string{"consumer", "--config", s.cfgPath}, env)
	s.consumers = append(s.consumers, p)
	return p
}

func (s *System) newProc(name string, args, env []string) *proc {
	p := newProc(s.t, s.dir, name, s.bin, args, append(append([]string(nil), s.env...), env...))
	s.procs = append(s.procs, p)
	return p
}

func (s *System) mustStart(p *proc, ready func(*proc) error) {
	s.t.Helper()
	if err := s.restart(p, ready); err != nil {
		s.t.Fatal(err)
	}
}

// restart starts p (again) and waits until ready says so.
func (s *System) restart(p *proc, ready func(*proc) error) error {
	if err := p.Start(); err != nil {
		return err
	}
	if ready == nil {
		return nil
	}
	return ready(p)
}

func (s *System) waitBroker(p *proc) error {
	return p.Await(20*time.Second, "broker listening", func() error { return dialOK("tcp", s.brokerListen) })
}

func (s *System) waitEngine(p *proc) error {
	return p.Await(30*time.Second, "engine socket", func() error {
		return dialOK("unix", strings.TrimPrefix(s.engineAddr, "unix://"))
	})
}

func (s *System) waitEdge(p *proc) error {
	return p.Await(30*time.Second, "edge /readyz 200", func() error {
		st, body, err := s.get("/readyz", 0)
		if err != nil {
			return err
		}
		if st != 200 {
			return fmt.Errorf("readyz %d %s", st, body)
		}
		return nil
	})
}

// startProxy starts a fault proxy to upstream, closed at the end of the
// test.
func startProxy(t testing.TB, upstream string) *faultproxy.Proxy {
	t.Helper()
	p, err := faultproxy.Start(upstream)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

func dialOK(network, addr string) error {
	c, err := net.DialTimeout(network, addr, 300*time.Millisecond)
	if err != nil {
		return err
	}
	c.Close()
	return nil
}

// stopAll stops every process gently (SIGTERM: the edge flushes, the
// consumer drains), bounded, the broker last.
func (s *System) stopAll() {
	for i := len(s.procs) - 1; i >= 0; i-- {
		if p := s.procs[i]; p != s.Broker {
			p.Stop(syscall.SIGTERM, 10*time.Second)
		}
	}
	if s.Broker != nil {
		s.Broker.Stop(syscall.SIGTERM, 10*time.Second)
	}
}

// dumpLogs shows the end of every process' log and keeps the whole logs in
// $TMPDIR/seckill-chaos-logs/<test> (replaced by the next failing run).
func (s *System) dumpLogs() {
	keep := filepath.Join(os.TempDir(), "seckill-chaos-logs", strings.NewReplacer("/", "_", " ", "_").Replace(s.t.Name()))
	os.RemoveAll(keep)
	_ = os.MkdirAll(keep, 0o755)
	for _, p := range s.procs {
		s.t.Logf("----- last lines of %s:\n%s", p.Name, p.Tail(30))
		if b, err := os.ReadFile(p.Log); err == nil {
			_ = os.WriteFile(filepath.Join(keep, filepath.Base(p.Log)), b, 0o644)
		}
	}
	s.t.Logf("full process logs kept in %s", keep)
}

var dsnHostRe = regexp.MustCompile(`tcp\(([^)]+)\)`)

func dsnHost(t testing.TB, dsn string) string {
	m := dsnHostRe.FindStringSubmatch(dsn)
	if m == nil {
		t.Fatalf("DSN %q names no tcp(host:port)", dsn)
	}
	return m[1]
}

// writeConfig writes the YAML every process reads: the servers, timings
// and secrets of this system, and for everything else the binary's own
// defaults (README "Configuration": unknown keys are refused, so a key the
// code no longer knows fails the start loudly).
//
// The crowd comes from 127.0.0.1, so the per-address limits must let it
// through (DESIGN §4: as the dev and bench configs do); the per-user limits
// and the admission gate stay as in production. The orphan sweeper
// releases occupancies whose message cannot come any more once
// reconcile.orphan_grace has passed; it must exceed engine.occupy_timeout
// + engine.kafka.send_timeout (3.5s): 5s keeps the tests short.
func (s *System) writeConfig() {
	s.writeConfigRedis(fmt.Sprintf("  default:\n    addrs: [%q]\n  hot:\n    addrs: [%q]\n", s.defaultRedis()[0], s.Hot.Addr))
}

// writeConfigRedis writes the configuration with redis, the body of its
// redis section (the fleet's: a cluster and several hot shards).
func (s *System) writeConfigRedis(redis string) {
	cfg := fmt.Sprintf(`log:
  format: console
  level: info
redis:
%s  insecure: true
engine:
  kafka:
    brokers: [%q]
%sconsumer:
  brokers: [%q]
  max_wait: 10ms
  # A killed consumer's partitions move on sooner.
  session_timeout: 6s
  heartbeat_interval: 2s
  rejoin_backoff: 1s
store:
  driver: mysql
  dsn: %q
edge:
  listen: %q
  identity: any
  identity_insecure: true  # the suite runs every part on one machine
  read_timeout: 2s
  write_timeout: 2s
  max_conns_per_ip: 0
  rate:
    ip_exempt: [127.0.0.1/32]
    ip_per_second: 0
admin:
  listen: %q
  token: %q
token:
  keys: [{id: %q, secret: %q}]
  ttl: 1m
order_signing:
  keys: [{id: chaos1, secret: chaos-order-secret-0123456789abcdef}]
reconcile:
  orphan_grace: 5s
  sweep_interval: 1s
  watch_interval: 1s
`, redis, s.brokerAddr, s.queueConfig(), s.brokerAddr, s.dsn, s.edgeAddr, s.adminAddr, adminToken, tokenKeyID, tokenSecret)
	s.sweeper = true
	s.cfgPath = filepath.Join(s.dir, "seckill.yaml")
	if err := os.WriteFile(s.cfgPath, []byte(cfg), 0o600); err != nil {
		s.t.Fatal(err)
	}
}

// queueConfig is the engine.queue section (Options.Queue), indented
// under engine.
func (s *System) queueConfig() string {
	if !s.opts.Queue {
		return ""
	}
	return "  queue:\n    enabled: true\n"
}

// queueMode switches each SKU of activity 1 to queue mode through the
// admin API (PUT /admin/v1/skus/{id}/mode, as on-call does), drained at
// rate attempts per second (0: as fast as the shard allows), and waits
// until the edge sells them so: its public view of the activity says
// "queued".
func (s *System) queueMode(rate int64, skus ...int64) {
	s.t.Helper()
	for _, sku := range skus {
		body := map[string]any{"mode": "queue", "rate": rate, "activityId": activityID}
		if err := s.adminJSON("PUT", fmt.Sprintf("/admin/v1/skus/%d/mode", sku), body, nil); err != nil {
			s.t.Fatalf("queue mode for sku %d: %v", sku, err)
		}
	}
	testenv.EventuallyOK(s.t, fmt.Sprintf("skus %v queued at the edge", skus), 15*time.Second, func() error {
		st, body, err := s.get(fmt.Sprintf("/api/v1/flash-sale/activities/%d", activityID), 0)
		if err != nil || st != 200 {
			return fmt.Errorf("%d %s %v", st, body, err)
		}
		var v struct {
			SKUs []struct {
				ID     int64 `json:"id"`
				Queued bool  `json:"queued"`
			} `json:"skus"`
		}
		if err := json.Unmarshal(body, &v); err != nil {
			return err
		}
		queued := map[int64]bool{}
		for _, k := range v.SKUs {
			queued[k.ID] = k.Queued
		}
		for _, sku := range skus {
			if !queued[sku] {
				return fmt.Errorf("sku %d not queued: %s", sku, body)
			}
		}
		return nil
	})
}

// ---- HTTP helpers ----

func (s *System) url(path string) string { return "http://" + s.edgeAddr + path }

// buyURL is the purchase URL user buys at: the one edge, or one of several.
func (s *System) buyURL(user int64) string {
	const path = "/api/v1/flash-sale/order"
	if n := int64(len(s.edgeAddrs)); n > 0 {
		return "http://" + s.edgeAddrs[user%n] + path
	}
	return s.url(path)
}

// get sends GET path as user (0: no X-User-Id).
func (s *System) get(path string, user int64) (int, []byte, error) {
	return s.do("GET", s.url(path), user, nil, nil)
}

func (s *System) do(method, url string, user int64, body []byte, hdr map[string]string) (int, []byte, error) {
	st, b, _, err := s.doHeader(method, url, user, body, hdr)
	return st, b, err
}

// doHeader is do that also returns the answer's headers.
func (s *System) doHeader(method, url string, user int64, body []byte, hdr map[string]string) (int, []byte, http.Header, error) {
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		return 0, nil, nil, err
	}
	if user > 0 {
		req.Header.Set("X-User-Id", fmt.Sprint(user))
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, resp.Header, err
}

// admin calls the admin API with the right token.
func (s *System) admin(method, path string, body any) (int, []byte, error) {
	var b []byte
	if body != nil {
		var err error
		if b, err = json.Marshal(body); err != nil {
			return 0, nil, err
		}
	}
	return s.do(method, "http://"+s.adminAddr+path, 0, b, map[string]string{"Authorization": "Bearer " + adminToken})
}

// adminJSON calls the admin API and decodes a 200 answer into out.
func (s *System) adminJSON(method, path string, body, out any) error {
	st, b, err := s.admin(method, path, body)
	if err != nil {
		return err
	}
	if st != 200 {
		return fmt.Errorf("%s %s: %d %s", method, path, st, b)
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// activity is the body of POST /admin/v1/activities (README "Operations").
type activity struct {
	ID            int64     `json:"id"`
	Start         time.Time `json:"start"`
	End           time.Time `json:"end"`
	State         string    `json:"state,omitempty"`
	RequireToken  bool      `json:"requireToken"`
	ReservedUsers []int64   `json:"reservedUsers,omitempty"`
	SKUs          []skuSpec `json:"skus"`
}

type skuSpec struct {
	ID           int64  `json:"id"`
	Stock        int64  `json:"stock"`
	Price        string `json:"price"`
	LimitPerUser int64  `json:"limitPerUser"`
	Hot          bool   `json:"hot"`
	// HotShard places a hot SKU on that hot shard (0-based; nil: the
	// placement rule decides).
	HotShard *int `json:"hotShard,omitempty"`
	// Buckets splits the SKU's stock into that many sub-ledgers (0 or 1:
	// not split); HotShards pins bucket b on hot shard HotShards[b mod len].
	Buckets   int   `json:"buckets,omitempty"`
	HotShards []int `json:"hotShards,omitempty"`
}

// stateOnline is an activity that sells (README: ONLINE / OFFLINE).
const stateOnline = "ONLINE"

// saleActivity is the sale most scenarios run: activity 1, open from a
// minute ago for an hour, a normal SKU on the default Redis and a hot SKU on
// the hot shard, one unit per user.
func saleActivity(normalStock, hotStock int64) activity {
	now := time.Now()
	return activity{
		ID: activityID, Start: now.Add(-time.Minute).Truncate(time.Second), End: now.Add(time.Hour).Truncate(time.Second),
		State: stateOnline,
		SKUs: []skuSpec{
			{ID: skuNormal, Stock: normalStock, Price: "9.90", LimitPerUser: 1},
			{ID: skuHot, Stock: hotStock, Price: "19.90", LimitPerUser: 1, Hot: true},
		},
	}
}

// preheat creates the activity through the admin API, as on-call does, and
// waits until the edge sells it.
func (s *System) preheat(a activity) {
	s.t.Helper()
	if err := s.adminJSON("POST", "/admin/v1/activities", a, nil); err != nil {
		s.t.Fatalf("create activity: %v", err)
	}
	testenv.EventuallyOK(s.t, fmt.Sprintf("activity %d visible at the edge", a.ID), 15*time.Second, func() error {
		st, body, err := s.get(fmt.Sprintf("/api/v1/flash-sale/activities/%d", a.ID), 0)
		if err == nil && st == 200 {
			return nil
		}
		return fmt.Errorf("%d %s %v", st, body, err)
	})
}

// lag is the consumer group's total lag as the admin API reports it.
func (s *System) lag() (int64, error) {
	var out struct {
		Total int64 `json:"total"`
	}
	err := s.adminJSON("GET", "/admin/v1/lag", nil, &out)
	return out.Total, err
}

// serverTime reads Redis TIME on the default Redis: the clock the occupy
// script judges windows by.
func (s *System) serverTime() time.Time {
	s.t.Helper()
	c := s.Redis.Client(s.t)
	v, err := c.Do(context.Background(), c.B().Time().Build()).AsStrSlice()
	if err != nil || len(v) != 2 {
		s.t.Fatalf("redis TIME: %v %v", v, err)
	}
	var sec, usec int64
	fmt.Sscan(v[0], &sec)
	fmt.Sscan(v[1], &usec)
	return time.Unix(sec, usec*1000)
}

// serverOffset estimates Redis TIME minus the local clock: of 20 round
// trips, the quickest, taking Redis' reading as made at its midpoint. The
// error is at most half that round trip.
func (s *System) serverOffset() time.Duration {
	s.t.Helper()
	c := s.Redis.Client(s.t)
	best, offset := time.Duration(-1), time.Duration(0)
	for range 20 {
		t0 := time.Now()
		v, err := c.Do(context.Background(), c.B().Time().Build()).AsStrSlice()
		t1 := time.Now()
		if err != nil || len(v) != 2 {
			s.t.Fatalf("redis TIME: %v %v", v, err)
		}
		var sec, usec int64
		fmt.Sscan(v[0], &sec)
		fmt.Sscan(v[1], &usec)
		if rtt := t1.Sub(t0); best < 0 || rtt < best {
			best, offset = rtt, time.Unix(sec, usec*1000).Sub(t0.Add(rtt/2))
		}
	}
	s.t.Logf("Redis TIME - local clock: %v (best round trip of 20: %v)", offset, best)
	return offset
}

// expect records a scenario's own condition: it is reported (and fails the
// test) with the invariants, so the table names it.
func (s *System) expect(name string, ok bool, format string, args ...any) {
	s.expects = append(s.expects, verdict{Name: name, OK: ok, Detail: fmt.Sprintf(format, args...)})
}

// raceReports returns every data race report in the processes' logs (the
// seckill binary is built with -race), each with the lines that follow it.
func (s *System) raceReports() []string {
	var out []string
	for _, p := range s.procs {
		b, err := os.ReadFile(p.Log)
		if err != nil {
			continue
		}
		text := string(b)
		for {
			i := strings.Index(text, "WARNING: DATA RACE")
			if i < 0 {
				break
			}
			text = text[i:]
			end := strings.Index(text, "==================")
			if end < 0 || end > 6000 {
				end = min(len(text), 6000)
			}
			out = append(out, p.Name+": "+text[:end])
			text = text[len("WARNING: DATA RACE"):]
		}
	}
	return out
}
