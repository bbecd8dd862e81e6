package config

import (
	"fmt"
	"net"
	"os"
	"path"
	"regexp"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
	"go.yaml.in/yaml/v3"

	"seckill/internal/devserver"
)

// composeFile is the part of docker-compose.yml these tests read. Fields
// that compose allows in two syntaxes (short string or long map, list or
// map) stay untyped and are normalised by the helpers below.
type composeFile struct {
	Services map[string]composeService `yaml:"services"`
}

type composeService struct {
	Image       string `yaml:"image"`
	Build       any    `yaml:"build"`
	Command     any    `yaml:"command"`
	Expose      []any  `yaml:"expose"`
	Ports       []any  `yaml:"ports"`
	Volumes     []any  `yaml:"volumes"`
	Environment any    `yaml:"environment"`
}

func loadCompose(t *testing.T) composeFile {
	t.Helper()
	b, err := os.ReadFile("../../../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var f composeFile
	if err := yaml.Unmarshal(b, &f); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	if len(f.Services) == 0 {
		t.Fatal("docker-compose.yml has no services")
	}
	return f
}

// loadProd decodes configs/prod.yaml strictly over the defaults, without
// the environment overrides of the machine running the test.
func loadProd(t *testing.T) Config {
	t.Helper()
	b, err := os.ReadFile("../../../configs/prod.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c := Default()
	if err := Decode(b, &c); err != nil {
		t.Fatalf("configs/prod.yaml: %v", err)
	}
	return c
}

func TestComposeRunsWhatProdYAMLNames(t *testing.T) {
	f := loadCompose(t)
	c := loadProd(t)

	dsn, err := mysql.ParseDSN(c.Store.DSN)
	if err != nil {
		t.Fatalf("store.dsn: %v", err)
	}
	named := map[string][]string{
		"redis.default.addrs":  c.Redis.Default.Addrs,
		"engine.kafka.brokers": c.Engine.Kafka.Brokers,
		"consumer.brokers":     c.Consumer.Brokers,
		"store.dsn":            {dsn.Addr},
	}
	if c.Store.Driver != "mysql" {
		t.Errorf("prod.yaml store.driver = %q, want mysql", c.Store.Driver)
	}
	for i, h := range c.Redis.Hot.Shards() {
		named[fmt.Sprintf("redis.hot[%d].addrs", i)] = h.Addrs
	}
	if len(c.Redis.Hot.Shards()) == 0 {
		t.Error("prod.yaml redis.hot.addrs is empty: production runs a separate hot-SKU shard")
	}

	t.Run("every address prod.yaml names is a compose service listening on that port", func(t *testing.T) {
		for key, addrs := range named {
			for _, a := range addrs {
				if err := serviceListens(f, a); err != nil {
					t.Errorf("%s: %v", key, err)
				}
			}
		}
	})

	t.Run("address overrides passed to the seckill services name compose services too", func(t *testing.T) {
		for name, s := range seckillServices(f) {
			for k, v := range environment(s) {
				if v == nil {
					continue
				}
				var addrs []string
				switch {
				case k == "SECKILL_STORE_DSN":
					d, err := mysql.ParseDSN(*v)
					if err != nil {
						t.Errorf("%s: %s: %v", name, k, err)
						continue
					}
					addrs = []string{d.Addr}
				case strings.HasSuffix(k, "_ADDRS") || strings.HasSuffix(k, "_BROKERS"):
					for _, a := range strings.Split(*v, ",") {
						addrs = append(addrs, strings.TrimSpace(a))
					}
				}
				for _, a := range addrs {
					if err := serviceListens(f, a); err != nil {
						t.Errorf("%s: %s: %v", name, k, err)
					}
				}
			}
		}
	})

	t.Run("redis services keep an append-only file for restart safety", func(t *testing.T) {
		for _, a := range append(append([]string{}, c.Redis.Default.Addrs...), hotAddrs(c)...) {
			host, _, _ := net.SplitHostPort(a)
			s, ok := f.Services[host]
			if !ok {
				continue // reported above
			}
			if !strings.Contains(strings.Join(command(s), " "), "--appendonly yes") {
				t.Errorf("service %s: command %q lacks --appendonly yes", host, command(s))
			}
			// The append-only file's rewrite policy is seckill dev's: a
			// restart reads the whole file.
			p := devserver.Persistence()
			for i := 0; i+1 < len(p); i += 2 {
				if p[i] == "--save" {
					continue // production may also keep RDB snapshots
				}
				if !strings.Contains(strings.Join(command(s), " "), p[i]+" "+p[i+1]) {
					t.Errorf("service %s: command %q lacks %s %s", host, command(s), p[i], p[i+1])
				}
			}
		}
	})

	t.Run("a compose service creates the topics prod.yaml uses", func(t *testing.T) {
		var creates []string
		for _, s := range f.Services {
			cmd := strings.Join(command(s), " ")
			if strings.Contains(cmd, "kafka-topics") && strings.Contains(cmd, "--create") {
				creates = append(creates, cmd)
			}
		}
		if len(creates) == 0 {
			t.Fatal("no service runs kafka-topics --create (the broker does not auto-create topics)")
		}
		all := strings.Join(creates, "\n")
		for _, topic := range []string{c.Engine.Kafka.Topic, c.Consumer.Topic, c.Consumer.DLQTopic} {
			re := regexp.MustCompile(`(^|[\s"':=])` + regexp.QuoteMeta(topic) + `([\s"':]|$)`)
			if !re.MatchString(all) {
				t.Errorf("topic %s is not created by any compose service", topic)
			}
		}
	})
}

func TestComposeSeckillServicesUseProdYAML(t *testing.T) {
	f := loadCompose(t)
	svcs := seckillServices(f)
	for _, want := range []string{"edge", "consumer"} {
		if _, ok := svcs[want]; !ok {
			t.Errorf("no seckill service %q in docker-compose.yml (have %v)", want, keys(svcs))
		}
	}
	for name, s := range svcs {
		t.Run(name+" mounts configs/prod.yaml where --config reads it", func(t *testing.T) {
			cfg := configFlag(command(s))
			if cfg == "" {
				t.Fatalf("command %q has no --config", command(s))
			}
			for _, v := range s.Volumes {
				src, dst := volume(v)
				if path.Clean(src) == "configs/prod.yaml" && dst == cfg {
					return
				}
			}
			t.Errorf("no volume mounts ./configs/prod.yaml at %s (volumes %v)", cfg, s.Volumes)
		})
		t.Run(name+" takes SECKILL_ADMIN_TOKEN from the environment", func(t *testing.T) {
			v, ok := environment(s)["SECKILL_ADMIN_TOKEN"]
			if !ok {
				t.Fatal("SECKILL_ADMIN_TOKEN is not passed")
			}
			if v != nil && !strings.Contains(*v, "${SECKILL_ADMIN_TOKEN") && !strings.Contains(*v, "$SECKILL_ADMIN_TOKEN") {
				t.Fatalf("SECKILL_ADMIN_TOKEN is set to a literal %q; pass it through from the environment", *v)
			}
		})
	}
}

// serviceListens checks that addr's host is a compose service that exposes
// or publishes addr's port inside its container.
func serviceListens(f composeFile, addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("address %q: %v", addr, err)
	}
	s, ok := f.Services[host]
	if !ok {
		return fmt.Errorf("address %s: no compose service named %q", addr, host)
	}
	for _, p := range append(append([]any{}, s.Expose...), s.Ports...) {
		if containerPort(p) == port {
			return nil
		}
	}
	return fmt.Errorf("address %s: service %s neither exposes nor publishes port %s", addr, host, port)
}

// seckillServices are the services that run the seckill image.
func seckillServices(f composeFile) map[string]composeService {
	out := map[string]composeService{}
	for name, s := range f.Services {
		if s.Build != nil || strings.HasPrefix(path.Base(s.Image), "seckill") {
			out[name] = s
		}
	}
	return out
}

// command returns a service's command as arguments; a string command is
// split on white space, as compose does for the simple cases used here.
func command(s composeService) []string {
	switch c := s.Command.(type) {
	case string:
		return strings.Fields(c)
	case []any:
		out := make([]string, 0, len(c))
		for _, a := range c {
			out = append(out, fmt.Sprint(a))
		}
		return out
	}
	return nil
}

func configFlag(args []string) string {
	for i, a := range args {
		if a == "--config" && i+1 < len(args) {
			return args[i+1]
		}
		if v, ok := strings.CutPrefix(a, "--config="); ok {
			return v
		}
	}
	return ""
}

// environment returns a service's variables; a nil value means "passed
// through from the environment compose runs in".
func environment(s composeService) map[string]*string {
	out := map[string]*string{}
	switch e := s.Environment.(type) {
	case []any:
		for _, item := range e {
			k, v, ok := strings.Cut(fmt.Sprint(item), "=")
			if ok {
				out[k] = &v
			} else {
				out[k] = nil
			}
		}
	case map[string]any:
		for k, v := range e {
			if v == nil {
				out[k] = nil
				continue
			}
			s := fmt.Sprint(v)
			out[k] = &s
		}
	}
	return out
}

// containerPort is the container side of an expose or ports entry:
// "6379", 6379, "8080:8080", "127.0.0.1:8081:8081/tcp" or {target: 8080}.
func containerPort(p any) string {
	switch v := p.(type) {
	case map[string]any:
		return fmt.Sprint(v["target"])
	default:
		s := fmt.Sprint(v)
		s, _, _ = strings.Cut(s, "/")
		return s[strings.LastIndex(s, ":")+1:]
	}
}

// volume returns a mount's source (relative to the compose file, "./"
// trimmed) and target, from the short "src:dst[:mode]" or the long syntax.
func volume(v any) (src, dst string) {
	switch m := v.(type) {
	case map[string]any:
		src, dst = fmt.Sprint(m["source"]), fmt.Sprint(m["target"])
	default:
		parts := strings.Split(fmt.Sprint(v), ":")
		if len(parts) < 2 {
			return "", parts[0]
		}
		src, dst = parts[0], parts[1]
	}
	return strings.TrimPrefix(src, "./"), dst
}

func keys(m map[string]composeService) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// published splits a ports entry into the host address it binds ("" for
// every interface) and the container port: "8080:8080",
// "127.0.0.1:8081:8081/tcp", "8080" or {target, published, host_ip}.
func published(p any) (hostIP, target string) {
	if m, ok := p.(map[string]any); ok {
		if h, ok := m["host_ip"]; ok {
			hostIP = fmt.Sprint(h)
		}
		return hostIP, fmt.Sprint(m["target"])
	}
	s, _, _ := strings.Cut(fmt.Sprint(p), "/")
	if strings.Count(s, ":") >= 2 {
		hostIP = strings.Trim(s[:strings.LastIndex(s[:strings.LastIndex(s, ":")], ":")], "[]")
	}
	return hostIP, containerPort(p)
}

// TestComposePublishesOnlyTheEdgeToTheWorld: the edge's public listener is
// the only port compose publishes on every host interface; everything
// else (the admin listener with /readyz and /metrics, any metrics port)
// is published on the host's loopback or not at all. The edge runs
// prod.yaml, so it believes no peer's bare X-User-Id and keeps the ops
// routes off the public listener.
func TestComposePublishesOnlyTheEdgeToTheWorld(t *testing.T) {
	f := loadCompose(t)
	c := loadProd(t)
	_, publicPort, err := net.SplitHostPort(c.Edge.Listen)
	if err != nil {
		t.Fatal(err)
	}
	_, adminPort, err := net.SplitHostPort(c.Admin.Listen)
	if err != nil {
		t.Fatal(err)
	}
	adminSeen := false
	for name, s := range f.Services {
		for _, p := range s.Ports {
			host, target := published(p)
			loopback := host == "127.0.0.1" || host == "::1" || host == "localhost"
			switch {
			case name == "edge" && target == publicPort:
			case loopback:
				if name == "edge" && target == adminPort {
					adminSeen = true
				}
			default:
				t.Errorf("service %s publishes %v on every host interface: only the edge's public port %s may be", name, p, publicPort)
			}
		}
	}
	if !adminSeen {
		t.Errorf("the edge's admin port %s is not published on the host's loopback", adminPort)
	}
	if c.Edge.Identity == "any" || c.Edge.PublicOps {
		t.Errorf("prod.yaml: edge.identity %q, edge.public_ops %v: want a gateway identity and the ops routes off the public listener", c.Edge.Identity, c.Edge.PublicOps)
	}
	if _, ok := environment(f.Services["edge"])["SECKILL_EDGE_IDENTITY_KEYS"]; !ok && c.Edge.Identity == "signed" {
		t.Error("the compose edge does not pass SECKILL_EDGE_IDENTITY_KEYS: under identity signed it could not start")
	}
	for _, tc := range []struct {
		in         any
		host, port string
	}{
		{"8080:8080", "", "8080"}, {"127.0.0.1:8081:8081", "127.0.0.1", "8081"}, {"0.0.0.0:9090:9090/tcp", "0.0.0.0", "9090"},
		{"[::1]:8081:8081", "::1", "8081"}, {map[string]any{"target": 8081, "host_ip": "127.0.0.1"}, "127.0.0.1", "8081"},
	} {
		if h, p := published(tc.in); h != tc.host || p != tc.port {
			t.Errorf("published(%v) = %q, %q; want %q, %q", tc.in, h, p, tc.host, tc.port)
		}
	}
}

func hotAddrs(c Config) []string {
	var out []string
	for _, h := range c.Redis.Hot.Shards() {
		out = append(out, h.Addrs...)
	}
	return out
}
