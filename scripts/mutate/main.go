// Command mutate is the mutation check: it plants the
// deliberate bugs of scripts/mutations/*.patch one at a time in a scratch
// copy of the committed tree and shows that the tests catch each one.
//
//	go run ./scripts/mutate [-run REGEX] [-flags '-race'] [-all] [-timeout 15m] [-keep] [-list]
//	make mutate [MUTATE_FLAGS='-run occupy']
//
// The scratch copy is `git archive HEAD` in a temp dir, never the working
// tree, so what is checked is the last commit (commit a new test or patch
// first). For each mutation it applies the patch (git apply), runs the
// patch's quick stage (its package's own tests) and, while the mutation
// survives, its wide stages (other packages, fault scenarios with a narrow
// -run), stopping a run at its first failing test (with -all: running the
// stage to its end and listing every failing test); then it resets the copy.
// Last, every test that caught a mutation is run once on the unmutated copy
// and must pass there (a test that fails anyway proves nothing). Tests share
// one MariaDB that mutate starts (testenv.LaunchMariaDB; it dies with
// mutate) unless $SECKILL_TEST_MYSQL_DSN names one.
//
// It prints one table (markdown) and exits 1 if a mutation survived, a patch
// no longer applies, a mutated tree does not compile, or a catching test
// fails without its mutation: the check cannot rot silently. Not part of
// make test: it takes several minutes.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"time"

	"seckill/internal/testenv"
)

// result is what happened to one mutation.
type result struct {
	m       mutation
	status  string // caught, SURVIVED, PATCH DOES NOT APPLY, BUILD FAILS, ERROR, BASELINE FAILS
	stage   stage
	out     outcome
	total   time.Duration // every stage run, the compiling included
	problem string
}

func (r result) ok() bool { return r.status == "caught" }

func main() {
	os.Exit(run())
}

func run() int {
	var (
		sel      = flag.String("run", "", "run only the mutations whose name matches this regexp")
		list     = flag.Bool("list", false, "list the mutations and their stages, run nothing")
		flags    = flag.String("flags", "", "extra go test flags for every run, e.g. '-race'")
		timeout  = flag.Duration("timeout", 15*time.Minute, "go test -timeout of each run")
		keep     = flag.Bool("keep", false, "keep the scratch copy and print its path")
		baseline = flag.Bool("baseline", true, "run each catching test on the unmutated tree (it must pass)")
		all      = flag.Bool("all", false, "run every test of the catching stage and list every failing test (slower)")
		logDir   = flag.String("logs", "", "directory for one log per mutation (default: a new temp dir, kept)")
	)
	flag.Parse()

	root, err := output("", "git", "rev-parse", "--show-toplevel")
	if err != nil {
		return fail("not in a git checkout: %v", err)
	}
	var re *regexp.Regexp
	if *sel != "" {
		if re, err = regexp.Compile(*sel); err != nil {
			return fail("-run: %v", err)
		}
	}
	muts, err := loadMutations(filepath.Join(root, "scripts", "mutations"), re)
	if err != nil {
		return fail("%v", err)
	}
	if *list {
		for _, m := range muts {
			fmt.Printf("%s: %s\n", m.name, m.bug)
			for _, st := range m.stages {
				fmt.Printf("\t%-5s go test %s\n", st.label, st)
			}
		}
		return 0
	}
	module, err := output(root, "go", "list", "-m")
	if err != nil {
		return fail("go list -m: %v", err)
	}
	head, err := output(root, "git", "rev-parse", "--short", "HEAD")
	if err != nil {
		return fail("%v", err)
	}
	if dirty, _ := output(root, "git", "status", "--porcelain", "--untracked-files=no"); dirty != "" {
		fmt.Fprintf(os.Stderr, "mutate: the working tree has uncommitted changes; they are not checked (HEAD %s is)\n", head)
	}

	// The scratch copy: the committed tree in a git repository of its own,
	// so a mutation is undone by a hard reset (whatever the tests wrote).
	scratch, err := os.MkdirTemp("", "seckill-mutate-")
	if err != nil {
		return fail("%v", err)
	}
	cleanup := []func(){}
	defer func() {
		for i := len(cleanup) - 1; i >= 0; i-- {
			cleanup[i]()
		}
	}()
	if *keep {
		fmt.Fprintf(os.Stderr, "mutate: scratch copy kept in %s\n", scratch)
	} else {
		cleanup = append(cleanup, func() { os.RemoveAll(scratch) })
	}
	tree := filepath.Join(scratch, "tree")
	if err := copyTree(root, tree); err != nil {
		return fail("scratch copy: %v", err)
	}
	if *logDir == "" {
		if *logDir, err = os.MkdirTemp("", "seckill-mutate-logs-"); err != nil {
			return fail("%v", err)
		}
	} else if err := os.MkdirAll(*logDir, 0o755); err != nil {
		return fail("%v", err)
	}

	r := &runner{module: module, flags: strings.Fields(*flags), timeout: *timeout, env: os.Environ(), all: *all}

	// Ctrl-C: stop the run in progress and clean up.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sigs
		fmt.Fprintln(os.Stderr, "mutate: interrupted; stopping")
		r.stop()
		for i := len(cleanup) - 1; i >= 0; i-- {
			cleanup[i]()
		}
		os.Exit(130)
	}()

	if os.Getenv(testenv.MySQLDSNEnv) == "" {
		m, err := testenv.LaunchMariaDB(false)
		if err != nil {
			return fail("MariaDB: %v", err)
		}
		cleanup = append(cleanup, func() { _, _ = m.Stop() })
		r.env = environ(testenv.MySQLDSNEnv, m.DSN)
		fmt.Fprintf(os.Stderr, "mutate: MariaDB for the tests: %s\n", m.DSN)
	}

	began, load := time.Now(), loadavg()
	fmt.Fprintf(os.Stderr, "mutate: %d mutations of %s (HEAD %s) in %s; logs in %s\n", len(muts), module, head, tree, *logDir)
	results := make([]result, 0, len(muts))
	for _, m := range muts {
		res := mutate(r, tree, m, *logDir)
		fmt.Fprintf(os.Stderr, "mutate: %-28s %s", m.name, res.status)
		if res.ok() {
			fmt.Fprintf(os.Stderr, " by %s after %s (%s stage)", res.out.test, res.total.Round(time.Second), res.stage.label)
		} else if res.problem != "" {
			fmt.Fprintf(os.Stderr, ": %s", res.problem)
		}
		fmt.Fprintln(os.Stderr)
		results = append(results, res)
		if err := reset(tree); err != nil {
			return fail("resetting the scratch copy: %v", err)
		}
	}
	if *baseline {
		checkBaseline(r, tree, results, *logDir)
	}

	printTable(os.Stdout, results, head, *flags, time.Since(began), load+" → "+loadavg())
	if *all {
		printFailures(os.Stdout, results)
	}
	for _, res := range results {
		if !res.ok() {
			fmt.Fprintf(os.Stderr, "mutate: FAILED: %s %s: %s (log %s)\n", res.m.name, res.status, res.problem,
				filepath.Join(*logDir, res.m.name+".log"))
		}
	}
	for _, res := range results {
		if !res.ok() {
			return 1
		}
	}
	return 0
}

// mutate plants m in tree and runs its stages until one catches it.
func mutate(r *runner, tree string, m mutation, logDir string) result {
	res := result{m: m}
	log, err := os.Create(filepath.Join(logDir, m.name+".log"))
	if err != nil {
		res.status, res.problem = "ERROR", err.Error()
		return res
	}
	defer log.Close()
	fmt.Fprintf(log, "mutation %s: %s\n", m.name, m.bug)
	if out, err := combined(tree, "git", "apply", m.path); err != nil {
		res.status = "PATCH DOES NOT APPLY"
		res.problem = "git apply " + filepath.Base(m.path) + ": " + firstLine(out)
		fmt.Fprintf(log, "%s\n%s", res.problem, out)
		return res
	}
	for _, st := range m.stages {
		o := r.goTest(tree, st, log)
		res.total += o.took
		res.stage, res.out = st, o
		switch o.verdict {
		case caught:
			// Time to the first failure: the stages it survived, then
			// this one up to its first failing test.
			res.total += o.after - o.took
			res.status = "caught"
			return res
		case buildFails:
			res.status, res.problem = "BUILD FAILS", o.detail
			return res
		case broken:
			res.status, res.problem = "ERROR", o.detail
			return res
		}
	}
	res.status, res.problem = "SURVIVED", "every stage passed with the bug planted"
	if len(res.out.ran) == 0 {
		res.problem += " (its last stage ran no test: is its -run stale?)"
	}
	return res
}

// checkBaseline runs every catching test on the unmutated tree, one go test
// each; a test that fails there (or does not run) caught nothing.
func checkBaseline(r *runner, tree string, results []result, logDir string) {
	log, err := os.Create(filepath.Join(logDir, "baseline.log"))
	if err != nil {
		fmt.Fprintf(os.Stderr, "mutate: baseline log: %v\n", err)
		return
	}
	defer log.Close()
	done := map[string]outcome{}
	for i := range results {
		res := &results[i]
		if !res.ok() {
			continue
		}
		st := stage{label: "baseline", pkgs: []string{res.out.pkg}, run: exactRun(res.out.name)}
		if res.out.name == "" {
			// The package failed without naming a test: the same run.
			st = res.stage
		}
		key := res.out.pkg + " " + res.out.name
		o, ok := done[key]
		if !ok {
			fmt.Fprintf(os.Stderr, "mutate: baseline: go test %s\n", st)
			o = r.goTest(tree, st, log)
			done[key] = o
		}
		switch {
		case o.verdict != passed:
			res.status = "BASELINE FAILS"
			res.problem = "without the mutation it fails too: " + o.test + o.detail
		case res.out.name != "" && !o.ran[key]:
			res.status = "BASELINE FAILS"
			res.problem = "without the mutation " + res.out.test + " did not run"
		}
	}
}

func printTable(w io.Writer, results []result, head, flags string, took time.Duration, load string) {
	caughtN := 0
	for _, res := range results {
		if res.ok() {
			caughtN++
		}
	}
	fmt.Fprintf(w, "\n%s — go run ./scripts/mutate%s at %s: %d of %d mutations caught, %s in all\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), flagNote(flags), head, caughtN, len(results), took.Round(time.Second))
	fmt.Fprintln(w, "| mutation | bug planted | result | caught by (first failing test) | stage | first failure after¹ | go test run |")
	fmt.Fprintln(w, "|---|---|---|---|---|---:|---|")
	for _, res := range results {
		by, after := res.out.test, res.total.Round(time.Second).String()
		if !res.ok() {
			by, after = res.problem, "—"
		}
		stageCol, runCol := res.stage.label, "`go test "+res.stage.String()+"`"
		if res.stage.label == "" {
			stageCol, runCol = "—", "—"
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s |\n", res.m.name, res.m.bug, res.status, by, stageCol, after, runCol)
	}
	fmt.Fprintf(w, "\n¹ wall time from the start of the mutation's first go test (compiling included, and the stages it\n"+
		"survived) to its first failing test, where the run is stopped. %d cores, load average %s (start → end).\n",
		runtime.NumCPU(), load)
}

// printFailures lists, per caught mutation, every test that failed in the
// catching stage (-all).
func printFailures(w io.Writer, results []result) {
	fmt.Fprintln(w, "\n| mutation | every failing test of the catching stage (-all) |")
	fmt.Fprintln(w, "|---|---|")
	for _, res := range results {
		if res.ok() {
			fmt.Fprintf(w, "| %s | %d: %s |\n", res.m.name, len(res.out.failed), strings.Join(res.out.failed, ", "))
		}
	}
}

// loadavg is the 1-minute load average, or "?".
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "?"
}

func flagNote(flags string) string {
	if flags == "" {
		return ""
	}
	return " -flags '" + flags + "'"
}

// copyTree writes the tree of HEAD of root into dir and makes it a git
// repository with one commit, for reset.
func copyTree(root, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	archive := exec.Command("git", "archive", "--format=tar", "HEAD")
	archive.Dir = root
	untar := exec.Command("tar", "-x", "-C", dir)
	pipe, err := archive.StdoutPipe()
	if err != nil {
		return err
	}
	untar.Stdin = pipe
	if err := archive.Start(); err != nil {
		return err
	}
	if out, err := untar.CombinedOutput(); err != nil {
		return fmt.Errorf("tar: %v: %s", err, out)
	}
	if err := archive.Wait(); err != nil {
		return fmt.Errorf("git archive: %v", err)
	}
	for _, args := range [][]string{
		{"init", "-q"},
		{"add", "-A"},
		{"-c", "user.name=mutate", "-c", "user.email=mutate@localhost", "commit", "-q", "--no-verify", "-m", "unmutated"},
	} {
		if out, err := combined(dir, "git", args...); err != nil {
			return fmt.Errorf("git %s: %v: %s", args[0], err, out)
		}
	}
	return nil
}

// reset undoes a mutation and whatever its tests wrote.
func reset(dir string) error {
	if out, err := combined(dir, "git", "reset", "-q", "--hard"); err != nil {
		return fmt.Errorf("%v: %s", err, out)
	}
	if out, err := combined(dir, "git", "clean", "-q", "-fdx"); err != nil {
		return fmt.Errorf("%v: %s", err, out)
	}
	return nil
}

func output(dir, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	return strings.TrimSpace(string(out)), err
}

func combined(dir, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

func fail(format string, args ...any) int {
	fmt.Fprintf(os.Stderr, "mutate: "+format+"\n", args...)
	return 1
}
