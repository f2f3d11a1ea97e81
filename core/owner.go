package core

import (
	"unicode/utf8"

	"github.com/musterhq/muster"
)

// CheckOwnerID is the rule of a session's owner_id: 1 to MaxOwnerIDLen
// bytes of valid UTF-8 without control characters (U+0000–U+001F, U+007F,
// U+0080–U+009F) and without the bidirectional formatting characters
// (isBidiControl). An owner_id is shown to people (LIST, GET, watch events,
// the CLI, the dashboard): those characters could clear a terminal, forge a
// table row or reverse what follows. openapi.yaml's OwnerId pattern states
// the same rule. It fails with CodeInvalidRequest naming the field, never
// repeating the value.
func CheckOwnerID(owner string) error {
	if owner == "" || len(owner) > MaxOwnerIDLen {
		return muster.Errorf(muster.CodeInvalidRequest, "owner_id must be 1..%d bytes", MaxOwnerIDLen)
	}
	if !utf8.ValidString(owner) {
		return muster.Errorf(muster.CodeInvalidRequest, "owner_id is not valid UTF-8")
	}
	for _, r := range owner {
		switch {
		case r <= 0x1f || r >= 0x7f && r <= 0x9f:
			return muster.Errorf(muster.CodeInvalidRequest, "owner_id has a control character")
		case isBidiControl(r):
			return muster.Errorf(muster.CodeInvalidRequest, "owner_id has a bidirectional formatting character")
		}
	}
	return nil
}

// isBidiControl reports the Unicode bidirectional formatting characters:
// the embeddings and overrides U+202A–U+202E, the isolates U+2066–U+2069,
// the marks U+200E, U+200F and U+061C.
func isBidiControl(r rune) bool {
	return r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069 || r == 0x200e || r == 0x200f || r == 0x061c
}
