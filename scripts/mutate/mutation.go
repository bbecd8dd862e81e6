package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// mutation is one planted bug: a patch file scripts/mutations/NAME.patch
// whose header (the lines before the first "diff --git", which git apply
// ignores) says what the bug is and which tests must catch it:
//
//	bug: one line saying what the patch breaks
//	quick: ./pkg/ [./other/] [-run=REGEX]
//	wide: ./pkg/ [-run=REGEX]        (any number, tried in order)
//
// quick is the targeted set (the package's own tests), run first; each wide
// stage runs only while the mutation has survived every stage before it.
type mutation struct {
	name   string
	path   string
	bug    string
	stages []stage
}

// stage is one go test invocation.
type stage struct {
	label string   // quick or wide
	pkgs  []string // package patterns, relative to the module root
	run   string   // -run pattern; "" runs every test of pkgs
}

func (s stage) String() string {
	str := strings.Join(s.pkgs, " ")
	if s.run != "" {
		str += " -run '" + s.run + "'"
	}
	return str
}

// loadMutations reads every *.patch of dir, sorted by name, keeping those
// whose name matches sel.
func loadMutations(dir string, sel *regexp.Regexp) ([]mutation, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.patch"))
	if err != nil {
		return nil, err
	}
	sort.Strings(paths)
	var ms []mutation
	for _, p := range paths {
		m, err := parseMutation(p)
		if err != nil {
			return nil, err
		}
		if sel == nil || sel.MatchString(m.name) {
			ms = append(ms, m)
		}
	}
	if len(ms) == 0 {
		return nil, fmt.Errorf("no mutation in %s matches", dir)
	}
	return ms, nil
}

func parseMutation(path string) (mutation, error) {
	m := mutation{name: strings.TrimSuffix(filepath.Base(path), ".patch"), path: path}
	f, err := os.Open(path)
	if err != nil {
		return m, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	diffs := false
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "diff --git ") {
			diffs = true
			break
		}
		key, val, ok := strings.Cut(line, ":")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		val = strings.TrimSpace(val)
		switch key {
		case "bug":
			m.bug = val
		case "quick", "wide":
			st := stage{label: key}
			for _, f := range strings.Fields(val) {
				if r, ok := strings.CutPrefix(f, "-run="); ok {
					st.run = r
				} else {
					st.pkgs = append(st.pkgs, f)
				}
			}
			if len(st.pkgs) == 0 {
				return m, fmt.Errorf("%s: %s: names no package", path, key)
			}
			if key == "quick" && len(m.stages) > 0 {
				return m, fmt.Errorf("%s: quick must be the first stage, and only one", path)
			}
			m.stages = append(m.stages, st)
		}
	}
	if err := sc.Err(); err != nil {
		return m, err
	}
	switch {
	case !diffs:
		return m, fmt.Errorf("%s: no diff", path)
	case m.bug == "":
		return m, fmt.Errorf("%s: no bug: line", path)
	case len(m.stages) == 0 || m.stages[0].label != "quick":
		return m, fmt.Errorf("%s: no quick: line", path)
	}
	return m, nil
}
