package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestFleetExample runs the worked example of docs/fleets.md: every ```sh
// block, in order, against a real broker (dev mode, manual clock), once per
// fleet store backend, checking each command's output against the `# → `
// line that follows it. The doc cannot rot: a command that no longer works,
// or an answer that changed, fails here.
//
// The blocks may use this subset of sh, and nothing else:
//
//	curl [-sS] [-X METHOD] [-H 'Header: v'] [-d BODY] [-o /dev/null] [-w '%{http_code}\n'] URL [| jq -r .field]
//	NAME=$(curl … | jq -r .field)     capture a top-level field
//	NAME=value                       MUSTER=… is ignored: the test's broker is used
//	echo WORDS                       sleep SECONDS (advances the manual clock)
//	muster serve [flags] [&]         (re)start the broker on the same data (flags ignored)
//	kill …                           stop the broker
//
// with '…' and "…" quoting (adjacent parts join into one word), $NAME
// expansion, \ line continuations and # comments. An expected output that
// must match byte for byte, except a JSON object with a key of docVolatile:
// that is compared as JSON, the volatile values by presence only.
func TestFleetExample(t *testing.T) {
	text, err := os.ReadFile("../../docs/fleets.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := shBlocks(string(text))
	if len(blocks) < 8 {
		t.Fatalf("docs/fleets.md has %d sh blocks; the example needs its steps", len(blocks))
	}
	eachBackend(t, func(t *testing.T, store string) {
		sh := &docShell{t: t, b: MustStartBrokerOn(t, store), vars: map[string]string{}}
		for _, block := range blocks {
			sh.runBlock(block)
		}
		if sh.checked < 15 {
			t.Fatalf("only %d outputs were checked", sh.checked)
		}
		t.Logf("ran %d commands, checked %d outputs", sh.ran, sh.checked)
	})
}

type docShell struct {
	t       *testing.T
	b       *Broker // nil while stopped
	last    *Broker
	vars    map[string]string
	output  string // of the last command, for the next `# → ` line
	ran     int
	checked int
}

// runBlock runs the commands of a block and checks the expected outputs.
func (sh *docShell) runBlock(block string) {
	sh.t.Helper()
	for _, st := range docSteps(block) {
		if st.out {
			sh.expect(st.want)
		} else {
			sh.command(strings.ReplaceAll(st.cmd, "\\\n", " "))
		}
	}
}

func (sh *docShell) expect(want string) {
	sh.t.Helper()
	sh.checked++
	got := strings.TrimRight(sh.output, "\n")
	if !docOutputMatches(want, got) {
		sh.t.Fatalf("docs/fleets.md: output differs\n  doc: %s\n  got: %s", want, got)
	}
}

var (
	captureRe = regexp.MustCompile(`^([A-Z][A-Z0-9_]*)=\$\((.*)\)$`)
	assignRe  = regexp.MustCompile(`^([A-Z][A-Z0-9_]*)=(\S+)$`)
	jqRe      = regexp.MustCompile(`^(.*?)\s*\|\s*jq -r \.([a-z_]+)$`)
)

func (sh *docShell) command(cmd string) {
	sh.t.Helper()
	sh.ran++
	cmd = strings.TrimSpace(cmd)
	if m := captureRe.FindStringSubmatch(cmd); m != nil {
		sh.vars[m[1]] = sh.pipeline(m[2])
		sh.output = ""
		return
	}
	if m := assignRe.FindStringSubmatch(cmd); m != nil {
		if m[1] != "MUSTER" {
			sh.vars[m[1]] = m[2]
		}
		sh.output = ""
		return
	}
	sh.output = sh.pipeline(cmd)
}

// pipeline runs one command, optionally piped into `jq -r .field`.
func (sh *docShell) pipeline(cmd string) string {
	sh.t.Helper()
	field := ""
	if m := jqRe.FindStringSubmatch(cmd); m != nil {
		cmd, field = m[1], m[2]
	}
	words := sh.words(cmd)
	out := sh.run(words)
	if field == "" {
		return out
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(out), &obj); err != nil {
		sh.t.Fatalf("docs/fleets.md: jq .%s of %q: %v", field, out, err)
	}
	raw, ok := obj[field]
	if !ok {
		sh.t.Fatalf("docs/fleets.md: jq .%s: no such field in %s", field, out)
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s + "\n"
	}
	return string(raw) + "\n"
}

func (sh *docShell) run(words []string) string {
	sh.t.Helper()
	if len(words) > 0 && words[len(words)-1] == "&" {
		words = words[:len(words)-1]
	}
	if len(words) == 0 {
		sh.t.Fatal("docs/fleets.md: empty command")
	}
	switch {
	case words[0] == "curl":
		return sh.curl(words[1:])
	case words[0] == "echo":
		return strings.Join(words[1:], " ") + "\n"
	case words[0] == "sleep" && len(words) == 2:
		secs, err := strconv.Atoi(words[1])
		if err != nil || sh.b == nil {
			sh.t.Fatalf("docs/fleets.md: sleep %q", words[1])
		}
		sh.b.Clock.Advance(time.Duration(secs) * time.Second)
		return ""
	case words[0] == "kill":
		if sh.b == nil {
			sh.t.Fatal("docs/fleets.md: kill with no broker running")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := sh.b.Close(ctx); err != nil {
			sh.t.Fatal(err)
		}
		sh.b.closed, sh.last, sh.b = true, sh.b, nil
		return ""
	case len(words) >= 2 && words[0] == "muster" && words[1] == "serve":
		if sh.b == nil {
			sh.b = startBroker(sh.t, brokerOptions{manual: true, dataDir: sh.last.DataDir, storeURL: sh.last.StoreURL})
		}
		return ""
	}
	sh.t.Fatalf("docs/fleets.md: the example test cannot run %q", strings.Join(words, " "))
	return ""
}

// curl sends one request through the harness (so the answer is validated
// against openapi.yaml too) and returns what curl would print.
func (sh *docShell) curl(args []string) string {
	sh.t.Helper()
	if sh.b == nil {
		sh.t.Fatal("docs/fleets.md: curl with no broker running")
	}
	req := Request{Method: "GET", Header: map[string]string{}}
	var rawURL, writeOut string
	discard := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		next := func() string {
			if i+1 >= len(args) {
				sh.t.Fatalf("docs/fleets.md: curl %s needs a value", a)
			}
			i++
			return args[i]
		}
		switch a {
		case "-s", "-S", "-sS":
		case "-X":
			req.Method = next()
		case "-H":
			k, v, _ := strings.Cut(next(), ":")
			if strings.EqualFold(k, "Content-Type") {
				req.ContentType = strings.TrimSpace(v)
			} else {
				req.Header[k] = strings.TrimSpace(v)
			}
		case "-d":
			req.Body = next()
			if req.Method == "GET" {
				req.Method = "POST"
			}
		case "-o":
			discard = next() == "/dev/null"
		case "-w":
			writeOut = next()
		default:
			if strings.HasPrefix(a, "-") || rawURL != "" {
				sh.t.Fatalf("docs/fleets.md: curl argument %q is not supported", a)
			}
			rawURL = a
		}
	}
	path, ok := strings.CutPrefix(rawURL, sh.b.URL())
	if !ok {
		sh.t.Fatalf("docs/fleets.md: curl URL %q is not under $MUSTER", rawURL)
	}
	req.Path = path
	resp := sh.b.Do(sh.t, req)
	out := ""
	if !discard {
		out = string(resp.Body)
	}
	switch writeOut {
	case "":
	case `%{http_code}\n`:
		out += fmt.Sprintf("%d\n", resp.Status)
	default:
		sh.t.Fatalf("docs/fleets.md: curl -w %q is not supported", writeOut)
	}
	return out
}

// words splits a command the way sh would, for the subset above.
func (sh *docShell) words(cmd string) []string {
	sh.t.Helper()
	var (
		out    []string
		cur    strings.Builder
		in     bool // inside a word
		expand = func(s string, i int) (string, int) {
			j := i + 1
			for j < len(s) && (s[j] == '_' || 'A' <= s[j] && s[j] <= 'Z' || '0' <= s[j] && s[j] <= '9') {
				j++
			}
			name := s[i+1 : j]
			if name == "MUSTER" {
				return sh.b.URL(), j
			}
			v, ok := sh.vars[name]
			if !ok {
				sh.t.Fatalf("docs/fleets.md: $%s is not set", name)
			}
			return strings.TrimRight(v, "\n"), j
		}
	)
	if sh.b == nil && strings.Contains(cmd, "$MUSTER") {
		sh.t.Fatal("docs/fleets.md: $MUSTER with no broker running")
	}
	for i := 0; i < len(cmd); {
		c := cmd[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			if in {
				out, in = append(out, cur.String()), false
				cur.Reset()
			}
			i++
		case c == '\'':
			j := strings.IndexByte(cmd[i+1:], '\'')
			if j < 0 {
				sh.t.Fatalf("docs/fleets.md: unterminated ' in %q", cmd)
			}
			cur.WriteString(cmd[i+1 : i+1+j])
			in, i = true, i+j+2
		case c == '"':
			i++
			for i < len(cmd) && cmd[i] != '"' {
				switch {
				case cmd[i] == '\\' && i+1 < len(cmd):
					cur.WriteByte(cmd[i+1])
					i += 2
				case cmd[i] == '$':
					v, j := expand(cmd, i)
					cur.WriteString(v)
					i = j
				default:
					cur.WriteByte(cmd[i])
					i++
				}
			}
			in, i = true, i+1
		case c == '$':
			v, j := expand(cmd, i)
			cur.WriteString(v)
			in, i = true, j
		case c == '\\' && i+1 < len(cmd):
			cur.WriteByte(cmd[i+1])
			in, i = true, i+2
		default:
			cur.WriteByte(c)
			in, i = true, i+1
		}
	}
	if in {
		out = append(out, cur.String())
	}
	return out
}
