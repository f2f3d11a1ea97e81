// Package layering holds the layering guard: tests that fail when a package
// imports (directly or through its dependencies) what the architecture says
// it must not. They read the real import graph with `go list -deps`.
package layering

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/musterhq/muster"

// server lists the broker's packages that no client module and no lower layer
// may depend on (each with its subpackages).
var server = []string{module + "/core", module + "/handlers", module + "/sse", module + "/fleetstore", module + "/api"}

// knownViolations are imports the rules forbid that are still in the code,
// each to be removed by the named work ("layer -> package": "work"). An
// entry that no longer occurs fails too, so the list only shrinks. It is
// empty: every rule holds.
var knownViolations = map[string]string{}

// root is the root module's directory (tests/layering is two levels down).
func root(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		t.Fatalf("no go.mod at the module root: %v", err)
	}
	return dir
}

// deps returns every package the patterns depend on, themselves included
// (non-test builds), as `go list -deps` run in dir reports them.
func deps(t *testing.T, dir string, patterns ...string) []string {
	t.Helper()
	args := append([]string{"list", "-deps", "-f", "{{.ImportPath}}"}, patterns...)
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go %s in %s: %v\n%s", strings.Join(args, " "), dir, err, stderr.String())
	}
	list := strings.Fields(string(out))
	if len(list) == 0 {
		t.Fatalf("go %s listed nothing", strings.Join(args, " "))
	}
	return list
}

// under reports whether pkg is prefix or one of its subpackages.
func under(pkg, prefix string) bool {
	return pkg == prefix || strings.HasPrefix(pkg, prefix+"/")
}

// forbidden returns the packages of list that fall under one of the prefixes,
// leaving out the layer itself (self) and its subpackages.
func forbidden(list []string, self string, prefixes ...string) []string {
	var bad []string
	for _, p := range list {
		if self != "" && under(p, self) {
			continue
		}
		if slices.ContainsFunc(prefixes, func(pre string) bool { return under(p, pre) }) {
			bad = append(bad, p)
		}
	}
	return bad
}

// check fails for every forbidden dependency of layer that is not a known
// violation, and for every known violation of layer that no longer occurs.
func check(t *testing.T, layer string, bad []string) {
	t.Helper()
	seen := map[string]bool{}
	for _, p := range bad {
		key := layer + " -> " + p
		if _, ok := knownViolations[key]; ok {
			seen[key] = true
			continue
		}
		t.Errorf("%s depends on %s, which the layering forbids (docs/architecture.md)", layer, p)
	}
	for key, why := range knownViolations {
		if strings.HasPrefix(key, layer+" -> ") && !seen[key] {
			t.Errorf("known violation %q (%s) no longer occurs: remove it from knownViolations", key, why)
		}
	}
}

// TestCoreLayer: the core is the synchronous state machine; it knows nothing
// of HTTP, the edge packages, the store or the generated wire types.
func TestCoreLayer(t *testing.T) {
	list := deps(t, root(t), "./core/...")
	check(t, "core", forbidden(list, module+"/core",
		"net/http", module+"/handlers", module+"/sse", module+"/fleetstore", module+"/api"))
}

// TestRootPackage: the root package muster is the shared vocabulary every
// layer imports, so it imports no package of this module and nothing
// outside the standard library.
func TestRootPackage(t *testing.T) {
	list := deps(t, root(t), ".")
	var bad []string
	for _, p := range list {
		if p != module && strings.Contains(strings.SplitN(p, "/", 2)[0], ".") {
			bad = append(bad, p)
		}
	}
	check(t, "muster", bad)
}

// TestSSELayer: sse is a leaf: it imports no package of this module.
func TestSSELayer(t *testing.T) {
	list := deps(t, root(t), "./sse/...")
	check(t, "sse", forbidden(list, module+"/sse", module))
}

// TestFleetstoreLayer: the store depends on no other server package; it
// speaks the shared vocabulary of the root package only.
func TestFleetstoreLayer(t *testing.T) {
	list := deps(t, root(t), "./fleetstore/...")
	check(t, "fleetstore", forbidden(list, module+"/fleetstore", server...))
}

// TestClientModules: every Go module under clients/ builds without the
// server's packages, the root package muster included.
func TestClientModules(t *testing.T) {
	mods, err := filepath.Glob(filepath.Join(root(t), "clients", "*", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	more, err := filepath.Glob(filepath.Join(root(t), "clients", "*", "*", "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	mods = append(mods, more...)
	if len(mods) == 0 {
		t.Fatal("found no Go module under clients/")
	}
	for _, m := range mods {
		dir := filepath.Dir(m)
		name, _ := filepath.Rel(root(t), dir)
		t.Run(filepath.ToSlash(name), func(t *testing.T) {
			list := deps(t, dir, "./...")
			bad := forbidden(list, "", server...)
			// The root package is the server's vocabulary too; only it,
			// not the module path's other packages (clients/go is one).
			if slices.Contains(list, module) {
				bad = append(bad, module)
			}
			check(t, filepath.ToSlash(name), bad)
		})
	}
}
