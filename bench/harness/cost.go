package main

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"seckill/bench/benchkit"
)

// Where the CPU goes: the harness reads each process' CPU time from
// /proc/PID/stat (utime + stime, plus the reaped children's cutime + cstime,
// e.g. a Redis AOF rewrite) and each redis-server's INFO commandstats
// before and after a run, and divides the differences by the buyers the run
// accepted (200 answers wrk counted).

// Roles of the processes of a cost row, in the order of the table's columns.
const (
	roleServer   = "server" // edge + engine (or all of seckill dev, or the reference server)
	roleBroker   = "broker"
	roleConsumer = "consumer"
	roleRedisDef = "redis default"
	roleRedisHot = "redis hot"
)

var roles = []string{roleServer, roleBroker, roleConsumer, roleRedisDef, roleRedisHot}

func isRedis(role string) bool { return role == roleRedisDef || role == roleRedisHot }

// watched is one process whose CPU a cost row reads; redis is its address
// when it is a redis-server (for INFO commandstats).
type watched struct {
	role  string
	pid   int
	redis string
}

// cmdStat is one line of INFO commandstats: calls and the microseconds
// Redis spent executing them (commands run by scripts are counted too).
type cmdStat struct {
	calls, usec int64
}

// snapshot is the CPU and command counters of a cost row's processes at
// one moment.
type snapshot struct {
	at   time.Time
	cpu  map[string]time.Duration      // by role
	cmds map[string]map[string]cmdStat // by role, then command name
}

// commandStats reads INFO commandstats from the redis-server at addr.
func commandStats(addr string) (map[string]cmdStat, error) {
	s, err := benchkit.RedisInfo(addr, "commandstats")
	if err != nil {
		return nil, err
	}
	return parseCommandStats(s), nil
}

// parseCommandStats reads lines like
// cmdstat_evalsha:calls=12,usec=340,usec_per_call=28.33,rejected_calls=0,failed_calls=0
func parseCommandStats(info string) map[string]cmdStat {
	out := map[string]cmdStat{}
	for _, l := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(l), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		var st cmdStat
		for _, kv := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "calls":
				st.calls, _ = strconv.ParseInt(v, 10, 64)
			case "usec":
				st.usec, _ = strconv.ParseInt(v, 10, 64)
			}
		}
		out[strings.TrimPrefix(name, "cmdstat_")] = st
	}
	return out
}

// take reads every watched process' CPU and every redis-server's commands.
func take(ws []watched) (snapshot, error) {
	s := snapshot{at: time.Now(), cpu: map[string]time.Duration{}, cmds: map[string]map[string]cmdStat{}}
	for _, w := range ws {
		d, err := benchkit.ProcCPU(w.pid)
		if err != nil {
			return s, fmt.Errorf("%s (pid %d): %w", w.role, w.pid, err)
		}
		s.cpu[w.role] += d
		if w.redis != "" {
			m, err := commandStats(w.redis)
			if err != nil {
				return s, fmt.Errorf("%s (%s): %w", w.role, w.redis, err)
			}
			s.cmds[w.role] = m
		}
	}
	return s, nil
}

// cost is one row of the cost tables: the CPU and Redis commands of a
// run's processes per buyer it accepted.
type cost struct {
	name     string
	note     string // how the processes were arranged
	accepted int64
	window   time.Duration
	cpu      map[string]time.Duration      // by role, over the window
	cmds     map[string]map[string]cmdStat // by redis role, over the window
}

// costBetween is what happened between snapshots a and b.
func costBetween(name, note string, a, b snapshot, accepted int64) cost {
	c := cost{name: name, note: note, accepted: accepted, window: b.at.Sub(a.at),
		cpu: map[string]time.Duration{}, cmds: map[string]map[string]cmdStat{}}
	for role, d := range b.cpu {
		c.cpu[role] = d - a.cpu[role]
	}
	for role, after := range b.cmds {
		m := map[string]cmdStat{}
		for cmd, st := range after {
			was := a.cmds[role][cmd]
			d := cmdStat{calls: st.calls - was.calls, usec: st.usec - was.usec}
			if cmd == "info" {
				// The harness' own INFO commandstats before the run; no
				// part of the system sends INFO, so the time is its too.
				if d.calls--; d.calls <= 0 {
					continue
				}
			}
			if d.calls > 0 || d.usec > 0 {
				m[cmd] = d
			}
		}
		c.cmds[role] = m
	}
	return c
}

func (c cost) ok() bool { return c.accepted > 0 && c.window > 0 }

// pooled is the runs cs taken as one: their CPU, commands, requests and
// windows summed, so that its per-request figures are the runs' weighted
// by their requests. Runs that measured nothing are left out.
func pooled(name string, cs ...cost) cost {
	p := cost{name: name, cpu: map[string]time.Duration{}, cmds: map[string]map[string]cmdStat{}}
	for _, c := range cs {
		if !c.ok() {
			continue
		}
		if p.note == "" {
			p.note = c.note
		}
		p.accepted += c.accepted
		p.window += c.window
		for role, d := range c.cpu {
			p.cpu[role] += d
		}
		for role, m := range c.cmds {
			if p.cmds[role] == nil {
				p.cmds[role] = map[string]cmdStat{}
			}
			for cmd, st := range m {
				was := p.cmds[role][cmd]
				p.cmds[role][cmd] = cmdStat{calls: was.calls + st.calls, usec: was.usec + st.usec}
			}
		}
	}
	return p
}

// perBuyer is µs of CPU per accepted buyer for the roles given (all when
// none).
func (c cost) perBuyer(rs ...string) float64 {
	if c.accepted <= 0 {
		return 0
	}
	if len(rs) == 0 {
		rs = roles
	}
	var d time.Duration
	for _, r := range rs {
		d += c.cpu[r]
	}
	return float64(d.Microseconds()) / float64(c.accepted)
}

func (c cost) has(role string) bool { _, ok := c.cpu[role]; return ok }

func (c cost) redisRoles() []string {
	var out []string
	for _, r := range roles {
		if isRedis(r) && c.has(r) {
			out = append(out, r)
		}
	}
	return out
}

// scans are the commands that walk a whole key (a SKU's users hash, its
// claim set) or the keyspace: bookkeeping that grows with the crowd.
var scans = map[string]bool{"scan": true, "hscan": true, "sscan": true, "zscan": true,
	"smembers": true, "hgetall": true, "hkeys": true, "hvals": true, "keys": true}

// scanShare is the share of the CPU of the redis-servers of rs that went
// to scans: their commandstats time (usec) over the processes' CPU time.
// (Not over the sum of usec: a script's usec includes the commands it
// runs, which commandstats counts again under their own names.)
func (c cost) scanShare(rs ...string) (float64, bool) {
	var cpu time.Duration
	var sc int64
	for _, r := range rs {
		cpu += c.cpu[r]
		for cmd, st := range c.cmds[r] {
			if scans[cmd] {
				sc += st.usec
			}
		}
	}
	if cpu <= 0 {
		return 0, false
	}
	return float64(sc) / float64(cpu.Microseconds()), true
}

// scripts are the commands that run a script.
var scripts = map[string]bool{"eval": true, "evalsha": true, "eval_ro": true, "evalsha_ro": true, "fcall": true, "fcall_ro": true}

// renderCosts writes the two cost tables: CPU per accepted buyer by
// process, and Redis commands per accepted buyer by redis-server, each
// with ratios to the reference (ref, the EVALSHA server and its Redis).
func renderCosts(b *strings.Builder, ref cost, rows []cost) {
	us := func(v float64) string { return fmt.Sprintf("%.1f", v) }
	cell := func(c cost, role string) string {
		if !c.has(role) {
			return "-"
		}
		return us(c.perBuyer(role))
	}
	all := []cost{ref}
	for _, c := range rows {
		if c.name != "" { // a run that did not run (-parts=false)
			all = append(all, c)
		}
	}
	b.WriteString("\nCPU per accepted buyer (µs; /proc/PID/stat utime+stime, children's included, from the start of the wrk run\n")
	fmt.Fprintf(b, "until the last ticket became an order; accepted = the 200 answers wrk counted; a reference: per request;\n")
	fmt.Fprintf(b, "vs ref: against %s):\n\n", ref.name)
	b.WriteString("| run | accepted | window | edge+engine | broker | consumer | redis default | redis hot | all Redis | all | vs ref: edge+engine | Redis | all |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, c := range all {
		if !c.ok() {
			fmt.Fprintf(b, "| %s | %d | - | - | - | - | - | - | - | - | - | - | - |\n", c.name, c.accepted)
			continue
		}
		redis := c.perBuyer(roleRedisDef, roleRedisHot)
		fmt.Fprintf(b, "| %s | %d | %v | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", c.name, c.accepted, c.window.Round(100*time.Millisecond),
			cell(c, roleServer), cell(c, roleBroker), cell(c, roleConsumer), cell(c, roleRedisDef), cell(c, roleRedisHot),
			us(redis), us(c.perBuyer()),
			ratio(c.perBuyer(roleServer), ref.perBuyer(roleServer)), ratio(redis, ref.perBuyer(roleRedisDef, roleRedisHot)),
			ratio(c.perBuyer(), ref.perBuyer()))
	}
	for _, c := range all {
		if c.note != "" {
			fmt.Fprintf(b, "- %s: %s\n", c.name, c.note)
		}
	}

	b.WriteString("\nRedis commands per accepted buyer (INFO commandstats over the same window). Redis counts the commands a\n")
	b.WriteString("script runs as well, under their own names: one EVALSHA of occupy.lua shows with the HGET, DECRBY… it runs.\n")
	b.WriteString("µs is commandstats' usec (time inside the command, wall clock; a script's includes its commands'), per\n")
	b.WriteString("accepted buyer; scans (SCAN, HSCAN, SSCAN, SMEMBERS, HGETALL…) are shown as their usec over the redis-server's CPU:\n\n")
	b.WriteString("| run | redis-server | calls | vs ref | script calls | vs ref | scans, share of Redis CPU | per command: calls (µs) |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|---:|---|\n")
	refCalls, refScripts := ref.redisPerBuyer(ref.redisRoles()...)
	for _, c := range all {
		if !c.ok() {
			continue
		}
		share := func(rs ...string) string {
			if s, ok := c.scanShare(rs...); ok {
				return fmt.Sprintf("%.1f%%", 100*s)
			}
			return "-"
		}
		rs := c.redisRoles()
		for _, r := range rs {
			calls, sc := c.redisPerBuyer(r)
			fmt.Fprintf(b, "| %s | %s | %.2f | %s | %.3f | %s | %s | %s |\n", c.name, r, calls, ratio(calls, refCalls),
				sc, ratio(sc, refScripts), share(r), c.commands(r))
		}
		if len(rs) > 1 {
			calls, sc := c.redisPerBuyer(rs...)
			fmt.Fprintf(b, "| %s | **all** | %.2f | %s | %.3f | %s | %s | |\n", c.name, calls, ratio(calls, refCalls),
				sc, ratio(sc, refScripts), share(rs...))
		}
	}
}

// redisPerBuyer is the commands and the script calls among them per
// accepted buyer on the redis-servers of rs.
func (c cost) redisPerBuyer(rs ...string) (calls, scriptCalls float64) {
	if c.accepted <= 0 {
		return 0, 0
	}
	for _, r := range rs {
		for cmd, st := range c.cmds[r] {
			calls += float64(st.calls)
			if scripts[cmd] {
				scriptCalls += float64(st.calls)
			}
		}
	}
	return calls / float64(c.accepted), scriptCalls / float64(c.accepted)
}

// commands lists a redis-server's commands per accepted buyer, most
// called first: "evalsha 1.00 (8.1), hset 2.00 (1.2)".
func (c cost) commands(role string) string {
	type kv struct {
		name string
		st   cmdStat
	}
	var l []kv
	for name, st := range c.cmds[role] {
		l = append(l, kv{name, st})
	}
	sort.Slice(l, func(i, j int) bool {
		if l[i].st.calls != l[j].st.calls {
			return l[i].st.calls > l[j].st.calls
		}
		return l[i].name < l[j].name
	})
	parts := make([]string, 0, len(l))
	n := float64(c.accepted)
	for _, e := range l {
		parts = append(parts, fmt.Sprintf("%s %.3g (%.2g)", e.name, float64(e.st.calls)/n, float64(e.st.usec)/n))
	}
	return strings.Join(parts, ", ")
}

// meter is a cost measurement in progress: measure takes the snapshot
// before, done the one after. A process or Redis that cannot be read is
// logged and leaves the row empty; it does not stop the run.
type meter struct {
	ws     []watched
	before snapshot
	err    error
}

func measure(ws []watched) *meter {
	m := &meter{ws: ws}
	m.before, m.err = take(ws)
	return m
}

func (m *meter) done(name, note string, accepted int64) cost {
	if m.err == nil {
		var after snapshot
		if after, m.err = take(m.ws); m.err == nil {
			return costBetween(name, note, m.before, after, accepted)
		}
	}
	logf("%s: CPU and Redis commands not measured: %v", name, m.err)
	return cost{name: name, note: "not measured: " + m.err.Error(), accepted: accepted}
}
