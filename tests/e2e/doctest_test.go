package e2e

import (
	"encoding/json"
	"reflect"
	"strings"
)

// Executable documentation: the helpers that docs/fleets.md
// (TestFleetExample) and README.md (TestReadmeTour) share. A page marks its
// commands as ```sh fenced blocks; the output a command prints is written on
// a `# → ` line right under it. Outputs are compared by docOutputMatches:
// byte for byte, or as JSON with the values that differ from run to run
// (docVolatile) compared by presence only.

// mdBlock is one fenced code block of a Markdown text.
type mdBlock struct {
	info string // the info string after the opening fence ("sh", "text", …)
	body string // the lines between the fences, each ending in "\n"
}

// mdBlocks returns the fenced code blocks of md, in order. A fence is a line
// that starts with ``` ; an unterminated block is dropped.
func mdBlocks(md string) []mdBlock {
	var (
		out  []mdBlock
		cur  *mdBlock
		body strings.Builder
	)
	for line := range strings.Lines(md) {
		trimmed := strings.TrimRight(line, "\r\n")
		switch {
		case cur == nil && strings.HasPrefix(trimmed, "```"):
			cur = &mdBlock{info: strings.TrimSpace(trimmed[3:])}
			body.Reset()
		case cur != nil && trimmed == "```":
			cur.body = body.String()
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			body.WriteString(trimmed + "\n")
		}
	}
	return out
}

// shBlocks returns the bodies of the ```sh blocks of md.
func shBlocks(md string) []string {
	var out []string
	for _, b := range mdBlocks(md) {
		if b.info == "sh" {
			out = append(out, b.body)
		}
	}
	return out
}

// docStep is one step of a ```sh block: a command (its text as written,
// `\` line continuations included) or the expected output of the command
// before it (a `# → ` line, without the marker).
type docStep struct {
	cmd  string
	want string
	out  bool // the step is an expected output
}

// docSteps splits a block into commands (an unquoted newline ends one) and
// expected outputs; other comment lines are dropped.
func docSteps(block string) []docStep {
	var out []docStep
	for i := 0; i < len(block); {
		for i < len(block) && (block[i] == '\n' || block[i] == ' ') {
			i++
		}
		if i == len(block) {
			break
		}
		var end int
		if block[i] == '#' {
			end = i + strings.IndexByte(block[i:], '\n')
			if want, ok := strings.CutPrefix(block[i:end], "# → "); ok {
				out = append(out, docStep{want: want, out: true})
			}
		} else {
			end = commandEnd(block, i)
			out = append(out, docStep{cmd: block[i:end]})
		}
		i = end
	}
	return out
}

// commandEnd finds the newline that ends the command starting at i.
func commandEnd(s string, i int) int {
	var quote byte
	for ; i < len(s); i++ {
		c := s[i]
		switch {
		case quote == '\'':
			if c == '\'' {
				quote = 0
			}
		case c == '\\':
			i++
		case quote == '"':
			if c == '"' {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '\n':
			return i
		}
	}
	return i
}

// docVolatile are the response keys whose values differ from run to run.
var docVolatile = map[string]bool{
	"session_id": true, "holder_incarnation": true, "epoch": true, "acquired_at": true,
	"expires_at": true, "fencing_token": true, "revision": true, "remaining_ms": true,
}

// docOutputMatches compares an expected output line with the real output:
// byte for byte, unless the doc shows JSON with a volatile key (at any
// depth); then as JSON, the volatile values by presence only.
func docOutputMatches(want, got string) bool {
	if want == got {
		return true
	}
	var w, g any
	if json.Unmarshal([]byte(want), &w) != nil || !hasVolatile(w) {
		return false
	}
	if json.Unmarshal([]byte(got), &g) != nil {
		return false
	}
	return jsonMatches(w, g)
}

// hasVolatile reports whether a decoded JSON value has a volatile key in any
// of its objects.
func hasVolatile(v any) bool {
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			if docVolatile[k] || hasVolatile(x) {
				return true
			}
		}
	case []any:
		for _, x := range v {
			if hasVolatile(x) {
				return true
			}
		}
	}
	return false
}

// jsonMatches compares decoded JSON values: objects must have the same keys,
// arrays the same length, and every value must match except those of
// volatile keys, which need only be present.
func jsonMatches(want, got any) bool {
	wm, ok := want.(map[string]any)
	if !ok {
		if wa, ok := want.([]any); ok {
			ga, ok := got.([]any)
			if !ok || len(ga) != len(wa) {
				return false
			}
			for i := range wa {
				if !jsonMatches(wa[i], ga[i]) {
					return false
				}
			}
			return true
		}
		return reflect.DeepEqual(want, got)
	}
	gm, ok := got.(map[string]any)
	if !ok || len(gm) != len(wm) {
		return false
	}
	for k, wv := range wm {
		gv, ok := gm[k]
		if !ok || (!docVolatile[k] && !jsonMatches(wv, gv)) {
			return false
		}
	}
	return true
}
