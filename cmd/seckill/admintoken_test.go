package main

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// The admin token reaches the API from SECKILL_ADMIN_TOKEN or
// --token-file without appearing on the command line; --token still
// works but warns, and both flags at once are refused.
func TestTheAdminTokenNeedNotBeOnTheCommandLine(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var auth []string
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
		io.WriteString(w, `[]`)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	var warned bytes.Buffer
	old := adminWarnings
	adminWarnings = &warned
	t.Cleanup(func() { adminWarnings = old })
	admin := func(args ...string) error {
		var out bytes.Buffer
		return runAdmin(append([]string{"--addr", "http://" + ln.Addr().String(), "--json"}, append(args, "activities")...), &out)
	}
	lastAuth := func() string {
		mu.Lock()
		defer mu.Unlock()
		if len(auth) == 0 {
			return ""
		}
		return auth[len(auth)-1]
	}

	t.Setenv("SECKILL_ADMIN_TOKEN", "from-the-environment")
	if err := admin(); err != nil || lastAuth() != "Bearer from-the-environment" || warned.Len() != 0 {
		t.Fatalf("from the environment: %v, sent %q, warned %q", err, lastAuth(), warned.String())
	}
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("from-the-file\nignored second line\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := admin("--token-file", file); err != nil || lastAuth() != "Bearer from-the-file" || warned.Len() != 0 {
		t.Fatalf("--token-file: %v, sent %q, warned %q", err, lastAuth(), warned.String())
	}
	if err := admin("--token", "on-the-command-line"); err != nil || lastAuth() != "Bearer on-the-command-line" {
		t.Fatalf("--token: %v, sent %q", err, lastAuth())
	}
	if !strings.Contains(warned.String(), "--token is visible") {
		t.Fatalf("--token gave no warning: %q", warned.String())
	}
	n := len(auth)
	for _, bad := range [][]string{
		{"--token", "a", "--token-file", file},
		{"--token-file", filepath.Join(t.TempDir(), "missing")},
		{"--token-file", os.DevNull},
	} {
		if err := admin(bad...); err == nil {
			t.Errorf("%v: no error", bad)
		}
	}
	if len(auth) != n {
		t.Fatalf("a refused token setting still called the API")
	}
}
