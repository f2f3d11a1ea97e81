package core

import (
	"encoding/base64"
	"regexp"
	"strings"
	"testing"

	"github.com/musterhq/muster"
)

func TestCursorRoundTripAndMisuse(t *testing.T) {
	master := []byte("master-secret")
	k := NewCursorCodec(master, "epoch-1")
	c := Cursor{Epoch: "epoch-1", Family: "acme", Selector: "lease://acme/*/*", Snapshot: 42, After: "acme/r/doc-9"}
	s := k.Encode(c)
	got, err := k.Decode(s, "acme", "lease://acme/*/*")
	if err != nil || got != c {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	raw, _ := base64.RawURLEncoding.DecodeString(s)
	flipped := append([]byte{}, raw...)
	flipped[len(flipped)/2] ^= 1
	later := NewCursorCodec(master, "epoch-2")
	otherBroker := NewCursorCodec([]byte("another master"), "epoch-1")
	tests := []struct {
		name, cursor, fam, sel string
		codec                  *CursorCodec
		want                   muster.Code
	}{
		{"FlippedByte", base64.RawURLEncoding.EncodeToString(flipped), "acme", c.Selector, k, muster.CodeInvalidCursor},
		{"Truncated", s[:len(s)-3], "acme", c.Selector, k, muster.CodeInvalidCursor},
		{"NotBase64", "!!!", "acme", c.Selector, k, muster.CodeInvalidCursor},
		{"Empty", "", "acme", c.Selector, k, muster.CodeInvalidCursor},
		{"OtherSelector", s, "acme", "lease://acme/**", k, muster.CodeInvalidCursor},
		{"OtherFamily", s, "beta", c.Selector, k, muster.CodeInvalidCursor},
		{"LaterEpoch", s, "acme", c.Selector, later, muster.CodeEpochChanged},
		{"OtherBroker", s, "acme", c.Selector, otherBroker, muster.CodeInvalidCursor},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.codec.Decode(tc.cursor, Family(tc.fam), tc.sel)
			if muster.ErrorCode(err) != tc.want {
				t.Fatalf("err = %v, want %s", err, tc.want)
			}
		})
	}
}

func FuzzCursorDecode(f *testing.F) {
	k := NewCursorCodec([]byte("m"), "e")
	f.Add(k.Encode(Cursor{Epoch: "e", Family: "f", Selector: "s", Snapshot: 1, After: "a/b/c"}))
	f.Add("")
	f.Add("AQ")
	f.Fuzz(func(t *testing.T, s string) {
		c, err := k.Decode(s, "f", "s")
		if err != nil {
			if code := muster.ErrorCode(err); code != muster.CodeInvalidCursor && code != muster.CodeEpochChanged {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		// Anything accepted re-encodes to an equivalent cursor.
		again, err := k.Decode(k.Encode(c), "f", "s")
		if err != nil || again != c {
			t.Fatalf("re-encode: %+v %v", again, err)
		}
	})
}

// TestLongestCursorFitsTheBound: a cursor positioned after the longest
// route, with a long epoch, is within MaxCursorLen and of the contract's
// alphabet; a longer text is refused before it is decoded.
func TestLongestCursorFitsTheBound(t *testing.T) {
	k := NewCursorCodec([]byte("m"), "epoch-with-some-length-0123456789")
	c := Cursor{Epoch: "epoch-with-some-length-0123456789", Family: "f", Selector: "lease://**", Snapshot: 1 << 62,
		After: strings.Repeat("a", MaxSelectorLen)}
	s := k.Encode(c)
	if len(s) > MaxCursorLen || !regexp.MustCompile(`^[A-Za-z0-9_-]+$`).MatchString(s) {
		t.Fatalf("cursor of %d characters %q, want at most %d of [A-Za-z0-9_-]", len(s), s, MaxCursorLen)
	}
	long := s + strings.Repeat("A", MaxCursorLen+1-len(s))
	if _, err := k.Decode(long, "f", "lease://**"); muster.ErrorCode(err) != muster.CodeInvalidCursor {
		t.Fatalf("cursor of %d characters: %v, want invalid_cursor", len(long), err)
	}
}
