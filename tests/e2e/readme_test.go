package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// readmeTourHeading starts the section of README.md that TestReadmeTour
// executes; the section ends at the next "## " heading.
const readmeTourHeading = "## A tour with curl"

// readmeAddr is the address the README's commands talk to; the test points
// them at its own broker.
const readmeAddr = "localhost:7420"

// TestReadmeTour runs the curl tour of README.md, in order, with the real
// curl (through sh) against a real broker on a free port (dev mode, manual
// clock), so the README cannot rot. In the tour section:
//
//   - a ```sh block holds commands; the output of a command is written on the
//     `# → ` line under it and compared as in docs/fleets.md (byte for byte, or
//     as JSON with ids, epochs, times and revisions compared by presence);
//   - `NAME=value` keeps a value of the previous answer: the test takes the
//     real one from the JSON field `name` of the real output (and checks that
//     the README's value is the one its own shown output has);
//   - the one `curl -N …` command is the watch of another terminal: it runs in
//     the background, and each ```text block is what that terminal shows next,
//     event by event (`: keepalive` comments ignored; `data:` compared like an
//     output, every other line byte for byte). After the last block the
//     stream must stay quiet.
func TestReadmeTour(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Fatal("README.md's tour runs the real curl, and curl is not installed (Debian: apt-get install curl)")
	}
	if _, err := exec.LookPath("sh"); err != nil {
		t.Fatal("README.md's tour runs its commands with sh, and sh is not on PATH")
	}
	text, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	checkReadmeCommands(t, string(text))
	_, section, ok := strings.Cut(string(text), "\n"+readmeTourHeading+"\n")
	if !ok {
		t.Fatalf("README.md has no %q section", readmeTourHeading)
	}
	if i := strings.Index(section, "\n## "); i >= 0 {
		section = section[:i]
	}

	checkReadingPace(t, section)

	b := MustStartBroker(t)
	tour := &readmeTour{t: t, b: b, curl: curl, addr: strings.TrimPrefix(b.URL(), "http://"),
		home: t.TempDir(), vars: map[string]string{}}
	for _, block := range mdBlocks(section) {
		switch block.info {
		case "sh":
			tour.runBlock(block.body)
		case "text":
			tour.expectFrames(block.body)
		default:
			t.Fatalf("README.md: a ```%s block in the tour: only sh and text blocks are executed", block.info)
		}
	}
	if tour.stream == nil {
		t.Fatal("README.md: the tour has no `curl -N` watch")
	}
	tour.stream.quiet(t, 300*time.Millisecond)
	if tour.checked < 7 || tour.frames < 5 {
		t.Fatalf("only %d outputs and %d stream events were checked", tour.checked, tour.frames)
	}
	t.Logf("ran %d commands, checked %d outputs and %d stream events", tour.ran, tour.checked, tour.frames)
}

// readingPaceTTL is the shortest TTL the tour may use: the test runs on a
// manual clock, a reader at reading speed does not, and a tour whose lease
// runs out while its reader reads shows an empty list and a 404.
const readingPaceTTL = 5 * time.Minute

// checkReadingPace checks that every ttl_ms the tour sends survives a
// reading pace, that it shows the keepalive, and that it says what happens
// when a TTL runs out.
func checkReadingPace(t *testing.T, section string) {
	t.Helper()
	ttls := regexp.MustCompile(`"ttl_ms":(\d+)`).FindAllStringSubmatch(section, -1)
	if len(ttls) == 0 {
		t.Fatal("README.md: the tour sends no ttl_ms")
	}
	for _, m := range ttls {
		ms, _ := strconv.Atoi(m[1])
		if time.Duration(ms)*time.Millisecond < readingPaceTTL {
			t.Errorf("README.md: the tour uses ttl_ms %s, which runs out before a reader is done; use at least %v", m[1], readingPaceTTL)
		}
	}
	if !strings.Contains(section, "/keepalive") {
		t.Error("README.md: the tour does not show the session keepalive")
	}
	if !strings.Contains(section, "When a TTL runs out") {
		t.Error("README.md: the tour does not say what happens when a TTL runs out")
	}
}

// checkReadmeCommands checks that the README starts with the two commands
// and that the Makefile has them.
func checkReadmeCommands(t *testing.T, readme string) {
	t.Helper()
	blocks := mdBlocks(readme)
	if len(blocks) == 0 || blocks[0].info != "sh" ||
		!strings.HasPrefix(blocks[0].body, "make run") || !strings.Contains(blocks[0].body, "\nmake test") {
		t.Fatal("README.md: the first code block must be `make run` and `make test`")
	}
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	for _, target := range []string{"run", "test"} {
		if !regexp.MustCompile(`(?m)^` + target + `:`).Match(mk) {
			t.Errorf("Makefile has no %q target, which README.md tells readers to use", target)
		}
	}
}

type readmeTour struct {
	t      *testing.T
	b      *Broker
	curl   string
	addr   string // host:port of the test broker
	home   string // HOME and CURL_HOME of the commands: no ~/.curlrc
	vars   map[string]string
	stream *readmeStream

	output  string // of the last command
	shown   string // the README's `# → ` line for it, if any
	ran     int
	checked int
	frames  int
}

var readmeAssignRe = regexp.MustCompile(`^([A-Z][A-Z0-9_]*)=(\S+)(\s+#.*)?$`)

func (tr *readmeTour) runBlock(block string) {
	tr.t.Helper()
	for _, st := range docSteps(block) {
		if st.out {
			tr.expect(st.want)
			continue
		}
		tr.ran++
		cmd := strings.TrimSpace(st.cmd)
		if m := readmeAssignRe.FindStringSubmatch(cmd); m != nil {
			tr.keep(m[1], m[2])
			continue
		}
		if !strings.Contains(cmd, readmeAddr) {
			tr.t.Fatalf("README.md: %q does not talk to %s", cmd, readmeAddr)
		}
		cmd = strings.ReplaceAll(cmd, readmeAddr, tr.addr)
		if regexp.MustCompile(`^curl .*-N\b`).MatchString(cmd) {
			if tr.stream != nil {
				tr.t.Fatal("README.md: the tour opens a second watch")
			}
			tr.stream = tr.startStream(cmd)
			tr.output, tr.shown = "", ""
			continue
		}
		tr.output, tr.shown = tr.sh(cmd), ""
	}
}

// expect compares the last command's output with the README's line.
func (tr *readmeTour) expect(want string) {
	tr.t.Helper()
	tr.checked++
	tr.shown = want
	if got := strings.TrimRight(tr.output, "\n"); !docOutputMatches(want, got) {
		tr.t.Fatalf("README.md: output differs\n  README: %s\n  got:    %s", want, got)
	}
}

// keep sets NAME from the field `name` of the last real output, after
// checking that the README's value is the field of its own shown output.
func (tr *readmeTour) keep(name, readmeValue string) {
	tr.t.Helper()
	field := strings.ToLower(name)
	shown, ok := jsonField(tr.shown, field)
	if !ok || shown != readmeValue {
		tr.t.Fatalf("README.md: %s=%s, but the output shown above has %s %q", name, readmeValue, field, shown)
	}
	got, ok := jsonField(tr.output, field)
	if !ok {
		tr.t.Fatalf("README.md: %s: no field %q in the output %s", name, field, tr.output)
	}
	tr.vars[name] = got
}

// jsonField returns a top-level field of a JSON object as the shell would
// see it: a string unquoted, anything else as its JSON text.
func jsonField(doc, field string) (string, bool) {
	var obj map[string]json.RawMessage
	if json.Unmarshal([]byte(doc), &obj) != nil {
		return "", false
	}
	raw, ok := obj[field]
	if !ok {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, true
	}
	return string(raw), true
}

// command builds `sh -c cmd` with the kept variables in its environment and
// no proxy or curl configuration from the machine running the test.
func (tr *readmeTour) command(ctx context.Context, cmd string) *exec.Cmd {
	c := exec.CommandContext(ctx, "sh", "-c", cmd)
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch strings.ToLower(k) {
		case "http_proxy", "https_proxy", "all_proxy", "no_proxy", "home", "curl_home", "xdg_config_home":
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "HOME="+tr.home, "CURL_HOME="+tr.home, "XDG_CONFIG_HOME="+tr.home, "NO_PROXY=*", "no_proxy=*")
	for k, v := range tr.vars {
		env = append(env, k+"="+v)
	}
	c.Env = env
	return c
}

// sh runs one command to its end and returns what it printed.
func (tr *readmeTour) sh(cmd string) string {
	tr.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := tr.command(ctx, cmd)
	var stdout, stderr bytes.Buffer
	c.Stdout, c.Stderr = &stdout, &stderr
	if err := c.Run(); err != nil {
		tr.t.Fatalf("README.md: %s: %v\n%s", cmd, err, stderr.Bytes())
	}
	return stdout.String()
}

// readmeStream is the background `curl -N`: its output, event by event.
type readmeStream struct {
	cmd    string
	frames chan string
	stderr *syncBuffer
}

// startStream starts the watch; the process is killed when the test ends.
func (tr *readmeTour) startStream(cmd string) *readmeStream {
	tr.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	c := tr.command(ctx, "exec "+cmd)
	s := &readmeStream{cmd: cmd, frames: make(chan string, 1024), stderr: &syncBuffer{}}
	c.Stderr = s.stderr
	out, err := c.StdoutPipe()
	if err != nil {
		tr.t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		tr.t.Fatalf("README.md: %s: %v", cmd, err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.read(out)
	}()
	tr.t.Cleanup(func() {
		cancel()
		wg.Wait()
		_ = c.Wait()
	})
	return s
}

// read splits the stream into events (blocks ended by a blank line) and
// drops the blocks that are only comments.
func (s *readmeStream) read(r io.Reader) {
	defer close(s.frames)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	var lines []string
	for sc.Scan() {
		line := sc.Text()
		if line != "" {
			lines = append(lines, line)
			continue
		}
		frame := make([]string, 0, len(lines))
		for _, l := range lines {
			if !strings.HasPrefix(l, ":") {
				frame = append(frame, l)
			}
		}
		lines = lines[:0]
		if len(frame) > 0 {
			s.frames <- strings.Join(frame, "\n")
		}
	}
}

func (s *readmeStream) next(t *testing.T) string {
	t.Helper()
	select {
	case f, ok := <-s.frames:
		if !ok {
			t.Fatalf("README.md: %s ended early\n%s", s.cmd, s.stderr.String())
		}
		return f
	case <-time.After(10 * time.Second):
		t.Fatalf("README.md: %s: no event within 10s", s.cmd)
	}
	return ""
}

func (s *readmeStream) quiet(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case f, ok := <-s.frames:
		if ok {
			t.Fatalf("README.md: the watch shows an event the tour does not:\n%s", f)
		}
		t.Fatalf("README.md: %s ended\n%s", s.cmd, s.stderr.String())
	case <-time.After(d):
	}
}

// expectFrames compares the next events of the watch with a text block.
func (tr *readmeTour) expectFrames(block string) {
	tr.t.Helper()
	if tr.stream == nil {
		tr.t.Fatal("README.md: a text block before the `curl -N` watch")
	}
	for _, want := range strings.Split(strings.TrimSpace(block), "\n\n") {
		got := tr.stream.next(tr.t)
		tr.frames++
		if !frameMatches(want, got) {
			tr.t.Fatalf("README.md: the watch shows something else\n  README:\n%s\n  got:\n%s", want, got)
		}
	}
}

// frameMatches compares one event line by line: data as an output, the
// other fields byte for byte.
func frameMatches(want, got string) bool {
	wl, gl := strings.Split(want, "\n"), strings.Split(got, "\n")
	if len(wl) != len(gl) {
		return false
	}
	for i := range wl {
		w, okw := strings.CutPrefix(wl[i], "data: ")
		g, okg := strings.CutPrefix(gl[i], "data: ")
		switch {
		case okw != okg:
			return false
		case okw && !docOutputMatches(w, g):
			return false
		case !okw && wl[i] != gl[i]:
			return false
		}
	}
	return true
}
