// Package seckill holds no code: this test at the module root enforces the
// layout's import rules (README, "Layout") on the import graph go list
// reports, tests included.
package seckill

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// module is the module path every project import starts with.
const module = "seckill"

// pkg is one package as go list -json reports it.
type pkg struct {
	ImportPath   string
	Imports      []string // the package's own files
	TestImports  []string // its _test.go files in the same package
	XTestImports []string // its _test.go files of package x_test
}

// parts are the top-level directories that hold parts (the sale's
// vocabulary, the ledger, the request path, the capabilities, the wiring,
// the bench and the e2e suites): everything that is not a leaf under
// internal/ (which knows no sale) and not lua.
var parts = []string{"sale", "catalog", "blocklist", "routeswitch", "edge", "engine", "stock", "consumer", "admin", "reconcile", "payment",
	"monitor", "web", "store", "reqlog", "cmd", "bench", "e2e"}

// wiringImportedBy lists the packages outside cmd/seckill that may still
// import its wiring packages (app, config). e2e/chaos's harness marshals
// config.Default into the processes' YAML; the binary should print its
// default config instead (a follow-up in e2e/chaos, which is being reworked).
var wiringImportedBy = map[string]bool{"e2e/chaos": true}

// rel is an import path relative to the module ("" for a path outside it).
func rel(path string) (string, bool) {
	if path == module {
		return "", true
	}
	r, ok := strings.CutPrefix(path, module+"/")
	return r, ok
}

// top is the first element of a module-relative path.
func top(r string) string {
	t, _, _ := strings.Cut(r, "/")
	return t
}

func under(r, dir string) bool { return r == dir || strings.HasPrefix(r, dir+"/") }

func isPart(r string) bool { return slices.Contains(parts, top(r)) }

// rule names the rule one import breaks (the most specific one where it
// breaks several), or "" when it is allowed. test says the import is in a
// _test.go file.
func rule(from, to string, test bool) string {
	switch {
	case from == to:
		// An x_test package importing the package it tests.
		return ""
	case under(from, "internal"):
		if isPart(to) {
			return "packages under internal/ import no part"
		}
	case from == "lua":
		return "lua imports no project package"
	}
	if under(from, "stock") && (to == "edge" || to == "engine" || to == "consumer") {
		return "stock imports neither edge, engine nor consumer"
	}
	if to == "engine" && !(under(from, "cmd") || from == "edge" || under(from, "bench")) {
		return "only cmd/..., edge and bench/... import engine"
	}
	if from == "edge" && to == "stock" && !test {
		// The engine exports the outcomes the edge classifies; the edge's
		// tests may still set up a ledger.
		return "the edge imports the engine, not the ledger"
	}
	if from == "edge" && to == "consumer" || from == "consumer" && to == "edge" {
		return "edge and consumer never import each other"
	}
	if from == "edge" && under(to, "web") {
		return "edge never imports web (web answers through edge's table)"
	}
	if (to == "cmd/seckill/app" || to == "cmd/seckill/config") && !under(from, "cmd/seckill") && !wiringImportedBy[from] {
		return "only cmd/seckill imports its wiring (app, config)"
	}
	return ""
}

// violations checks every import of every package, its tests' included,
// and returns one line per broken rule: "internal/foo imports
// seckill/engine (test): packages under internal/ import no part".
func violations(pkgs []pkg) []string {
	var out []string
	for _, p := range pkgs {
		from, ok := rel(p.ImportPath)
		if !ok {
			continue
		}
		for _, kind := range []struct {
			name    string
			imports []string
		}{{"", p.Imports}, {" (test)", p.TestImports}, {" (x_test)", p.XTestImports}} {
			for _, imp := range kind.imports {
				to, ok := rel(imp)
				if !ok {
					continue
				}
				if why := rule(from, to, kind.name != ""); why != "" {
					out = append(out, from+" imports "+imp+kind.name+": "+why)
				}
			}
		}
	}
	return out
}

func TestImportRules(t *testing.T) {
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports,TestImports,XTestImports", "./...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(b))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	seen := map[string]bool{}
	for _, p := range pkgs {
		seen[p.ImportPath] = true
	}
	// The rules must see the packages they are about, or they hold vacuously.
	for _, want := range []string{"seckill/sale", "seckill/engine", "seckill/stock", "seckill/edge",
		"seckill/consumer", "seckill/lua", "seckill/cmd/seckill/app"} {
		if !seen[want] {
			t.Fatalf("go list did not report %s (%d packages)", want, len(pkgs))
		}
	}
	for _, v := range violations(pkgs) {
		t.Error(v)
	}
}

// TestImportRulesFail feeds the checker import graphs that break each rule.
func TestImportRulesFail(t *testing.T) {
	for _, tc := range []struct {
		name string
		pkg  pkg
		want []string
	}{
		{"a leaf under internal imports a part", pkg{ImportPath: "seckill/internal/foo", Imports: []string{"fmt", "seckill/internal/obs", "seckill/engine"}},
			[]string{"internal/foo imports seckill/engine: packages under internal/ import no part"}},
		{"a leaf's test imports a part", pkg{ImportPath: "seckill/internal/foo", TestImports: []string{"seckill/stock/stocktest"}},
			[]string{"internal/foo imports seckill/stock/stocktest (test): packages under internal/ import no part"}},
		{"a capability imports the engine", pkg{ImportPath: "seckill/reconcile", Imports: []string{"seckill/stock", "seckill/engine"}},
			[]string{"reconcile imports seckill/engine: only cmd/..., edge and bench/... import engine"}},
		{"the consumer imports the edge", pkg{ImportPath: "seckill/consumer", XTestImports: []string{"seckill/edge"}},
			[]string{"consumer imports seckill/edge (x_test): edge and consumer never import each other"}},
		{"the edge imports the consumer", pkg{ImportPath: "seckill/edge", Imports: []string{"seckill/consumer"}},
			[]string{"edge imports seckill/consumer: edge and consumer never import each other"}},
		{"the edge imports web", pkg{ImportPath: "seckill/edge", TestImports: []string{"seckill/web"}},
			[]string{"edge imports seckill/web (test): edge never imports web (web answers through edge's table)"}},
		{"the ledger imports the engine", pkg{ImportPath: "seckill/stock", TestImports: []string{"seckill/engine"}},
			[]string{"stock imports seckill/engine (test): stock imports neither edge, engine nor consumer"}},
		{"the ledger's helper imports the edge", pkg{ImportPath: "seckill/stock/stocktest", Imports: []string{"seckill/edge"}},
			[]string{"stock/stocktest imports seckill/edge: stock imports neither edge, engine nor consumer"}},
		{"lua imports a project package", pkg{ImportPath: "seckill/lua", Imports: []string{"embed", "seckill/sale"}},
			[]string{"lua imports seckill/sale: lua imports no project package"}},
		{"a part imports the wiring", pkg{ImportPath: "seckill/admin", Imports: []string{"seckill/cmd/seckill/config"}},
			[]string{"admin imports seckill/cmd/seckill/config: only cmd/seckill imports its wiring (app, config)"}},
		{"the edge imports the ledger", pkg{ImportPath: "seckill/edge", Imports: []string{"seckill/engine", "seckill/stock"}},
			[]string{"edge imports seckill/stock: the edge imports the engine, not the ledger"}},
		{"the layout as it should be", pkg{ImportPath: "seckill/edge", Imports: []string{"seckill/engine", "seckill/sale"}, TestImports: []string{"seckill/stock"}}, nil},
		{"the binary imports everything", pkg{ImportPath: "seckill/cmd/seckill", Imports: []string{"seckill/engine", "seckill/cmd/seckill/app", "seckill/cmd/seckill/config"}}, nil},
		{"the ledger's tests use its helper", pkg{ImportPath: "seckill/stock", XTestImports: []string{"seckill/stock", "seckill/stock/stocktest"}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := violations([]pkg{tc.pkg})
			if !slices.Equal(got, tc.want) {
				t.Fatalf("violations:\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}
