package config

import (
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// composeRedisPasswords are placeholders for the passwords
// docker-compose.yml requires: the Redis ACL users' and the database's.
var composeRedisPasswords = []string{"REDIS_EDGE_PASSWORD=0a", "REDIS_ENGINE_PASSWORD=0b",
	"REDIS_CONSUMER_PASSWORD=0c", "REDIS_REPLICA_PASSWORD=0d",
	"MYSQL_PASSWORD=0e", "MYSQL_ROOT_PASSWORD=0f"}

// aclUsers are the users deploy/redis/users.acl defines.
func aclUsers(t *testing.T) map[string]bool {
	t.Helper()
	b, err := os.ReadFile("../../../deploy/redis/users.acl")
	if err != nil {
		t.Fatal(err)
	}
	users := map[string]bool{}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[0] == "user" {
			users[f[1]] = true
		}
	}
	return users
}

// TestComposeRedisRunsWithACLUsers: every redis-server of the stack starts
// through deploy/redis/start.sh with users.acl mounted and the passwords
// from the environment; every seckill process logs in to the default and
// hot Redis as its role's user, the password interpolated from that
// user's REDIS_<USER>_PASSWORD (no literal secret), and prod.yaml with
// those variables passes the start-up check that refuses an
// unauthenticated Redis (without them it does not).
func TestComposeRedisRunsWithACLUsers(t *testing.T) {
	f := loadCompose(t)
	users := aclUsers(t)
	for _, u := range []string{"default", "edge", "engine", "consumer", "replica"} {
		if !users[u] {
			t.Errorf("deploy/redis/users.acl does not define user %s", u)
		}
	}
	redis := 0
	for name, s := range f.Services {
		if c := command(s); len(c) == 0 || c[0] != "redis-server" {
			continue
		}
		redis++
		if ep := strings.Join(command(composeService{Command: s.Entrypoint}), " "); ep != "sh /etc/seckill/redis/start.sh" {
			t.Errorf("%s: entrypoint %q, want sh /etc/seckill/redis/start.sh", name, ep)
		}
		mounted := false
		for _, v := range s.Volumes {
			if src, dst := volume(v); path.Clean(src) == "deploy/redis" && dst == "/etc/seckill/redis" {
				mounted = true
			}
		}
		if !mounted {
			t.Errorf("%s: ./deploy/redis is not mounted at /etc/seckill/redis", name)
		}
		env := environment(s)
		for u := range users {
			if u == "default" {
				continue
			}
			k := "REDIS_" + strings.ToUpper(u) + "_PASSWORD"
			if v := env[k]; v == nil || !strings.HasPrefix(*v, "${"+k+":?") {
				t.Errorf("%s: %s is not required from the environment (${%s:?…}): %v", name, k, k, v)
			}
		}
	}
	if redis != 4 {
		t.Errorf("%d redis-server services, want 4 (two primaries, two replicas)", redis)
	}
	for name, s := range seckillServices(f) {
		env := environment(s)
		role := command(s)[0]
		for _, shard := range []string{"DEFAULT", "HOT"} {
			user := env["SECKILL_REDIS_"+shard+"_USERNAME"]
			if user == nil || *user != role || !users[*user] {
				t.Errorf("%s: SECKILL_REDIS_%s_USERNAME %v, want its role's ACL user %s", name, shard, user, role)
				continue
			}
			pass := env["SECKILL_REDIS_"+shard+"_PASSWORD"]
			want := "${REDIS_" + strings.ToUpper(role) + "_PASSWORD"
			if pass == nil || !strings.HasPrefix(*pass, want) {
				t.Errorf("%s: SECKILL_REDIS_%s_PASSWORD %v, want %s…}", name, shard, pass, want)
			}
		}
		if role == "consumer" {
			if v := env["SECKILL_RECONCILE_JOBS"]; v == nil || *v != "false" {
				t.Errorf("%s: SECKILL_RECONCILE_JOBS %v: its user may not rebuild the catalog, the edges run the jobs", name, v)
			}
		}
	}
	c := loadProd(t)
	if err := c.Redis.CheckAuth(); err == nil {
		t.Error("prod.yaml without the environment passes the Redis authentication check")
	}
	c.Redis.Default.Password, c.Redis.Hot[0].Password = "0a", "0a"
	if err := c.Redis.CheckAuth(); err != nil {
		t.Errorf("prod.yaml with the passwords compose passes: %v", err)
	}
}

// TestComposeStartScriptFillsTheACL runs deploy/redis/start.sh's ACL
// step as the container would (sh, grep, sed) and checks every user line
// has its password and nothing else of the template is left; a password
// that is not hex is refused before anything is written.
func TestComposeStartScriptFillsTheACL(t *testing.T) {
	b, err := os.ReadFile("../../../deploy/redis/start.sh")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	script := strings.NewReplacer("/etc/seckill/redis/users.acl", filepath.Join("..", "..", "..", "deploy", "redis", "users.acl"),
		"d=/tmp/seckill-redis", "d="+dir, `chown -R redis:redis "$d"`, "true",
		"exec docker-entrypoint.sh", "exec echo").Replace(string(b))
	run := func(env ...string) (string, error) {
		cmd := exec.Command("sh", "-c", script, "start.sh", "redis-server", "--appendonly", "yes")
		cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, env...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	pw := []string{"REDIS_EDGE_PASSWORD=aa11", "REDIS_ENGINE_PASSWORD=bb22", "REDIS_CONSUMER_PASSWORD=cc33", "REDIS_REPLICA_PASSWORD=dd44"}
	out, err := run(pw...)
	if err != nil {
		t.Fatalf("start.sh: %v\n%s", err, out)
	}
	if want := "redis-server " + dir + "/auth.conf --appendonly yes"; strings.TrimSpace(out) != want {
		t.Fatalf("start.sh runs %q, want %q", strings.TrimSpace(out), want)
	}
	acl, err := os.ReadFile(filepath.Join(dir, "users.acl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"user edge on >aa11 ", "user engine on >bb22 ", "user consumer on >cc33 ", "user replica on >dd44 ", "user default on nopass "} {
		if !strings.Contains(string(acl), want) {
			t.Errorf("users.acl lacks %q:\n%s", want, acl)
		}
	}
	if regexp.MustCompile(`\{\{|#`).Match(acl) {
		t.Errorf("users.acl keeps a placeholder or a comment (Redis reads neither):\n%s", acl)
	}
	conf, err := os.ReadFile(filepath.Join(dir, "auth.conf"))
	if err != nil || !strings.Contains(string(conf), "masteruser replica\nmasterauth dd44\n") {
		t.Errorf("auth.conf %q, %v", conf, err)
	}
	if out, err := run(append(pw[:3:3], "REDIS_REPLICA_PASSWORD=not/hex")...); err == nil || !strings.Contains(out, "REDIS_REPLICA_PASSWORD must be set") {
		t.Errorf("a password that is not hex: %v %q", err, out)
	}
}
