package config

import (
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
	"go.yaml.in/yaml/v3"

	"seckill/cmd/seckill/devserver"
)

// composeFile is the part of docker-compose.yml these tests read. Fields
// that compose allows in two syntaxes (short string or long map, list or
// map) stay untyped and are normalised by the helpers below.
type composeFile struct {
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]any            `yaml:"volumes"`
}

type composeService struct {
	Image       string `yaml:"image"`
	Build       any    `yaml:"build"`
	Command     any    `yaml:"command"`
	Expose      []any  `yaml:"expose"`
	Ports       []any  `yaml:"ports"`
	Volumes     []any  `yaml:"volumes"`
	Environment any    `yaml:"environment"`
	Entrypoint  any    `yaml:"entrypoint"`
	DependsOn   any    `yaml:"depends_on"`
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
					// ';' separates hot shards (SECKILL_REDIS_HOT_ADDRS).
					for _, a := range strings.FieldsFunc(*v, func(r rune) bool { return r == ',' || r == ';' }) {
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
	for _, want := range []string{"edge", "engine", "consumer"} {
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
			if !ok && command(s)[0] == "edge" { // the edge serves the admin API
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

// TestComposeConfigValidates runs Debian's docker-compose (no engine
// needed) over the file: the syntax, the anchors and merges, the
// depends_on conditions and the variable interpolation are compose's own
// verdict, not this package's reading of them.
func TestComposeConfigValidates(t *testing.T) {
	bin, err := exec.LookPath("docker-compose")
	if err != nil {
		t.Fatalf("docker-compose is required to validate docker-compose.yml (scripts/deps.sh --test installs Debian's; make test runs it): %v", err)
	}
	cmd := exec.Command(bin, "-f", "../../../docker-compose.yml", "config")
	cmd.Env = append(os.Environ(), append(composeRedisPasswords, "SECKILL_ADMIN_TOKEN=compose-config-test-placeholder")...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("docker-compose config: %v\n%s", err, stderr.String())
	}
	// Compose's own reading of the anchors and merges gives each broker its
	// own node id and advertised listener over the shared settings, as
	// this package's reading does (TestComposeProductionShape).
	var resolved composeFile
	if err := yaml.Unmarshal(out, &resolved); err != nil {
		t.Fatalf("docker-compose config output: %v", err)
	}
	brokers := kafkaBrokers(resolved)
	adv := map[string]bool{}
	for name, env := range brokers {
		adv[env["KAFKA_ADVERTISED_LISTENERS"]] = true
		if env["KAFKA_MIN_INSYNC_REPLICAS"] != "2" || env["KAFKA_DEFAULT_REPLICATION_FACTOR"] != "3" {
			t.Errorf("compose resolves %s with min ISR %q, RF %q", name, env["KAFKA_MIN_INSYNC_REPLICAS"], env["KAFKA_DEFAULT_REPLICATION_FACTOR"])
		}
	}
	if len(brokers) != 3 || len(adv) != 3 {
		t.Errorf("compose resolves %d brokers advertising %d distinct listeners, want 3 and 3", len(brokers), len(adv))
	}
	// The same without the admin token fails: compose itself refuses to
	// start the stack without it (the ${VAR:?} in the edge's environment).
	cmd = exec.Command(bin, "-f", "../../../docker-compose.yml", "config", "-q")
	for _, kv := range append(os.Environ(), composeRedisPasswords...) {
		if !strings.HasPrefix(kv, "SECKILL_ADMIN_TOKEN=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "SECKILL_ADMIN_TOKEN") {
		t.Errorf("docker-compose config without SECKILL_ADMIN_TOKEN: err %v, output %q; want a refusal naming it", err, out)
	}
}

// TestComposeProductionShape checks the production shape: three
// Kafka brokers in KRaft mode, each advertising itself; the orders and
// dead-letter topics with replication factor 3 and min.insync.replicas 2
// (broker defaults and the topics' own creation alike); seckill's broker
// lists naming all three; each Redis prod.yaml names followed by a replica.
func TestComposeProductionShape(t *testing.T) {
	f := loadCompose(t)
	c := loadProd(t)

	brokers := kafkaBrokers(f)
	t.Run("three kafka brokers in KRaft mode, each a controller voter", func(t *testing.T) {
		if len(brokers) != 3 {
			t.Fatalf("services with KAFKA_PROCESS_ROLES including broker: %v, want 3", keysOf(brokers))
		}
		ids := map[string]string{}
		for name, env := range brokers {
			id := env["KAFKA_NODE_ID"]
			if other, dup := ids[id]; dup || id == "" {
				t.Errorf("%s: KAFKA_NODE_ID %q (also %s)", name, id, other)
			}
			ids[id] = name
			if !strings.Contains(env["KAFKA_PROCESS_ROLES"], "controller") {
				t.Errorf("%s: KAFKA_PROCESS_ROLES %q: combined mode wants broker,controller", name, env["KAFKA_PROCESS_ROLES"])
			}
			if env["CLUSTER_ID"] == "" {
				t.Errorf("%s: no CLUSTER_ID: the three would format three clusters", name)
			}
		}
		for name, env := range brokers {
			voters := map[string]string{}
			for _, v := range strings.Split(env["KAFKA_CONTROLLER_QUORUM_VOTERS"], ",") {
				id, addr, _ := strings.Cut(strings.TrimSpace(v), "@")
				voters[id] = addr
			}
			for id, svc := range ids {
				host, _, _ := net.SplitHostPort(voters[id])
				if host != svc {
					t.Errorf("%s: KAFKA_CONTROLLER_QUORUM_VOTERS %q: node %s should be %s's controller listener", name, env["KAFKA_CONTROLLER_QUORUM_VOTERS"], id, svc)
				}
			}
			if cid := brokers[keysOf(brokers)[0]]["CLUSTER_ID"]; env["CLUSTER_ID"] != cid {
				t.Errorf("%s: CLUSTER_ID %q, another broker has %q", name, env["CLUSTER_ID"], cid)
			}
		}
	})

	t.Run("each broker advertises its own service name", func(t *testing.T) {
		seen := map[string]string{}
		for name, env := range brokers {
			adv := env["KAFKA_ADVERTISED_LISTENERS"]
			if other, dup := seen[adv]; dup {
				t.Errorf("%s and %s both advertise %q: clients would reach one broker for the other's partitions", name, other, adv)
			}
			seen[adv] = name
			_, hostPort, _ := strings.Cut(adv, "://")
			if host, _, _ := net.SplitHostPort(hostPort); host != name {
				t.Errorf("%s advertises %q, not its own service name", name, adv)
			}
		}
	})

	t.Run("broker defaults: replication factor 3, min.insync.replicas 2", func(t *testing.T) {
		for name, env := range brokers {
			for k, want := range map[string]string{
				"KAFKA_DEFAULT_REPLICATION_FACTOR":               "3",
				"KAFKA_MIN_INSYNC_REPLICAS":                      "2",
				"KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR":         "3",
				"KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR": "3",
				"KAFKA_TRANSACTION_STATE_LOG_MIN_ISR":            "2",
			} {
				if env[k] != want {
					t.Errorf("%s: %s = %q, want %s", name, k, env[k], want)
				}
			}
		}
	})

	t.Run("the orders, dead-letter and attempts topics are created with RF 3 and min ISR 2", func(t *testing.T) {
		for _, topic := range []string{c.Engine.Kafka.Topic, c.Consumer.DLQTopic, c.Engine.Queue.Topic} {
			line := topicCreate(f, topic)
			if line == "" {
				t.Errorf("no kafka-topics --create --topic %s line in any service", topic)
				continue
			}
			args := strings.Fields(line)
			if v := flagValue(args, "--replication-factor"); v != "3" {
				t.Errorf("topic %s: --replication-factor %q, want 3", topic, v)
			}
			if v := flagValue(args, "--config"); v != "min.insync.replicas=2" {
				t.Errorf("topic %s: --config %q, want min.insync.replicas=2", topic, v)
			}
		}
	})

	t.Run("seckill's broker lists name all three brokers", func(t *testing.T) {
		for key, list := range map[string][]string{"engine.kafka.brokers": c.Engine.Kafka.Brokers, "consumer.brokers": c.Consumer.Brokers} {
			named := map[string]bool{}
			for _, a := range list {
				host, _, _ := net.SplitHostPort(a)
				named[host] = true
			}
			for b := range brokers {
				if !named[b] {
					t.Errorf("prod.yaml %s %v does not name broker %s", key, list, b)
				}
			}
		}
	})

	t.Run("each redis prod.yaml names is a primary followed by a replica", func(t *testing.T) {
		primaries := append(append([]string{}, c.Redis.Default.Addrs...), hotAddrs(c)...)
		if len(primaries) == 0 {
			t.Fatal("prod.yaml names no redis")
		}
		for _, a := range primaries {
			host, port, _ := net.SplitHostPort(a)
			var followers []string
			for name, s := range f.Services {
				args := command(s)
				for i := 0; i+2 < len(args); i++ {
					if args[i] == "--replicaof" && args[i+1] == host && args[i+2] == port {
						followers = append(followers, name)
					}
				}
			}
			if len(followers) == 0 {
				t.Errorf("redis %s: no service runs redis-server --replicaof %s %s", a, host, port)
			}
			for _, r := range followers {
				if slicesContainsHost(primaries, r) {
					t.Errorf("seckill talks to %s, a replica: scripts that take stock must run on the primary", r)
				}
				if !strings.Contains(strings.Join(command(f.Services[r]), " "), "--appendonly yes") {
					t.Errorf("replica %s keeps no append-only file: promoted, it would restart empty", r)
				}
			}
			primary := strings.Join(command(f.Services[host]), " ")
			if strings.Contains(primary, "--replicaof") {
				t.Errorf("redis %s, which seckill writes to, is itself a replica", a)
			}
			// docs/operations-ledger.md: with replicas, refuse the writes a
			// failover would lose.
			if !strings.Contains(primary, "--min-replicas-to-write 1") || !strings.Contains(primary, "--min-replicas-max-lag") {
				t.Errorf("primary %s: command %q lacks --min-replicas-to-write 1 and --min-replicas-max-lag", host, primary)
			}
			for _, r := range followers {
				if strings.Contains(strings.Join(command(f.Services[r]), " "), "--min-replicas-to-write") {
					t.Errorf("replica %s sets min-replicas-to-write: promoted without a replica of its own it would refuse every write", r)
				}
			}
		}
	})
}

// kafkaBrokers maps each service whose KAFKA_PROCESS_ROLES includes broker
// to its environment (nil values, "passed through", as "").
func kafkaBrokers(f composeFile) map[string]map[string]string {
	out := map[string]map[string]string{}
	for name, s := range f.Services {
		env := map[string]string{}
		for k, v := range environment(s) {
			if v != nil {
				env[k] = *v
			} else {
				env[k] = ""
			}
		}
		if slices.Contains(strings.Split(env["KAFKA_PROCESS_ROLES"], ","), "broker") {
			out[name] = env
		}
	}
	return out
}

// topicCreate is the command line (one line of a service's command) that
// runs kafka-topics --create for topic, or "".
func topicCreate(f composeFile, topic string) string {
	for _, s := range f.Services {
		for _, line := range strings.Split(strings.Join(command(s), "\n"), "\n") {
			args := strings.Fields(line)
			if strings.Contains(line, "kafka-topics") && slices.Contains(args, "--create") && flagValue(args, "--topic") == topic {
				return line
			}
		}
	}
	return ""
}

// flagValue is the argument after name ("--flag value") or after
// "name=" ("--flag=value").
func flagValue(args []string, name string) string {
	for i, a := range args {
		if a == name && i+1 < len(args) {
			return strings.Trim(args[i+1], `"'`)
		}
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return strings.Trim(v, `"'`)
		}
	}
	return ""
}

func slicesContainsHost(addrs []string, host string) bool {
	for _, a := range addrs {
		if h, _, _ := net.SplitHostPort(a); h == host {
			return true
		}
	}
	return false
}

func keysOf[V any](m map[string]V) []string { return slices.Sorted(maps.Keys(m)) }

func hotAddrs(c Config) []string {
	var out []string
	for _, h := range c.Redis.Hot.Shards() {
		out = append(out, h.Addrs...)
	}
	return out
}
