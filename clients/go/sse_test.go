package muster

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
)

func readAll(tb testing.TB, r io.Reader, max int) ([]sseEvent, error) {
	tb.Helper()
	d := newSSEReader(r, max)
	var out []sseEvent
	for {
		ev, err := d.next()
		if err != nil {
			if err == io.EOF {
				return out, nil
			}
			return out, err
		}
		out = append(out, ev)
	}
}

func TestSSEReader(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []sseEvent
	}{
		{"OK", "event: change\nid: 42\ndata: {\"a\":1}\n\n", []sseEvent{{"change", "42", `{"a":1}`}}},
		{"DefaultName", "data: x\n\n", []sseEvent{{"message", "", "x"}}},
		{"CRLF", "event: a\r\ndata: 1\r\n\r\n", []sseEvent{{"a", "", "1"}}},
		{"CR", "event: a\rdata: 1\r\r", []sseEvent{{"a", "", "1"}}},
		{"MultiData", "data: a\ndata:b\ndata\n\n", []sseEvent{{"message", "", "a\nb\n"}}},
		{"OneSpaceOnly", "data:  two\n\n", []sseEvent{{"message", "", " two"}}},
		{"CommentsAndRetry", "retry: 2000\n: keepalive\n\ndata: x\n\n", []sseEvent{{"message", "", "x"}}},
		{"NoDataNoEvent", "event: snapshot\n\nevent: b\ndata: y\n\n", []sseEvent{{"b", "", "y"}}},
		{"IDPersists", "id: 7\ndata: a\n\ndata: b\n\n", []sseEvent{{"message", "7", "a"}, {"message", "7", "b"}}},
		{"IDWithNULIgnored", "id: 1\ndata: a\n\nid: x\x00y\ndata: b\n\n", []sseEvent{{"message", "1", "a"}, {"message", "1", "b"}}},
		{"BOM", "\xEF\xBB\xBFdata: x\n\n", []sseEvent{{"message", "", "x"}}},
		{"PartialDiscarded", "data: x\n\ndata: y\n", []sseEvent{{"message", "", "x"}}},
		{"UnknownField", "foo: bar\ndata: x\n\n", []sseEvent{{"message", "", "x"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// One byte at a time, so that no line ending is seen whole.
			got, err := readAll(t, iotest.OneByteReader(strings.NewReader(tc.in)), 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %q\nwant %q", got, tc.want)
			}
		})
	}
	t.Run("TooLarge", func(t *testing.T) {
		_, err := readAll(t, strings.NewReader("data: "+strings.Repeat("x", 100)+"\n\n"), 50)
		if !errors.Is(err, errEventTooLarge) {
			t.Fatalf("got %v", err)
		}
		_, err = readAll(t, strings.NewReader(strings.Repeat("data: xxxxxxxxxx\n", 10)+"\n"), 50)
		if !errors.Is(err, errEventTooLarge) {
			t.Fatalf("many lines: got %v", err)
		}
	})
	t.Run("EventBeforeTheRestArrives", func(t *testing.T) {
		// A stream that blocks after the first event's blank line must
		// still deliver that event.
		pr, pw := io.Pipe()
		go func() { _, _ = pw.Write([]byte("data: first\n\n")) }()
		d := newSSEReader(pr, 1<<20)
		ev, err := d.next()
		if err != nil || ev.Data != "first" {
			t.Fatalf("got %v %v", ev, err)
		}
		pw.Close()
	})
}

// referenceEvents is the event-stream interpretation written as plainly as
// possible over the whole input: normalize line endings, split, interpret.
func referenceEvents(in []byte) []sseEvent {
	in = bytes.TrimPrefix(in, []byte("\xEF\xBB\xBF"))
	s := strings.ReplaceAll(string(in), "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	lines := strings.Split(s, "\n")
	lines = lines[:len(lines)-1] // the last piece has no line ending
	var out []sseEvent
	var data []string
	name, id := "", ""
	for _, l := range lines {
		if l == "" {
			if data != nil {
				ev := sseEvent{Name: name, ID: id, Data: strings.Join(data, "\n")}
				if ev.Name == "" {
					ev.Name = "message"
				}
				out = append(out, ev)
			}
			data, name = nil, ""
			continue
		}
		if l[0] == ':' {
			continue
		}
		f, v, _ := strings.Cut(l, ":")
		v = strings.TrimPrefix(v, " ")
		switch f {
		case "data":
			data = append(data, v)
		case "event":
			name = v
		case "id":
			if !strings.Contains(v, "\x00") {
				id = v
			}
		}
	}
	return out
}

func FuzzSSEReader(f *testing.F) {
	for _, s := range []string{
		"event: change\nid: 42\ndata: {}\n\n",
		"data: a\r\ndata: b\r\n\r\n",
		"\xEF\xBB\xBFdata: x\r\r",
		": keepalive\n\nretry: 10\nid\ndata\n\n",
		"data: x\n\ndata: y",
		"event: overflow\ndata: {\"reason\":\"overflow\"}\n\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		got, err := readAll(t, iotest.HalfReader(bytes.NewReader(in)), 1<<20)
		if err != nil {
			t.Fatalf("error on a small input: %v", err)
		}
		want := referenceEvents(in)
		if len(got) != len(want) || (len(got) > 0 && !reflect.DeepEqual(got, want)) {
			t.Fatalf("input %q\ngot  %q\nwant %q", in, got, want)
		}
	})
}
