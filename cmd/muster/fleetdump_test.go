package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/musterhq/muster/tests/pgtest"
)

// TestExportImportCommands moves a desired set with the commands an
// operator types: registered through a broker on bbolt, exported with the
// broker stopped, imported into PostgreSQL (URL in a --store-file), exported
// from there and imported into a new bbolt data directory. The dumps are
// identical, and brokers on PostgreSQL and on the new directory serve the
// same listing and continue the counters.
func TestExportImportCommands(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	m := startBroker(t, src, "")
	c := mustClient(t, m)
	ctx := context.Background()
	for i, spec := range []string{`{"a":1}`, " {\"pretty\" : true}\n", `[]`, `"x"`} {
		_, err := c.Fleet("monitors").Register(ctx, []string{"repo", "reminder"}[i%2], json.RawMessage(spec))
		must(t, err)
	}
	gone, err := c.Fleet("monitors").Register(ctx, "repo", json.RawMessage(`0`))
	must(t, err)
	must(t, c.Fleet("monitors").Forget(ctx, gone.Name))
	_, err = c.Fleet("monitors/inst-7").Register(ctx, "repo", json.RawMessage(`{}`))
	must(t, err)
	want := desired(t, c, "monitors")

	// The running broker holds the store: export refuses, naming it.
	if code, _, errOut := cli("fleet", "export", "--data-dir", src); code != 1 || !strings.Contains(errOut, "in use") {
		t.Fatalf("export beside a running broker: exit %d, %q", code, errOut)
	}
	stopBroker(t, m)
	code, d1, errOut := cli("fleet", "export", "--data-dir", src)
	if code != 0 || strings.Count(d1, "\n") != 2+5 {
		t.Fatalf("export: exit %d, %q\n%s", code, errOut, d1)
	}
	dumpFile := filepath.Join(dir, "dump.jsonl")
	must(t, os.WriteFile(dumpFile, []byte(d1), 0o600))

	pgURL := pgtest.Schema(t, "cli")
	storeFile := filepath.Join(dir, "store-url")
	must(t, os.WriteFile(storeFile, []byte(pgURL+"\n"), 0o600))
	code, out, errOut := cli("fleet", "import", "--store-file", storeFile, dumpFile)
	if code != 0 || out != "added 5, unchanged 0, refused 0, counters 2\n" {
		t.Fatalf("import into PostgreSQL: exit %d, %q, %q", code, out, errOut)
	}
	code, out, _ = cli("fleet", "import", "--store-file", storeFile, dumpFile)
	if code != 0 || out != "added 0, unchanged 5, refused 0, counters 2\n" {
		t.Fatalf("second import: exit %d, %q", code, out)
	}
	d2File := filepath.Join(dir, "d2.jsonl")
	code, _, errOut = cli("fleet", "export", "--store-file", storeFile, "--to", d2File)
	d2b, _ := os.ReadFile(d2File)
	if d2 := string(d2b); code != 0 || d2 != d1 {
		t.Fatalf("export from PostgreSQL: exit %d, %q\n%s\nwant\n%s", code, errOut, d2, d1)
	}

	dst := filepath.Join(dir, "dst")
	if code, out, errOut := cli("fleet", "import", "--data-dir", dst, d2File); code != 0 {
		t.Fatalf("import into bbolt: exit %d, %q, %q", code, out, errOut)
	}
	if code, d3, _ := cli("fleet", "export", "--data-dir", dst); code != 0 || d3 != d1 {
		t.Fatalf("export of the round trip: exit %d\n%s\nwant\n%s", code, d3, d1)
	}
	for name, b := range map[string][2]string{"postgres": {dir + "/pgdata", pgURL}, "bolt": {dst, ""}} {
		m := startBroker(t, b[0], b[1])
		c := mustClient(t, m)
		if got := desired(t, c, "monitors"); len(got) != len(want) || got["repo-1"] != want["repo-1"] || got["reminder-2"] != want["reminder-2"] {
			t.Errorf("%s serves %v, want %v", name, got, want)
		}
		s, err := c.Fleet("monitors").Register(ctx, "repo", json.RawMessage(`{}`))
		must(t, err)
		if s.Name != "repo-6" { // repo-5 was forgotten before the export: never minted again
			t.Errorf("%s: register after the import = %s, want repo-6", name, s.Name)
		}
		stopBroker(t, m)
	}

	// A refused line is reported by number, the rest applied, exit 1.
	bad := d1 + "not json\n" + `{"family":"default","root":"monitors","name":"repo-1","kind":"repo","spec":"other"}` + "\n"
	must(t, os.WriteFile(dumpFile, []byte(bad), 0o600))
	code, out, errOut = cli("fleet", "import", "--data-dir", dst, dumpFile)
	if code != 1 || !strings.Contains(errOut, "refused line 8:") || !strings.Contains(errOut, "refused line 9: the name is stored with a different spec") ||
		!strings.Contains(out, "refused 2") {
		t.Fatalf("import with refused lines: exit %d, %q, %q", code, out, errOut)
	}
	if code, _, errOut := cli("fleet", "export", "--data-dir", filepath.Join(dir, "none")); code != 1 || !strings.Contains(errOut, "no fleet store") {
		t.Fatalf("export of a missing store: exit %d, %q", code, errOut)
	}
}
