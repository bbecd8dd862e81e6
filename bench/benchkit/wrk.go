package benchkit

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Load is one wrk run.
type Load struct {
	Threads, Conns int
	Dur            time.Duration
	Timeout        time.Duration
	Script         string
	URL            string
	Args           []string
}

// WrkResult is what a bench tool reads from wrk's report.
type WrkResult struct {
	Requests int64
	RPS      float64
	P50, P99 time.Duration
	Codes    map[string]int64 // from the script's "codes" line
	SockErrs [4]int64         // connect, read, write, timeout
	Raw      string
}

func (r WrkResult) SockErrors() int64 {
	return r.SockErrs[0] + r.SockErrs[1] + r.SockErrs[2] + r.SockErrs[3]
}

var (
	reRPS    = regexp.MustCompile(`Requests/sec:\s+([\d.]+)`)
	reReqs   = regexp.MustCompile(`(\d+) requests in`)
	reLat    = regexp.MustCompile(`(?m)^\s+(50|99)%\s+([\d.]+)(us|ms|s|m)\s*$`)
	reSock   = regexp.MustCompile(`Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)`)
	reCodes  = regexp.MustCompile(`(?m)^codes (.*)$`)
	unitDurs = map[string]time.Duration{"us": time.Microsecond, "ms": time.Millisecond, "s": time.Second, "m": time.Minute}
)

// RunWrk runs wrk and parses its report; the raw report is kept in
// dir/name.wrk.txt.
func RunWrk(dir, name string, l Load) (WrkResult, error) {
	args := []string{"-t" + strconv.Itoa(l.Threads), "-c" + strconv.Itoa(l.Conns),
		"-d" + wrkDuration(l.Dur), "--latency", "--timeout", wrkDuration(l.Timeout), "-s", l.Script, l.URL}
	if len(l.Args) > 0 {
		args = append(append(args, "--"), l.Args...)
	}
	out, err := exec.Command("wrk", args...).CombinedOutput()
	raw := "wrk " + strings.Join(args, " ") + "\n" + string(out)
	_ = os.WriteFile(filepath.Join(dir, name+".wrk.txt"), []byte(raw), 0o644)
	if err != nil {
		return WrkResult{Raw: raw}, fmt.Errorf("wrk %s: %v\n%s", name, err, out)
	}
	return ParseWrk(raw)
}

// ParseWrk reads wrk's report (and the script's "codes" line).
func ParseWrk(raw string) (WrkResult, error) {
	r := WrkResult{Raw: raw, Codes: map[string]int64{}}
	m := reRPS.FindStringSubmatch(raw)
	if m == nil {
		return r, fmt.Errorf("no Requests/sec in wrk output:\n%s", raw)
	}
	r.RPS, _ = strconv.ParseFloat(m[1], 64)
	if m = reReqs.FindStringSubmatch(raw); m != nil {
		r.Requests, _ = strconv.ParseInt(m[1], 10, 64)
	}
	for _, m := range reLat.FindAllStringSubmatch(raw, -1) {
		v, _ := strconv.ParseFloat(m[2], 64)
		d := time.Duration(v * float64(unitDurs[m[3]]))
		if m[1] == "50" {
			r.P50 = d
		} else {
			r.P99 = d
		}
	}
	if m = reSock.FindStringSubmatch(raw); m != nil {
		for i := range 4 {
			r.SockErrs[i], _ = strconv.ParseInt(m[i+1], 10, 64)
		}
	}
	if m = reCodes.FindStringSubmatch(raw); m != nil {
		for _, kv := range strings.Fields(m[1]) {
			k, v, _ := strings.Cut(kv, "=")
			r.Codes[k], _ = strconv.ParseInt(v, 10, 64)
		}
	}
	return r, nil
}

// CodesString is the non-zero codes, e.g. "200=1234 410=5".
func (r WrkResult) CodesString() string {
	var parts []string
	for _, k := range []string{"200", "403", "404", "409", "410", "429", "503", "other"} {
		if v := r.Codes[k]; v > 0 {
			parts = append(parts, k+"="+strconv.FormatInt(v, 10))
		}
	}
	if e := r.SockErrors(); e > 0 {
		parts = append(parts, fmt.Sprintf("sockerr=%d/%d/%d/%d", r.SockErrs[0], r.SockErrs[1], r.SockErrs[2], r.SockErrs[3]))
	}
	return strings.Join(parts, " ")
}

// Unanswered is how many requests accept.lua built whose answer wrk did not
// count (in flight when the run ended, or lost to a socket error): the
// server may have served them, so each may have become an order.
func (r WrkResult) Unanswered() int64 {
	sent, ok := r.Codes["sent"]
	if !ok {
		return 0
	}
	var answered int64
	for k, v := range r.Codes {
		if k != "sent" {
			answered += v
		}
	}
	return max(sent-answered, 0)
}

// wrkDuration writes d as wrk reads it: whole seconds ("60s"; wrk refuses
// Go's "1m0s"), at least 1.
func wrkDuration(d time.Duration) string {
	return strconv.Itoa(max(1, int(d.Round(time.Second)/time.Second))) + "s"
}
