package deploy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/intstr"
	k8syaml "k8s.io/apimachinery/pkg/util/yaml"

	"seckill/cmd/seckill/config"
)

const k8sDir = "k8s"

// processGrace is how long a seckill process gives its parts to finish
// after SIGTERM (serveUntilSignal's grace in cmd/seckill/parts.go).
const processGrace = 30 * time.Second

// k8sObjects is every object of deploy/k8s/*.yaml, decoded strictly.
type k8sObjects struct {
	all          []runtime.Object
	statefulSets map[string]*appsv1.StatefulSet
	services     map[string]*corev1.Service
	configMaps   map[string]*corev1.ConfigMap
	pdbs         []*policyv1.PodDisruptionBudget
	hpas         []*autoscalingv2.HorizontalPodAutoscaler
}

// decodeK8s decodes every document of every manifest into the Kubernetes
// API types: an unknown kind, an unknown or misspelt field, a duplicate
// field or a wrong type fails.
func decodeK8s(dir string) (k8sObjects, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, appsv1.AddToScheme, policyv1.AddToScheme, autoscalingv2.AddToScheme} {
		if err := add(scheme); err != nil {
			return k8sObjects{}, err
		}
	}
	dec := serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()
	o := k8sObjects{statefulSets: map[string]*appsv1.StatefulSet{}, services: map[string]*corev1.Service{}, configMaps: map[string]*corev1.ConfigMap{}}
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		return o, fmt.Errorf("no manifests in %s (%v)", dir, err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return o, err
		}
		r := k8syaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
		for i := 0; ; i++ {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return o, fmt.Errorf("%s document %d: %w", f, i, err)
			}
			if len(bytes.TrimSpace(stripComments(doc))) == 0 {
				continue
			}
			obj, gvk, err := dec.Decode(doc, nil, nil)
			if err != nil {
				return o, fmt.Errorf("%s document %d: %w", filepath.Base(f), i, err)
			}
			o.all = append(o.all, obj)
			switch v := obj.(type) {
			case *appsv1.StatefulSet:
				o.statefulSets[v.Name] = v
			case *corev1.Service:
				o.services[v.Name] = v
			case *corev1.ConfigMap:
				o.configMaps[v.Name] = v
			case *policyv1.PodDisruptionBudget:
				o.pdbs = append(o.pdbs, v)
			case *autoscalingv2.HorizontalPodAutoscaler:
				o.hpas = append(o.hpas, v)
			case *corev1.Secret:
				return o, fmt.Errorf("%s document %d: a Secret: secrets are referenced, never written in the manifests", filepath.Base(f), i)
			default:
				return o, fmt.Errorf("%s document %d: kind %s has no check here", filepath.Base(f), i, gvk.Kind)
			}
		}
	}
	return o, nil
}

var commentLine = regexp.MustCompile(`(?m)^\s*#.*$`)

func stripComments(b []byte) []byte { return commentLine.ReplaceAll(b, nil) }

func TestK8sManifestsDecodeStrictly(t *testing.T) {
	o, err := decodeK8s(k8sDir)
	if err != nil {
		t.Fatal(err)
	}
	if len(o.all) == 0 {
		t.Fatal("no objects")
	}
	// The decoder itself must refuse what the API server would: an
	// unknown field and a Secret.
	bad := t.TempDir()
	for name, doc := range map[string]string{
		"typo.yaml":   "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec:\n  selectr: {a: b}\n",
		"secret.yaml": "apiVersion: v1\nkind: Secret\nmetadata: {name: x}\nstringData: {a: b}\n",
	} {
		dir := filepath.Join(bad, strings.TrimSuffix(name, ".yaml"))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := decodeK8s(dir); err == nil {
			t.Errorf("%s decoded without an error", name)
		}
	}
}

// envOf is a container's effective environment in a pod named name with
// labels: literal values as written, fieldRefs resolved, secretKeyRefs as
// placeholders shaped like the real secrets.
func envOf(c corev1.Container, name string, podLabels map[string]string) (map[string]string, error) {
	env := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.ValueFrom.SecretKeyRef != nil:
			env[e.Name] = placeholderSecret(e.Name)
		case e.ValueFrom.FieldRef != nil:
			p := e.ValueFrom.FieldRef.FieldPath
			switch {
			case p == "metadata.name":
				env[e.Name] = name
			case strings.HasPrefix(p, "metadata.labels['") && strings.HasSuffix(p, "']"):
				l := strings.TrimSuffix(strings.TrimPrefix(p, "metadata.labels['"), "']")
				v, ok := podLabels[l]
				if !ok {
					return nil, fmt.Errorf("%s: %s: the pod has no label %s", c.Name, e.Name, l)
				}
				env[e.Name] = v
			default:
				return nil, fmt.Errorf("%s: %s: fieldRef %s has no check here", c.Name, e.Name, p)
			}
		default:
			return nil, fmt.Errorf("%s: %s: a valueFrom this test does not resolve", c.Name, e.Name)
		}
	}
	return env, nil
}

// placeholderSecret is a value of the secret's shape: 32 random-looking
// bytes, id:secret lists for the key lists, a DSN with a password.
func placeholderSecret(name string) string {
	secret := strings.Repeat("5eck1117e57", 6)
	switch {
	case strings.HasSuffix(name, "_KEYS"):
		return "k1:" + secret
	case strings.HasSuffix(name, "_DSN"):
		return "seckill:" + secret + "@tcp(mariadb:3306)/seckill?parseTime=true"
	}
	return secret
}

// statefulPod is the name and labels of pod index i of s, as the
// StatefulSet controller makes them.
func statefulPod(s *appsv1.StatefulSet, i int) (string, map[string]string) {
	l := map[string]string{}
	for k, v := range s.Spec.Template.Labels {
		l[k] = v
	}
	l["apps.kubernetes.io/pod-index"] = strconv.Itoa(i)
	l["statefulset.kubernetes.io/pod-name"] = fmt.Sprintf("%s-%d", s.Name, i)
	return fmt.Sprintf("%s-%d", s.Name, i), l
}

// containerConfig is the configuration container c of pod (name, labels)
// runs: the file its --config names, from the ConfigMap mounted there, with
// its environment applied the way config.Load applies it.
func containerConfig(o k8sObjects, spec corev1.PodSpec, c corev1.Container, name string, podLabels map[string]string) (config.Config, error) {
	file, err := configFileOf(o, spec, c)
	if err != nil {
		return config.Config{}, err
	}
	cfg := config.Default()
	if err := config.Decode([]byte(file), &cfg); err != nil {
		return cfg, fmt.Errorf("%s: the ConfigMap's config file: %w", c.Name, err)
	}
	env, err := envOf(c, name, podLabels)
	if err != nil {
		return cfg, err
	}
	known := config.EnvNames(&config.Config{})
	for k := range env {
		if !slices.Contains(known, k) {
			return cfg, fmt.Errorf("%s: %s is no configuration variable (config.EnvNames)", c.Name, k)
		}
	}
	err = config.ApplyEnv(&cfg, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	return cfg, err
}

// configFileOf is the text of the file container c's --config names: the
// ConfigMap key of that name in the configMap volume mounted at its
// directory.
func configFileOf(o k8sObjects, spec corev1.PodSpec, c corev1.Container) (string, error) {
	cfgPath := configFlag(c.Args)
	if cfgPath == "" {
		return "", fmt.Errorf("%s: args %q have no --config", c.Name, c.Args)
	}
	dir, base := path.Split(cfgPath)
	vol := mountedAt(c, path.Clean(dir))
	if vol == "" {
		return "", fmt.Errorf("%s: nothing is mounted at %s", c.Name, dir)
	}
	v := volumeNamed(spec, vol)
	if v == nil || v.ConfigMap == nil {
		return "", fmt.Errorf("%s: volume %s at %s is not a ConfigMap", c.Name, vol, dir)
	}
	cm, ok := o.configMaps[v.ConfigMap.Name]
	if !ok {
		return "", fmt.Errorf("%s: ConfigMap %s is not in deploy/k8s", c.Name, v.ConfigMap.Name)
	}
	file, ok := cm.Data[base]
	if !ok {
		return "", fmt.Errorf("%s: ConfigMap %s has no key %s (--config %s)", c.Name, cm.Name, base, cfgPath)
	}
	return file, nil
}

func mountedAt(c corev1.Container, dir string) string {
	for _, m := range c.VolumeMounts {
		if path.Clean(m.MountPath) == dir && m.SubPath == "" {
			return m.Name
		}
	}
	return ""
}

func volumeNamed(spec corev1.PodSpec, name string) *corev1.Volume {
	for i := range spec.Volumes {
		if spec.Volumes[i].Name == name {
			return &spec.Volumes[i]
		}
	}
	return nil
}

// role is the seckill subcommand a container runs (its first argument).
func role(c corev1.Container) string {
	if len(c.Args) == 0 {
		return ""
	}
	return c.Args[0]
}

// containerRunning finds the container (or native sidecar) of spec that
// runs role.
func containerRunning(spec corev1.PodSpec, r string) (c corev1.Container, sidecar bool, ok bool) {
	for _, c := range spec.Containers {
		if role(c) == r {
			return c, false, true
		}
	}
	for _, c := range spec.InitContainers {
		if role(c) == r {
			return c, c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways, true
		}
	}
	return corev1.Container{}, false, false
}

// portOf resolves a probe's or Service's port (a number or a container
// port's name) to the container port number.
func portOf(c corev1.Container, p intstr.IntOrString) int32 {
	if p.Type == intstr.Int {
		return p.IntVal
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return cp.ContainerPort
		}
	}
	return -1
}

// hasPort: c declares the port p names (by name or by number).
func hasPort(c corev1.Container, p intstr.IntOrString) bool {
	return slices.ContainsFunc(c.Ports, func(cp corev1.ContainerPort) bool {
		if p.Type == intstr.String {
			return cp.Name == p.StrVal
		}
		return cp.ContainerPort == p.IntVal
	})
}

func listenPort(t *testing.T, key, addr string) int32 {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("%s %q: %v", key, addr, err)
	}
	n, err := strconv.Atoi(p)
	if err != nil {
		t.Fatalf("%s %q: %v", key, addr, err)
	}
	return int32(n)
}

func checkProbe(t *testing.T, c corev1.Container, kind string, p *corev1.Probe, wantPath string, wantPort int32) {
	t.Helper()
	if p == nil || p.HTTPGet == nil {
		t.Errorf("%s: no HTTP %s probe", c.Name, kind)
		return
	}
	if p.HTTPGet.Path != wantPath {
		t.Errorf("%s: %s probe path %q, want %s", c.Name, kind, p.HTTPGet.Path, wantPath)
	}
	if got := portOf(c, p.HTTPGet.Port); got != wantPort {
		t.Errorf("%s: %s probe port %s is %d, the config serves %s on %d", c.Name, kind, p.HTTPGet.Port.String(), got, wantPath, wantPort)
	}
}

func matches(sel *metav1.LabelSelector, podLabels map[string]string) bool {
	s, err := metav1.LabelSelectorAsSelector(sel)
	return err == nil && !s.Empty() && s.Matches(labels.Set(podLabels))
}

func TestK8sManifests(t *testing.T) {
	o, err := decodeK8s(k8sDir)
	if err != nil {
		t.Fatal(err)
	}
	prod := loadProd(t)

	var edgeSet, consumerSet *appsv1.StatefulSet
	for _, s := range o.statefulSets {
		if _, _, ok := containerRunning(s.Spec.Template.Spec, "edge"); ok {
			edgeSet = s
		}
		if _, _, ok := containerRunning(s.Spec.Template.Spec, "consumer"); ok {
			consumerSet = s
		}
	}
	if edgeSet == nil || consumerSet == nil {
		t.Fatalf("want a StatefulSet running seckill edge and one running seckill consumer (have %v)", slices.Sorted(maps.Keys(o.statefulSets)))
	}
	edgeSpec := edgeSet.Spec.Template.Spec
	edge, _, _ := containerRunning(edgeSpec, "edge")
	eng, sidecar, ok := containerRunning(edgeSpec, "engine")
	if !ok {
		t.Fatal("the edge pod runs no seckill engine")
	}
	consumerSpec := consumerSet.Spec.Template.Spec
	cons, _, _ := containerRunning(consumerSpec, "consumer")

	t.Run("every seckill container's config loads, validates and has the secrets it starts with", func(t *testing.T) {
		max := edgeMaxReplicas(o, edgeSet)
		for _, tc := range []struct {
			set       *appsv1.StatefulSet
			c         corev1.Container
			needAdmin bool
		}{{edgeSet, edge, true}, {edgeSet, eng, false}, {consumerSet, cons, false}} {
			for _, i := range []int{0, max - 1} {
				name, podLabels := statefulPod(tc.set, i)
				cfg, err := containerConfig(o, tc.set.Spec.Template.Spec, tc.c, name, podLabels)
				if err != nil {
					t.Errorf("%s pod %s: %v", tc.c.Name, name, err)
					continue
				}
				if err := cfg.Validate(); err != nil {
					t.Errorf("%s pod %s: %v", tc.c.Name, name, err)
				}
				if err := cfg.CheckSecrets(tc.needAdmin); err != nil {
					t.Errorf("%s pod %s: %v", tc.c.Name, name, err)
				}
				// Every Redis as its role's ACL user (deploy/redis/users.acl).
				if err := cfg.Redis.CheckAuth(); err != nil {
					t.Errorf("%s pod %s: %v", tc.c.Name, name, err)
				}
				if u, h := cfg.Redis.Default.Username, cfg.Redis.Hot.Shards(); u != role(tc.c) || len(h) == 0 || h[0].Username != u {
					t.Errorf("%s pod %s: Redis users %q and %+v, want its role's user %s on every Redis", tc.c.Name, name, u, h, role(tc.c))
				}
				if role(tc.c) == "edge" {
					if err := cfg.Edge.CheckIdentity(); err != nil {
						t.Errorf("%s pod %s: %v", tc.c.Name, name, err)
					}
				}
				if role(tc.c) == "engine" || role(tc.c) == "consumer" {
					if len(cfg.OrderSigning.Keys) == 0 {
						t.Errorf("%s: no order_signing.keys (SECKILL_ORDER_SIGNING_KEYS): it refuses to start", tc.c.Name)
					}
				}
			}
		}
	})

	t.Run("the ConfigMap's config is prod.yaml but for addresses, the sidecar socket and the metrics listener", func(t *testing.T) {
		file, err := configFileOf(o, edgeSpec, edge)
		if err != nil {
			t.Fatal(err)
		}
		k := config.Default()
		if err := config.Decode([]byte(file), &k); err != nil {
			t.Fatal(err)
		}
		// A ConfigMap is no place for a secret: they come from the Secret.
		if k.Admin.Token != "" || len(k.Token.Keys) > 0 || len(k.OrderSigning.Keys) > 0 || k.Payment.ProviderKey != "" ||
			k.Engine.SidecarSecret != "" || k.Edge.EngineSecret != "" || len(k.Edge.IdentityKeys) > 0 {
			t.Error("the ConfigMap's config holds a secret")
		}
		if d, err := mysql.ParseDSN(k.Store.DSN); err != nil || d.Passwd != "" {
			t.Errorf("the ConfigMap's store.dsn holds a password or does not parse (%v)", err)
		}
		allowed := []string{"redis.default.addrs", "redis.hot.addrs", "engine.kafka.brokers", "consumer.brokers",
			"store.dsn", "engine.listen", "edge.engine", "metrics.listen"}
		for _, d := range configDiff(prod, k) {
			key, _, _ := strings.Cut(d, ":")
			if !slices.Contains(allowed, key) {
				t.Errorf("differs from configs/prod.yaml: %s (prod.yaml, k8s)", d)
			}
		}
	})

	t.Run("the edge listens where its ports, probes and Service say", func(t *testing.T) {
		name, podLabels := statefulPod(edgeSet, 0)
		cfg, err := containerConfig(o, edgeSpec, edge, name, podLabels)
		if err != nil {
			t.Fatal(err)
		}
		public := listenPort(t, "edge.listen", cfg.Edge.Listen)
		admin := listenPort(t, "admin.listen", cfg.Admin.Listen)
		if portOf(edge, intstr.FromString("http")) != public {
			t.Errorf("edge: container port http is not edge.listen's %d", public)
		}
		if portOf(edge, intstr.FromString("admin")) != admin {
			t.Errorf("edge: container port admin is not admin.listen's %d", admin)
		}
		readyPort := admin // prod keeps /readyz on the admin listener
		if cfg.Edge.PublicOps {
			readyPort = public
		}
		checkProbe(t, edge, "readiness", edge.ReadinessProbe, "/readyz", readyPort)
		checkProbe(t, edge, "liveness", edge.LivenessProbe, "/healthz", public)

		var svc *corev1.Service
		for _, s := range o.services {
			if s.Spec.ClusterIP != corev1.ClusterIPNone && matches(&metav1.LabelSelector{MatchLabels: s.Spec.Selector}, edgeSet.Spec.Template.Labels) {
				svc = s
			}
		}
		if svc == nil {
			t.Fatal("no (non-headless) Service selects the edge pods")
		}
		for _, p := range svc.Spec.Ports {
			if portOf(edge, p.TargetPort) != public {
				t.Errorf("Service %s port %d targets %s, not the public listener %d", svc.Name, p.Port, p.TargetPort.String(), public)
			}
		}
	})

	t.Run("every Service's target ports are ports of the pods it selects", func(t *testing.T) {
		for _, svc := range o.services {
			var pods []*appsv1.StatefulSet
			for _, set := range o.statefulSets {
				if matches(&metav1.LabelSelector{MatchLabels: svc.Spec.Selector}, set.Spec.Template.Labels) {
					pods = append(pods, set)
				}
			}
			if len(pods) == 0 {
				t.Errorf("Service %s selects no pods", svc.Name)
			}
			for _, set := range pods {
				spec := set.Spec.Template.Spec
				for _, p := range svc.Spec.Ports {
					found := false
					// A named target resolves among the containers only;
					// a number may be any container's, a sidecar's too.
					for _, c := range spec.Containers {
						found = found || hasPort(c, p.TargetPort)
					}
					for _, c := range spec.InitContainers {
						found = found || p.TargetPort.Type == intstr.Int && hasPort(c, p.TargetPort)
					}
					if !found {
						t.Errorf("Service %s port %s: target %s is no port of %s's containers", svc.Name, p.Name, p.TargetPort.String(), set.Name)
					}
				}
			}
		}
	})

	t.Run("the edge drains before the grace period ends", func(t *testing.T) {
		if edge.Lifecycle == nil || edge.Lifecycle.PreStop == nil {
			t.Fatal("edge: no preStop hook: the load balancer may still send to a closed listener")
		}
		var sleep time.Duration
		switch h := edge.Lifecycle.PreStop; {
		case h.Sleep != nil:
			sleep = time.Duration(h.Sleep.Seconds) * time.Second
		default:
			t.Fatal("edge: the preStop hook is not a sleep (the image has no shell)")
		}
		if sleep < 5*time.Second {
			t.Errorf("edge: preStop sleeps %v: too short for the endpoints to be removed", sleep)
		}
		if g := graceOf(edgeSpec); g < sleep+processGrace {
			t.Errorf("edge pod: terminationGracePeriodSeconds %v < preStop %v + the process' drain %v", g, sleep, processGrace)
		}
		if g := graceOf(consumerSpec); g < processGrace {
			t.Errorf("consumer pod: terminationGracePeriodSeconds %v < the process' drain %v", g, processGrace)
		}
	})

	t.Run("the engine is a native sidecar serving the edge on a unix socket in a shared emptyDir", func(t *testing.T) {
		if !sidecar {
			t.Error("engine: not an init container with restartPolicy Always: it would not outlive the edge's drain")
		}
		name, podLabels := statefulPod(edgeSet, 0)
		ecfg, err := containerConfig(o, edgeSpec, edge, name, podLabels)
		if err != nil {
			t.Fatal(err)
		}
		gcfg, err := containerConfig(o, edgeSpec, eng, name, podLabels)
		if err != nil {
			t.Fatal(err)
		}
		sock, ok := strings.CutPrefix(gcfg.Engine.Listen, "unix://")
		if !ok {
			t.Fatalf("engine.listen %q is not a unix socket", gcfg.Engine.Listen)
		}
		if ecfg.Edge.Engine != gcfg.Engine.Listen {
			t.Errorf("edge.engine %q != engine.listen %q", ecfg.Edge.Engine, gcfg.Engine.Listen)
		}
		dir := path.Dir(sock)
		ev, gv := mountedAt(edge, dir), mountedAt(eng, dir)
		if ev == "" || ev != gv {
			t.Fatalf("socket directory %s: edge mounts %q, engine mounts %q; want one volume in both", dir, ev, gv)
		}
		if v := volumeNamed(edgeSpec, ev); v == nil || v.EmptyDir == nil {
			t.Errorf("volume %s at %s is not an emptyDir", ev, dir)
		}
		// The socket is mode 0600: both must run as one user.
		if edgeSpec.SecurityContext == nil || edgeSpec.SecurityContext.RunAsUser == nil {
			t.Error("edge pod: no pod-level runAsUser: the engine's 0600 socket needs the edge to run as the same user")
		}
		for _, c := range []corev1.Container{edge, eng} {
			if c.SecurityContext != nil && c.SecurityContext.RunAsUser != nil {
				t.Errorf("%s overrides runAsUser: the two containers must share one user", c.Name)
			}
		}
		metrics := listenPort(t, "metrics.listen", gcfg.Metrics.Listen)
		checkProbe(t, eng, "startup", eng.StartupProbe, "/readyz", metrics)
		checkProbe(t, eng, "readiness", eng.ReadinessProbe, "/readyz", metrics)
		checkProbe(t, eng, "liveness", eng.LivenessProbe, "/healthz", metrics)
	})

	t.Run("each engine takes its node id from its pod index", func(t *testing.T) {
		max := edgeMaxReplicas(o, edgeSet)
		seen := map[int64]string{}
		for i := range max {
			name, podLabels := statefulPod(edgeSet, i)
			cfg, err := containerConfig(o, edgeSpec, eng, name, podLabels)
			if err != nil {
				t.Fatal(err)
			}
			if other, dup := seen[cfg.Engine.Node]; dup {
				t.Fatalf("pods %s and %s both run engine.node %d: their requestNos can collide", other, name, cfg.Engine.Node)
			}
			seen[cfg.Engine.Node] = name
		}
	})

	t.Run("each consumer is a static group member named after its pod", func(t *testing.T) {
		for i := range 3 {
			name, podLabels := statefulPod(consumerSet, i)
			cfg, err := containerConfig(o, consumerSpec, cons, name, podLabels)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Consumer.InstanceID != name {
				t.Errorf("pod %s: consumer.instance_id %q, want the pod name", name, cfg.Consumer.InstanceID)
			}
		}
		name, podLabels := statefulPod(consumerSet, 0)
		cfg, err := containerConfig(o, consumerSpec, cons, name, podLabels)
		if err != nil {
			t.Fatal(err)
		}
		metrics := listenPort(t, "metrics.listen", cfg.Metrics.Listen)
		checkProbe(t, cons, "readiness", cons.ReadinessProbe, "/readyz", metrics)
		checkProbe(t, cons, "liveness", cons.LivenessProbe, "/healthz", metrics)
	})

	t.Run("secrets come from Secrets, never from a literal", func(t *testing.T) {
		for _, s := range o.statefulSets {
			spec := s.Spec.Template.Spec
			for _, c := range append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...) {
				for _, e := range c.Env {
					if config.SecretName(e.Name) && (e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil) {
						t.Errorf("%s/%s: %s is not from a secretKeyRef", s.Name, c.Name, e.Name)
					}
				}
			}
		}
	})

	t.Run("a PodDisruptionBudget and an HPA on CPU cover the edge", func(t *testing.T) {
		var pdb bool
		for _, p := range o.pdbs {
			if matches(p.Spec.Selector, edgeSet.Spec.Template.Labels) {
				pdb = true
			}
			if !matches(p.Spec.Selector, edgeSet.Spec.Template.Labels) && !matches(p.Spec.Selector, consumerSet.Spec.Template.Labels) {
				t.Errorf("PodDisruptionBudget %s selects no seckill pods", p.Name)
			}
		}
		if !pdb {
			t.Error("no PodDisruptionBudget selects the edge pods")
		}
		h := edgeHPA(o, edgeSet)
		if h == nil {
			t.Fatal("no HorizontalPodAutoscaler scales the edge StatefulSet")
		}
		cpu := false
		for _, m := range h.Spec.Metrics {
			if m.Type == autoscalingv2.ResourceMetricSourceType && m.Resource != nil && m.Resource.Name == corev1.ResourceCPU {
				cpu = true
			}
		}
		if !cpu {
			t.Error("the edge HPA does not scale on CPU")
		}
		for _, c := range append(append([]corev1.Container{}, edgeSpec.InitContainers...), edgeSpec.Containers...) {
			if _, ok := c.Resources.Requests[corev1.ResourceCPU]; !ok {
				t.Errorf("%s: no CPU request: the HPA's utilisation is undefined without one on every container", c.Name)
			}
		}
		if h.Spec.MinReplicas == nil || *h.Spec.MinReplicas < 2 {
			t.Error("the edge HPA may scale to one pod: the PDB could then never let one go")
		}
		if h.Spec.MaxReplicas > 1024 {
			t.Errorf("the edge HPA's maxReplicas %d exceeds the engine node ids (0-1023)", h.Spec.MaxReplicas)
		}
	})
}

// graceOf is a pod's terminationGracePeriodSeconds (Kubernetes' default
// 30 s when unset).
func graceOf(spec corev1.PodSpec) time.Duration {
	if spec.TerminationGracePeriodSeconds == nil {
		return 30 * time.Second
	}
	return time.Duration(*spec.TerminationGracePeriodSeconds) * time.Second
}

func edgeHPA(o k8sObjects, s *appsv1.StatefulSet) *autoscalingv2.HorizontalPodAutoscaler {
	for _, h := range o.hpas {
		if h.Spec.ScaleTargetRef.Kind == "StatefulSet" && h.Spec.ScaleTargetRef.Name == s.Name {
			return h
		}
	}
	return nil
}

// edgeMaxReplicas is the most edge pods there can be: the HPA's maximum,
// else the StatefulSet's replicas.
func edgeMaxReplicas(o k8sObjects, s *appsv1.StatefulSet) int {
	if h := edgeHPA(o, s); h != nil {
		return int(h.Spec.MaxReplicas)
	}
	if s.Spec.Replicas != nil {
		return int(*s.Spec.Replicas)
	}
	return 1
}
