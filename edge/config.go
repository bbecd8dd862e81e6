package edge

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"seckill/blocklist"
	"seckill/internal/identity"
	"seckill/sale"
)

// Config is the edge section.
type Config struct {
	// Listen is the public listener. Default 127.0.0.1:8080.
	Listen string `yaml:"listen"`
	// Engine is the sidecar engine address ("unix:///path.sock",
	// "tcp://host:port"); empty runs the engine in-process.
	Engine string `yaml:"engine"`
	// EngineSecret is the sidecar's shared secret the client sends
	// ("Authorization: Bearer …"); empty uses engine.sidecar_secret. Set it
	// from the environment, SECKILL_EDGE_ENGINE_SECRET. Default none.
	EngineSecret string `yaml:"engine_secret"`
	// EngineTLSCert and EngineTLSKey are the PEM certificate and key the
	// edge presents to a TLS sidecar that requires client certificates
	// (engine.sidecar_tls_ca signed it). Default none.
	EngineTLSCert string `yaml:"engine_tls_cert"`
	EngineTLSKey  string `yaml:"engine_tls_key"`
	// MaxBodyBytes refuses larger request bodies before parsing (413); it
	// is also the server's MaxRequestBodySize. Default 4096.
	MaxBodyBytes int `yaml:"max_body_bytes"`
	// ReadBufferSize is the per-connection read buffer, which also caps the
	// request line plus headers (larger ones get 431). Default 4096.
	ReadBufferSize int `yaml:"read_buffer_size"`
	// MaxConns caps concurrent connections; 0 keeps fasthttp's default
	// (256Ki).
	MaxConns int `yaml:"max_conns"`
	// MaxConnsPerIP caps concurrent connections from one peer address
	// (fasthttp answers 429 and closes the connection past it); 0: no cap.
	// It counts the TCP peer, so behind a load balancer or CDN it counts
	// the proxy's connections: raise it there. Default 256.
	MaxConnsPerIP int `yaml:"max_conns_per_ip"`
	// TrustedProxies are the CIDR prefixes (or addresses) of the proxies in
	// front of the edge. X-Forwarded-For is honoured only when the peer is
	// one of them, and then the client is the right-most address that is
	// not; otherwise the client is the peer. The client address feeds the
	// IP blocklist and the per-IP limit. Default none.
	TrustedProxies []string `yaml:"trusted_proxies"`
	// Identity is how far the edge believes X-User-Id (internal/identity):
	// "any" (dev and bench only: any peer's header), "trusted_proxies"
	// (only from a TCP peer in TrustedProxies; anyone else 401) or
	// "signed" (the gateway signs the id and a timestamp with one of
	// IdentityKeys; missing, stale or wrong 401). Default signed: the
	// header proves itself, whatever the network between gateway and edge
	// (behind a published container port every client's peer address is
	// the bridge's, which trusted_proxies could not tell apart), and a
	// gateway that forgets to strip a client's X-User-Id cannot lend it
	// credit. `seckill dev` and bench use any.
	Identity string `yaml:"identity"`
	// IdentityInsecure lets `seckill edge` start with identity any, which
	// it refuses otherwise: any peer that reaches the listener buys as any
	// user. For load tests and fault suites on one machine only. Default
	// false.
	IdentityInsecure bool `yaml:"identity_insecure"`
	// IdentityKeys are the gateway's signing keys for identity signed:
	// the gateway signs with the first, every listed key verifies (list a
	// new key first, keep the old one while gateways switch). Secrets of
	// at least 32 characters, from the environment:
	// SECKILL_EDGE_IDENTITY_KEYS=g2:<secret>,g1:<old secret>.
	IdentityKeys []identity.Key `yaml:"identity_keys"`
	// IdentitySkew is how old X-User-Ts may be (1s to 30s; a clock up to
	// identity.FutureSkew, 2s, ahead passes too): a signature is a bearer
	// credential for its one request (method, target, body) that long.
	// Default 5s.
	IdentitySkew time.Duration `yaml:"identity_skew"`
	// PublicOps serves /readyz (generic body) and /metrics on the public
	// listener as well, outside the address checks. Production (prod.yaml)
	// sets it false and serves them on the admin listener (Server.MountOps);
	// dev and bench keep them. Default true, for processes and suites that
	// write their own configuration and read the edge's /metrics.
	PublicOps bool `yaml:"public_ops"`
	// Rate holds the rate limits.
	Rate RateConfig `yaml:"rate"`
	// Blocklist holds the configured blocklists.
	Blocklist BlocklistConfig `yaml:"blocklist"`
	// Risk is the optional call to a risk service (risk.go); off by
	// default.
	Risk RiskConfig `yaml:"risk"`
	// Degrade holds the defaults of on-call's degrade switches (degrade.go).
	Degrade DegradeConfig `yaml:"degrade"`
	// ResultStream shapes the result streams (SSE) the edge serves: per-user
	// cap, heartbeat, per-event write deadline (a stream is not bound by
	// WriteTimeout), longest wait.
	ResultStream StreamConfig `yaml:"result_stream"`
	// ReadTimeout, WriteTimeout, IdleTimeout close slow or idle clients.
	// Defaults 5s, 5s, 60s.
	ReadTimeout  time.Duration `yaml:"read_timeout"`
	WriteTimeout time.Duration `yaml:"write_timeout"`
	IdleTimeout  time.Duration `yaml:"idle_timeout"`
	// SoldOutTTL is how long a local sold-out flag lives without being
	// refreshed (the fallback when an event is missed). Default 2s.
	SoldOutTTL time.Duration `yaml:"soldout_ttl"`
	// HoldersTTL is how long the edge remembers that a buyer holds a
	// ticket for a SKU (the engine answered QUEUING or DUPLICATE); their
	// attempts meanwhile pass the SKU's admission gate without spending it
	// (holders.go; the engine still answers them). 0 turns it off.
	// Default 5s.
	HoldersTTL time.Duration `yaml:"holders_ttl"`
	// HoldersMax is the size of the holders table: its slots, rounded up
	// to a power of two, allocated at start (8 bytes each) when
	// HoldersTTL is not 0. It bounds the holders remembered; a buyer can
	// be evicted before it is full, by two others whose keys share the
	// buyer's set (holders.go): size it at about twice the buyers expected
	// to hold a ticket within HoldersTTL. 1024 to 4194304; default 1048576.
	HoldersMax int `yaml:"holders_max"`
	// DBReadsPerUser bounds the orders-database reads one user's ids may
	// cause a second (burst five times it) on the result route's and the
	// result stream's fallback and the pay route (DBBound); past it 429.
	// 0: no bound. Default 2.
	DBReadsPerUser float64 `yaml:"db_reads_per_user"`
	// DBMissTTL is how long an id the database did not know is answered
	// "not found" without another read. Default 30s.
	DBMissTTL time.Duration `yaml:"db_miss_ttl"`
	// AccessLogEvery samples the access log: one request in this many is
	// logged at info (with its answer, which names the requestNo); 0 logs
	// none. Default 1000.
	AccessLogEvery int `yaml:"access_log_every"`
	// RefreshInterval reloads the activity catalog. Default 2s.
	RefreshInterval time.Duration `yaml:"refresh_interval"`
	// RejectFlush is how often the free rejections counted per activity,
	// SKU and reason go to the request log's minute counters (with a
	// decision log, see decisions.go). Default 10s.
	RejectFlush time.Duration `yaml:"reject_flush"`
	// ViewTTL bounds how long a cached per-SKU activity view is reused
	// before it is rebuilt from the catalog (views are also rebuilt at
	// every window boundary and catalog reload). Default 1s.
	ViewTTL time.Duration `yaml:"view_ttl"`
	// ClockSyncInterval re-samples the offset between the local clock and
	// Redis TIME, the clock the occupy script judges windows by. Default 5s.
	ClockSyncInterval time.Duration `yaml:"clock_sync_interval"`
	// FleetHeartbeat is how often the edge refreshes its member of the
	// live edges (sk:edges on the default Redis) and reads their count,
	// which splits the admission gate (edge.rate.gate_edges 0). Default
	// 1s. Read at start; a reload does not change it.
	FleetHeartbeat time.Duration `yaml:"fleet_heartbeat"`
	// FleetTTL is how long an edge stays counted after its last
	// heartbeat: a killed edge's share goes to the others after it.
	// Must exceed fleet_heartbeat (a heartbeat late by less than the
	// difference does not drop the edge). Default 3s.
	FleetTTL time.Duration `yaml:"fleet_ttl"`
	// FleetMaxEdges bounds the live edge count: anything that can write
	// the default Redis can add members to sk:edges, and a count past the
	// bound would shrink every edge's share of the admission gate. A count
	// above it is refused (a warning, seckill_edge_fleet_refused_total):
	// the edge keeps its last count within the bound (the bound itself if
	// it never had one). Set it at or above the most edges the fleet runs
	// (deploy/k8s: the HPA's maxReplicas). Default 64.
	FleetMaxEdges int64 `yaml:"fleet_max_edges"`
	// RedisTimeout bounds the edge's own Redis calls: result reads,
	// readiness pings, TIME samples, catalog loads. Default 500ms.
	RedisTimeout time.Duration `yaml:"redis_timeout"`
	// TokenVerifyTimeout bounds TokenVerifier.Verify, which spends a
	// qualification token (a Redis call); past it the buyer gets 503 BUSY
	// (fail closed). Default 500ms.
	TokenVerifyTimeout time.Duration `yaml:"token_verify_timeout"`
	// TokenRefundTimeout bounds TokenRefunder.Refund, which gives a spent
	// token back after the engine answered busy; past it the token stays
	// spent and the buyer asks for a new one. Default 500ms.
	TokenRefundTimeout time.Duration `yaml:"token_refund_timeout"`
}

// RateConfig is edge.rate: the limits in the order they apply. Every
// refusal is 429 with Retry-After. A rate of 0 (or limit, or factor)
// disables its layer. The defaults are production's: strict per client
// address and per user; dev and bench exempt the loopback address.
type RateConfig struct {
	// IPPerSecond and IPBurst limit each client address, in process
	// (IPv6 clients per /64). Defaults 20/s, burst 40.
	IPPerSecond float64 `yaml:"ip_per_second"`
	IPBurst     int     `yaml:"ip_burst"`
	// IPExempt are CIDR prefixes (or addresses) the per-IP limit does not
	// apply to — a load generator, a known NAT gateway — never the
	// blocklist. Default none.
	IPExempt []string `yaml:"ip_exempt"`
	// UserPerSecond and UserBurst limit each user's purchase and token
	// requests, in process. Defaults 5/s, burst 10.
	UserPerSecond float64 `yaml:"user_per_second"`
	UserBurst     int     `yaml:"user_burst"`
	// MaxKeys bounds the memory of each in-process limiter (addresses,
	// users). Default 262144.
	MaxKeys int `yaml:"max_keys"`
	// UserSKULimit purchase attempts per user × SKU per UserSKUWindow,
	// counted in Redis by the engine's occupy script, on the SKU's shard
	// in the same call that takes the stock, and shared by every edge and
	// engine (the attempt that takes a ticket is counted only when the
	// ticket is released: a holder's limit attempts are besides it): the
	// app copies them into engine.Config.Window (`seckill engine` reads
	// this section of the same file). 0 turns the window off. Defaults 10
	// per 10s.
	UserSKULimit  int           `yaml:"user_sku_limit"`
	UserSKUWindow time.Duration `yaml:"user_sku_window"`
	// GateK and GateFloor: the edges together let at most
	// max(GateK × remaining, GateFloor) purchase attempts per second and
	// SKU through to the engine, remaining stock as the engine last
	// answered. Defaults 10 and 100.
	GateK     float64 `yaml:"gate_k"`
	GateFloor float64 `yaml:"gate_floor"`
	// GateEdges is the number of edges sharing the gate: each admits its
	// 1/n share (GateK / n × remaining, at least GateFloor / n per
	// second, always at least one attempt once its time has come). 0 (the
	// default): n is the live edge count, which the edges keep in Redis
	// by heartbeat (edge.fleet_heartbeat, edge.fleet_ttl) — an edge that
	// joins or stops changes every edge's share within a heartbeat, one
	// that is killed after the TTL. More than 0: a fixed n, an override
	// for an operator who wants the split pinned. Either way the balancer
	// must spread buyers evenly.
	GateEdges int `yaml:"gate_edges"`
	// SKUInflight bounds, per SKU and edge, the purchase attempts in
	// flight at once past the local checks (the gate, the engine call);
	// one more waits for a place up to SKUInflightWait, before any Redis
	// call, and is answered 429 if none frees, instead of waiting in the
	// engine's queue (where a wait past engine.occupy_timeout ends as
	// 503). Default
	// 1024: never reached by 256 connections (at most 256 requests in
	// flight), while at ~12k accepted/s on one SKU it keeps the wait
	// inside the engine near 1024 / 12k ≈ 85 ms, well under the 500 ms
	// occupy timeout. 0 disables it.
	SKUInflight int `yaml:"sku_inflight"`
	// SKUInflightWait is how long an attempt past SKUInflight waits,
	// parked at no CPU cost, for a place to free; the places stay full, so
	// the SKU keeps selling at the engine's pace while the crowd waits at
	// the edge. Default 1s (a buyer refused at once would be told to retry
	// in 1 s anyway). 0 answers 429 at once — which, against clients that
	// resend at once (wrk), turns an overload into a flood of 429s that
	// takes the CPU the purchases inside need.
	SKUInflightWait time.Duration `yaml:"sku_inflight_wait"`
}

// BlocklistConfig is edge.blocklist: entries that hold whatever the admin
// API does, and how often the admin API's entries are re-read from Redis
// (the fallback when a blocklist event is missed).
type BlocklistConfig struct {
	// IPs are addresses or CIDR prefixes refused with 403. Default none.
	IPs []string `yaml:"ips"`
	// Users are user ids refused with 403. Default none.
	Users []int64 `yaml:"users"`
	// RefreshInterval re-reads the admin API's entries. Default 10s.
	RefreshInterval time.Duration `yaml:"refresh_interval"`
}

// RiskConfig is edge.risk: the call to a risk service each purchase makes
// after the edge's own checks and before the stock (wire contract in
// risk.go and docs/operations-edge.md).
type RiskConfig struct {
	// URL is the risk service's check endpoint, http:// or https://
	// (e.g. "http://risk.internal:8081/v1/check"). Empty: no risk check
	// (the default).
	URL string `yaml:"url"`
	// Timeout bounds one call, connecting included; past it the
	// activity's policy decides. Default 20ms.
	Timeout time.Duration `yaml:"timeout"`
	// CacheTTL is how long a user's verdict is reused without asking the
	// service again (per edge; failures are not cached); 0 disables the
	// cache. Default 3s.
	CacheTTL time.Duration `yaml:"cache_ttl"`
	// OnError is the policy of an activity that has none of its own
	// (sale.Activity.RiskOnError, switched live by the admin API): "allow"
	// lets a purchase without a verdict go on (degrade open, counted),
	// "deny" answers it 503 BUSY. Default allow.
	OnError string `yaml:"on_error"`
	// MaxConns caps the connections to the risk service; a call finding
	// none free fails at once (then the policy decides). Default 512.
	MaxConns int `yaml:"max_conns"`
	// Breaker is the circuit breaker around the service.
	Breaker BreakerConfig `yaml:"breaker"`
	// Local are the local rules a purchase without a verdict must pass
	// under the policy allow (riskfallback.go).
	Local LocalRiskConfig `yaml:"local"`
	// RecheckInterval is how often the edge re-checks, once the service
	// answers again, the purchases that went through unchecked. Default 1s.
	RecheckInterval time.Duration `yaml:"recheck_interval"`
	// RecheckBatch is how many unchecked purchases one re-check pass
	// asks about at most. Default 200.
	RecheckBatch int `yaml:"recheck_batch"`
	// BlockOnRecheckDeny puts a user whose unchecked purchase the re-check
	// refuses on the user blocklist (every edge, at once): their ticket
	// stands — they were told QUEUING and may have paid — and is listed
	// for review, but they buy nothing more. false only flags the record.
	// Default true.
	BlockOnRecheckDeny bool `yaml:"block_on_recheck_deny"`
}

// BreakerConfig is edge.risk.breaker: the circuit breaker around the risk
// service (sony/gobreaker). While it is open no call is made: every
// purchase is judged by the fallback at once, instead of each waiting out
// the timeout.
type BreakerConfig struct {
	// Failures is the number of failed calls in a row (timeouts and
	// errors) that opens the breaker. Default 5.
	Failures uint32 `yaml:"failures"`
	// OpenFor is how long the breaker stays open before it lets Probes
	// calls through to see whether the service is back. Default 5s.
	OpenFor time.Duration `yaml:"open_for"`
	// Probes is the number of calls let through half-open; as many
	// successes in a row close the breaker, one failure opens it again.
	// Default 1.
	Probes uint32 `yaml:"probes"`
}

// LocalRiskConfig is edge.risk.local: the velocity rules of the fallback
// (the blocklists always apply, before any of this). 0 turns a rule off.
type LocalRiskConfig struct {
	// DevicePerMinute is how many purchases one X-Device-Id may pass per
	// minute without a verdict (purchases without the header meet the IP
	// rule only). Default 3.
	DevicePerMinute int `yaml:"device_per_minute"`
	// IPPerMinute is how many purchases one client address may pass per
	// minute without a verdict. Behind a NAT many buyers share one: raise
	// it where the crowd comes through few addresses. Default 20.
	IPPerMinute int `yaml:"ip_per_minute"`
	// MaxKeys bounds the devices and addresses remembered (each rule).
	// Default 1<<18.
	MaxKeys int `yaml:"max_keys"`
}

// DegradeConfig is edge.degrade: the defaults behind on-call's switches.
type DegradeConfig struct {
	// PollAfter is how long a buyer told QUEUING waits before polling
	// (pollAfterMs and Retry-After of the answers) when the activity sets
	// no pollAfterMs of its own. Default 1s.
	PollAfter time.Duration `yaml:"poll_after"`
	// PausedRetryAfter is the Retry-After of a purchase refused because
	// its activity is paused. Default 5s.
	PausedRetryAfter time.Duration `yaml:"paused_retry_after"`
	// ClosedRetryAfter is the Retry-After of a request to a route on-call
	// closed (orders, pay, events). Default 30s.
	ClosedRetryAfter time.Duration `yaml:"closed_retry_after"`
	// RefreshInterval re-reads the route switches from Redis (events
	// apply them at once). Default 2s.
	RefreshInterval time.Duration `yaml:"refresh_interval"`
}

// DefaultConfig returns the defaults named on each field.
func DefaultConfig() Config {
	return Config{
		Listen:             "127.0.0.1:8080",
		MaxBodyBytes:       4096,
		ReadBufferSize:     4096,
		MaxConnsPerIP:      256,
		PublicOps:          true,
		Identity:           identity.ModeSigned,
		IdentitySkew:       5 * time.Second,
		ReadTimeout:        5 * time.Second,
		WriteTimeout:       5 * time.Second,
		IdleTimeout:        60 * time.Second,
		SoldOutTTL:         2 * time.Second,
		HoldersTTL:         5 * time.Second,
		HoldersMax:         1 << 20,
		DBReadsPerUser:     2,
		DBMissTTL:          30 * time.Second,
		AccessLogEvery:     1000,
		RefreshInterval:    2 * time.Second,
		RejectFlush:        10 * time.Second,
		ViewTTL:            time.Second,
		ClockSyncInterval:  5 * time.Second,
		RedisTimeout:       500 * time.Millisecond,
		FleetHeartbeat:     time.Second,
		FleetTTL:           3 * time.Second,
		FleetMaxEdges:      64,
		TokenVerifyTimeout: 500 * time.Millisecond,
		TokenRefundTimeout: 500 * time.Millisecond,
		Rate: RateConfig{
			IPPerSecond: 20, IPBurst: 40,
			UserPerSecond: 5, UserBurst: 10,
			MaxKeys:      1 << 18,
			UserSKULimit: 10, UserSKUWindow: 10 * time.Second,
			GateK: 10, GateFloor: 100, GateEdges: 0,
			SKUInflight: 1024, SKUInflightWait: time.Second,
		},
		Blocklist: BlocklistConfig{RefreshInterval: 10 * time.Second},
		Risk: RiskConfig{Timeout: 20 * time.Millisecond, CacheTTL: 3 * time.Second, OnError: sale.RiskAllow, MaxConns: 512,
			Breaker:         BreakerConfig{Failures: 5, OpenFor: 5 * time.Second, Probes: 1},
			Local:           LocalRiskConfig{DevicePerMinute: 3, IPPerMinute: 20, MaxKeys: 1 << 18},
			RecheckInterval: time.Second, RecheckBatch: 200, BlockOnRecheckDeny: true},
		Degrade: DegradeConfig{PollAfter: time.Second, PausedRetryAfter: 5 * time.Second, ClosedRetryAfter: 30 * time.Second,
			RefreshInterval: 2 * time.Second},
		ResultStream: DefaultStreamConfig(),
	}
}

// Validate names the first bad key.
func (c *Config) Validate() error {
	if err := c.ResultStream.Validate(); err != nil {
		return err
	}
	switch {
	case c.Listen == "":
		return errors.New("edge.listen must not be empty")
	case c.MaxBodyBytes < 64:
		return errors.New("edge.max_body_bytes must be at least 64")
	case c.ReadBufferSize < 1024:
		return errors.New("edge.read_buffer_size must be at least 1024")
	case c.MaxConns < 0:
		return errors.New("edge.max_conns must not be negative")
	case c.MaxConnsPerIP < 0:
		return errors.New("edge.max_conns_per_ip must not be negative")
	case (c.EngineTLSCert == "") != (c.EngineTLSKey == ""):
		return errors.New("edge.engine_tls_cert and edge.engine_tls_key go together")
	case c.ReadTimeout <= 0 || c.WriteTimeout <= 0 || c.IdleTimeout <= 0:
		return errors.New("edge.read_timeout, edge.write_timeout and edge.idle_timeout must be positive")
	case c.AccessLogEvery < 0:
		return errors.New("edge.access_log_every must not be negative")
	case c.HoldersTTL < 0 || c.HoldersTTL > 10*time.Minute:
		return errors.New("edge.holders_ttl must be 0 (off) to 10m")
	case c.HoldersTTL > 0 && (c.HoldersMax < 1024 || c.HoldersMax > 1<<22):
		return errors.New("edge.holders_max must be 1024 to 4194304 (its table is allocated at start)")
	case c.DBReadsPerUser < 0 || c.DBReadsPerUser > 0 && c.DBMissTTL <= 0:
		return errors.New("edge.db_reads_per_user must not be negative, and edge.db_miss_ttl must be positive with it")
	case c.SoldOutTTL <= 0:
		return errors.New("edge.soldout_ttl must be positive")
	case c.RefreshInterval <= 0:
		return errors.New("edge.refresh_interval must be positive")
	case c.RejectFlush <= 0:
		return errors.New("edge.reject_flush must be positive")
	case c.ViewTTL <= 0:
		return errors.New("edge.view_ttl must be positive")
	case c.ClockSyncInterval <= 0:
		return errors.New("edge.clock_sync_interval must be positive")
	case c.RedisTimeout <= 0:
		return errors.New("edge.redis_timeout must be positive")
	case c.FleetHeartbeat < 10*time.Millisecond:
		return errors.New("edge.fleet_heartbeat must be at least 10ms")
	case c.FleetTTL <= c.FleetHeartbeat || c.FleetTTL%time.Millisecond != 0:
		return errors.New("edge.fleet_ttl must exceed edge.fleet_heartbeat, in whole milliseconds")
	case c.FleetMaxEdges < 1:
		return errors.New("edge.fleet_max_edges must be at least 1")
	case c.TokenVerifyTimeout <= 0:
		return errors.New("edge.token_verify_timeout must be positive")
	case c.TokenRefundTimeout <= 0:
		return errors.New("edge.token_refund_timeout must be positive")
	}
	ic, err := c.identityConfig()
	if err != nil {
		return err
	}
	if err := c.Rate.validate(); err != nil {
		return err
	}
	if _, err := blocklist.NewSet(c.Blocklist.IPs, c.Blocklist.Users); err != nil {
		return fmt.Errorf("edge.blocklist: %w", err)
	}
	if c.Blocklist.RefreshInterval <= 0 {
		return errors.New("edge.blocklist.refresh_interval must be positive")
	}
	if err := c.Risk.validate(); err != nil {
		return err
	}
	if err := c.Degrade.validate(); err != nil {
		return err
	}
	return ic.Validate()
}

func (r *RiskConfig) validate() error {
	switch {
	case r.OnError != sale.RiskAllow && r.OnError != sale.RiskDeny:
		return errors.New("edge.risk.on_error must be allow or deny")
	case r.Timeout <= 0 || r.Timeout > 10*time.Second:
		return errors.New("edge.risk.timeout must be positive and at most 10s")
	case r.CacheTTL < 0:
		return errors.New("edge.risk.cache_ttl must not be negative (0 disables the cache)")
	case r.MaxConns < 1:
		return errors.New("edge.risk.max_conns must be at least 1")
	case r.Breaker.Failures < 1:
		return errors.New("edge.risk.breaker.failures must be at least 1")
	case r.Breaker.OpenFor <= 0:
		return errors.New("edge.risk.breaker.open_for must be positive")
	case r.Breaker.Probes < 1:
		return errors.New("edge.risk.breaker.probes must be at least 1")
	case r.Local.DevicePerMinute < 0 || r.Local.IPPerMinute < 0:
		return errors.New("edge.risk.local.device_per_minute and ip_per_minute must not be negative (0 turns a rule off)")
	case r.Local.MaxKeys < 64:
		return errors.New("edge.risk.local.max_keys must be at least 64")
	case r.RecheckInterval <= 0:
		return errors.New("edge.risk.recheck_interval must be positive")
	case r.RecheckBatch < 1 || r.RecheckBatch > 10_000:
		return errors.New("edge.risk.recheck_batch must be 1..10000")
	}
	if r.URL == "" {
		return nil
	}
	if _, err := parseRiskURL(r.URL); err != nil {
		return err
	}
	return nil
}

func (d *DegradeConfig) validate() error {
	switch {
	case d.PollAfter <= 0 || d.PollAfter > sale.MaxPollAfterMs*time.Millisecond:
		return errors.New("edge.degrade.poll_after must be positive and at most 1m")
	case d.PausedRetryAfter <= 0 || d.ClosedRetryAfter <= 0:
		return errors.New("edge.degrade.paused_retry_after and closed_retry_after must be positive")
	case d.RefreshInterval <= 0:
		return errors.New("edge.degrade.refresh_interval must be positive")
	}
	return nil
}

func (r *RateConfig) validate() error {
	switch {
	case r.IPPerSecond < 0 || r.UserPerSecond < 0:
		return errors.New("edge.rate.ip_per_second and edge.rate.user_per_second must not be negative (0 disables)")
	case r.IPPerSecond > 0 && r.IPBurst < 1:
		return errors.New("edge.rate.ip_burst must be at least 1")
	case r.UserPerSecond > 0 && r.UserBurst < 1:
		return errors.New("edge.rate.user_burst must be at least 1")
	case r.MaxKeys < 1024:
		return errors.New("edge.rate.max_keys must be at least 1024")
	case r.UserSKULimit < 0:
		return errors.New("edge.rate.user_sku_limit must not be negative (0 disables)")
	case r.UserSKULimit > 0 && r.UserSKUWindow < time.Millisecond:
		return errors.New("edge.rate.user_sku_window must be at least 1ms")
	case r.GateK < 0:
		return errors.New("edge.rate.gate_k must not be negative (0 disables)")
	case r.GateK > 0 && r.GateFloor < 1:
		return errors.New("edge.rate.gate_floor must be at least 1")
	case r.GateEdges < 0:
		return errors.New("edge.rate.gate_edges must not be negative (0: the live edge count)")
	case r.SKUInflight < 0:
		return errors.New("edge.rate.sku_inflight must not be negative (0 disables)")
	case r.SKUInflightWait < 0:
		return errors.New("edge.rate.sku_inflight_wait must not be negative (0 refuses at once)")
	}
	_, err := parsePrefixes("edge.rate.ip_exempt", r.IPExempt)
	return err
}

// identityConfig is what the identity check is built from.
func (c *Config) identityConfig() (identity.Config, error) {
	trusted, err := parsePrefixes("edge.trusted_proxies", c.TrustedProxies)
	if err != nil {
		return identity.Config{}, err
	}
	return identity.Config{Mode: c.Identity, Trusted: trusted, Keys: c.IdentityKeys, Skew: c.IdentitySkew}, nil
}

// CheckIdentity is what an edge process checks at start, before it dials
// anything: the identity mode has what it needs (signed: edge.identity_keys;
// trusted_proxies: edge.trusted_proxies), and any is refused unless
// edge.identity_insecure says it is meant. Validate checks only the shape,
// so that processes without an edge (engine, consumer) do not need them.
func (c *Config) CheckIdentity() error {
	ic, err := c.identityConfig()
	if err != nil {
		return err
	}
	if c.Identity == identity.ModeAny && !c.IdentityInsecure {
		return errors.New("edge.identity any lets any peer buy as any user: use signed (edge.identity_keys) or " +
			"trusted_proxies in production; a load test on one machine sets edge.identity_insecure: true")
	}
	return ic.Check()
}

// NewIdentity builds the identity check of c (edge.identity); the routes
// the process mounts on the edge (WithRoutes: the result stream, my
// orders, pay) run the same check as the edge's own.
func (c *Config) NewIdentity() (*identity.Verifier, error) {
	ic, err := c.identityConfig()
	if err != nil {
		return nil, err
	}
	return identity.New(ic, nil)
}

// parsePrefixes reads CIDR prefixes; a bare address is its own /32 or
// /128.
func parsePrefixes(key string, in []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(in))
	for _, s := range in {
		if p, err := netip.ParsePrefix(s); err == nil {
			if p.Addr().Is4In6() && p.Bits() >= 96 {
				p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
			}
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return nil, fmt.Errorf("%s: %q is not a CIDR prefix or IP address", key, s)
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}
