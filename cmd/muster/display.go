package main

import (
	"fmt"
	"strconv"
	"unicode/utf8"
)

// What the CLI prints comes from a broker (owner ids, routes, problem
// details), and a terminal acts on some characters instead of showing
// them: ESC sequences clear the screen or move the cursor, a newline or
// carriage return forges a table row, a bidirectional override reverses
// what follows. Every value printed for people goes through display, and
// every JSON document through escapeJSON, so printable text (non-ASCII
// letters included) is shown as it is and nothing else reaches the
// terminal raw.

// display is s as a table or a message shows it: s itself when every rune
// is printable (strconv.IsPrint: letters, marks, numbers, punctuation,
// symbols and the ASCII space), otherwise s quoted with Go's escapes
// (strconv.Quote), which names each unprintable rune (`"w\x1b[2J"`,
// `"a\u202eb"`) and each invalid byte.
func display(s string) string {
	for _, r := range s {
		if r == utf8.RuneError || !strconv.IsPrint(r) {
			return strconv.Quote(s)
		}
	}
	return s
}

// displayf is fmt.Sprint of v through display.
func displayf(v any) string { return display(fmt.Sprint(v)) }

// escapeJSON rewrites the unprintable runes of one encoded JSON document
// as \u escapes (surrogate pairs above U+FFFF): the document means the
// same, and a terminal shows it as it is. Outside strings, JSON holds no
// such rune but whitespace, and encoding/json writes none but the final
// newline, which is kept; invalid UTF-8 does not occur (encoding/json
// writes U+FFFD for it).
func escapeJSON(b []byte) []byte {
	clean := true
	for i, r := range string(b) {
		if !strconv.IsPrint(r) && !(r == '\n' && i == len(b)-1) {
			clean = false
			break
		}
	}
	if clean {
		return b
	}
	out := make([]byte, 0, len(b)+32)
	for i, r := range string(b) {
		switch {
		case strconv.IsPrint(r) || r == '\n' && i == len(b)-1:
			out = utf8.AppendRune(out, r)
		case r > 0xffff:
			r -= 0x10000
			out = fmt.Appendf(out, `\u%04x\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
		default:
			out = fmt.Appendf(out, `\u%04x`, r)
		}
	}
	return out
}
