package judge

import (
	"bytes"
	"io"
	"testing"
)

// FuzzServe feeds the worker's loop arbitrary bytes: whatever arrives on
// its input, it answers with well-formed statuses (a refusal's frame reads
// back as a code and a message), never panics, and never allocates a frame
// beyond maxFrame.
func FuzzServe(f *testing.F) {
	frames := func(parts ...string) []byte {
		var b bytes.Buffer
		for _, p := range parts {
			_ = writeFrame(&b, []byte(p))
		}
		return b.Bytes()
	}
	f.Add(frames(`{"type":"object"}`, `{}`, `[]`, `nope`))
	f.Add(frames(`{"$ref":"file:///etc/passwd"}`))
	f.Add(frames(`{"maximum":1e1000000}`))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0, 0, 0, 9, '{'})
	f.Fuzz(func(t *testing.T, in []byte) {
		var out bytes.Buffer
		_ = Serve(bytes.NewReader(in), &out)
		r := bytes.NewReader(out.Bytes())
		for {
			st, err := r.ReadByte()
			if err == io.EOF {
				return
			}
			switch st {
			case statusOK, statusValid, statusInvalid:
			case statusRefused:
				b, err := readFrame(r, nil)
				if err != nil {
					t.Fatalf("a refusal without its frame: %v", err)
				}
				if e := parseRefusal(b); e.Code == "" {
					t.Fatalf("a refusal without a code: %q", b)
				}
				if r.Len() != 0 {
					t.Fatalf("the worker answered after a refusal")
				}
				return
			default:
				t.Fatalf("status %q", st)
			}
		}
	})
}
