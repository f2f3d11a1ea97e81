package muster

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeExamples builds every Go block of README.md as a user would:
// in a module of its own that requires this SDK, outside this one, and
// runs it against a real broker. A block that is a whole program runs as
// it is; a block of functions runs beside a driver that calls them. Each
// must print what the README says it does, so a README that drifts from
// the SDK fails here.
func TestReadmeExamples(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```go\n(.*?)```\n").FindAllSubmatch(readme, -1)
	if len(blocks) != len(readmeRuns) {
		t.Fatalf("README.md has %d Go blocks, this test knows how to run %d: add the new block's check", len(blocks), len(readmeRuns))
	}
	sdk, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile("go.sum")
	if err != nil {
		t.Fatal(err)
	}
	b := mustStartBroker(t)
	for i, m := range blocks {
		block, run := string(m[1]), readmeRuns[i]
		t.Run(run.name, func(t *testing.T) {
			dir := t.TempDir()
			src := block
			if !strings.HasPrefix(block, "package main") {
				src = run.driver + "\n" + block
			}
			mod := "module readme\n\ngo 1.26\n\nrequire github.com/musterhq/muster/clients/go v0.0.0\n\n" +
				"replace github.com/musterhq/muster/clients/go => " + sdk + "\n"
			for name, data := range map[string][]byte{"go.mod": []byte(mod), "go.sum": sum, "main.go": []byte(src)} {
				if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			cmd := exec.Command("go", "run", "-mod=mod", ".")
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "MUSTER_ADDR="+b.url(), "MUSTER_TOKEN="+tokA.Secret)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("the README's block %d does not run: %v\n%s", i+1, err, out)
			}
			for _, want := range run.prints {
				if !strings.Contains(string(out), want) {
					t.Fatalf("block %d printed %q, want it to say %q", i+1, out, want)
				}
			}
		})
	}
}

// readmeRuns says, block by block, how README.md's Go blocks run and what
// each prints.
var readmeRuns = []struct {
	name   string
	driver string // for a block of functions: the program that calls them
	prints []string
}{
	{name: "first", prints: []string{"rendering doc-123 with fencing token ", "renderers held now: 0"}},
	{name: "batches", driver: `package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	muster "github.com/musterhq/muster/clients/go"
)

func main() {
	ctx := context.Background()
	c, err := muster.New(os.Getenv("MUSTER_ADDR"), muster.WithToken(os.Getenv("MUSTER_TOKEN")))
	if err != nil {
		log.Fatal(err)
	}
	s, err := c.NewSession(ctx, "driver", 30*time.Second)
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close(ctx)
	leases, err := takeShare(ctx, s, []string{"lease://acme/share/a", "lease://acme/share/b", "lease://acme/share/c"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("took", len(leases), "of 3")
}`, prints: []string{"took 3 of 3"}},
}
