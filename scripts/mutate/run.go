package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"
)

// event is one line of go test -json (cmd/test2json's TestEvent, plus the
// build events go test -json interleaves since Go 1.24).
type event struct {
	Action      string
	Package     string
	ImportPath  string // build-output, build-fail
	Test        string
	Output      string
	FailedBuild string
}

// verdict is what one go test run showed.
type verdict int

const (
	passed     verdict = iota // every test passed: the mutation survived this stage
	caught                    // a test failed
	buildFails                // the tree did not compile (or vet refused it)
	broken                    // go test failed without a failing test or a build error
)

// outcome is the result of one go test run.
type outcome struct {
	verdict verdict
	test    string        // the first failing test, "pkg TestName/sub"
	pkg     string        // its import path
	name    string        // its name (TestName/sub)
	after   time.Duration // from the start of go test (compiling included) to that failure
	took    time.Duration // the whole run (it is stopped at the first failure)
	ran     map[string]bool
	failed  []string // every failing test, "pkg TestName/sub" (with -all; else the first)
	detail  string
}

// goTest runs go test -json in dir over st, writing the tests' output to
// log. It stops the run at the first failing test (killing its process
// group: the test binaries' servers go with them, by Pdeathsig), since
// only the first failure and its time are reported — unless r.all, which
// runs every test of the stage and records every failure.
func (r *runner) goTest(dir string, st stage, log io.Writer) outcome {
	args := []string{"test", "-json", "-count=1", "-timeout", r.timeout.String()}
	if !r.all {
		args = append(args, "-failfast")
	}
	args = append(args, r.flags...)
	if st.run != "" {
		args = append(args, "-run", st.run)
	}
	args = append(args, st.pkgs...)
	fmt.Fprintf(log, "\n==== go %s\n", strings.Join(args, " "))

	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = r.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stderr = log
	out, err := cmd.StdoutPipe()
	if err != nil {
		return outcome{verdict: broken, detail: err.Error()}
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return outcome{verdict: broken, detail: err.Error()}
	}
	r.setRunning(cmd.Process.Pid)
	defer r.setRunning(0)
	// A run that hangs past go test's own -timeout is stopped too.
	watchdog := time.AfterFunc(r.timeout+2*time.Minute, func() { killGroup(cmd.Process.Pid) })
	defer watchdog.Stop()

	o := outcome{verdict: passed, ran: map[string]bool{}}
	var buildErr string
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e event
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			fmt.Fprintln(log, sc.Text())
			continue
		}
		switch e.Action {
		case "output", "build-output":
			io.WriteString(log, e.Output)
		case "build-fail":
			buildErr = e.ImportPath
		case "pass":
			if e.Test != "" {
				o.ran[e.Package+" "+e.Test] = true
			}
		case "fail":
			if e.Test != "" && e.FailedBuild == "" {
				o.failed = append(o.failed, shortPkg(e.Package, r.module)+" "+e.Test)
			}
			switch {
			case o.verdict == caught:
			case e.FailedBuild != "":
				buildErr = e.FailedBuild
			case e.Test != "":
				o.verdict, o.pkg, o.name, o.after = caught, e.Package, e.Test, time.Since(start)
				o.test = shortPkg(e.Package, r.module) + " " + e.Test
				fmt.Fprintf(log, "\n==== first failure after %s: %s\n", o.after.Round(time.Second), o.test)
				if !r.all {
					killGroup(cmd.Process.Pid)
				}
			default:
				// A package failed without naming a test: a panic in
				// TestMain, a timeout, an exit from a test.
				if buildErr == "" {
					o.verdict, o.pkg, o.after = caught, e.Package, time.Since(start)
					o.test = shortPkg(e.Package, r.module) + " (the package, no test named)"
					if !r.all {
						killGroup(cmd.Process.Pid)
					}
				}
			}
		}
	}
	werr := cmd.Wait()
	o.took = time.Since(start)
	o.failed = leaves(o.failed)
	switch {
	case o.verdict == caught:
	case buildErr != "":
		o.verdict, o.detail = buildFails, "build failed: "+buildErr
	case werr != nil:
		o.verdict, o.detail = broken, "go test: "+werr.Error()+" without a failing test (see the log)"
	}
	return o
}

// leaves drops the tests whose failure is only a subtest's: TestX fails
// when TestX/sub does.
func leaves(tests []string) []string {
	var out []string
	for _, t := range tests {
		parent := false
		for _, u := range tests {
			if strings.HasPrefix(u, t+"/") {
				parent = true
				break
			}
		}
		if !parent {
			out = append(out, t)
		}
	}
	return out
}

// killGroup kills the process group of pid (go test and the test binaries
// it started; their own servers die with them by Pdeathsig).
func killGroup(pid int) {
	if pid > 0 {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
}

func shortPkg(importPath, module string) string {
	if r, ok := strings.CutPrefix(importPath, module+"/"); ok {
		return r
	}
	return importPath
}

// exactRun is a -run pattern that matches exactly one test or subtest.
func exactRun(name string) string {
	segs := strings.Split(name, "/")
	for i, s := range segs {
		segs[i] = "^" + regexp.QuoteMeta(s) + "$"
	}
	return strings.Join(segs, "/")
}

// runner holds what every go test run shares.
type runner struct {
	module  string
	env     []string
	flags   []string // extra go test flags (-flags)
	all     bool     // run stages to their end, recording every failing test
	timeout time.Duration

	mu      sync.Mutex
	running int // pid of the go test in progress, for the signal handler
}

func (r *runner) setRunning(pid int) {
	r.mu.Lock()
	r.running = pid
	r.mu.Unlock()
}

// stop kills the run in progress, if any.
func (r *runner) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	killGroup(r.running)
}

// environ is os.Environ with key set to val.
func environ(key, val string) []string {
	env := []string{}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, key+"=") {
			env = append(env, kv)
		}
	}
	return append(env, key+"="+val)
}
