package sse

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"
)

// decoderTests are the WHATWG parsing rules, the spec's own examples first.
var decoderTests = []struct {
	name   string
	in     string
	want   []Event
	err    error  // what Next returns after the events
	lastID string // LastEventID at the end
}{
	{"SpecStock", "data: YHOO\ndata: +2\ndata: 10\n\n",
		[]Event{{Data: []byte("YHOO\n+2\n10")}}, io.EOF, ""},
	{"SpecIDs", ": test stream\n\ndata: first event\nid: 1\n\ndata:second event\nid\n\ndata:  third event\n",
		[]Event{{ID: "1", Data: []byte("first event")}, {Data: []byte("second event")}}, io.ErrUnexpectedEOF, ""},
	{"SpecEmptyData", "data\n\ndata\ndata\n\ndata:",
		[]Event{{Data: []byte("")}, {Data: []byte("\n")}}, io.ErrUnexpectedEOF, ""},
	{"SpecSpace", "data:test\n\ndata: test\n\n",
		[]Event{{Data: []byte("test")}, {Data: []byte("test")}}, io.EOF, ""},
	{"CRLF", "event: a\r\ndata: 1\r\n\r\n", []Event{{Name: "a", Data: []byte("1")}}, io.EOF, ""},
	{"CR", "event: a\rdata: 1\r\r", []Event{{Name: "a", Data: []byte("1")}}, io.EOF, ""},
	{"MixedEndings", "data: a\r\ndata: b\rdata: c\n\r\n", []Event{{Data: []byte("a\nb\nc")}}, io.EOF, ""},
	{"CRThenLFIsOneEnding", "data: a\r\n\r\n", []Event{{Data: []byte("a")}}, io.EOF, ""},
	{"LFThenCRIsTwo", "data: a\n\rdata: b\n\n", []Event{{Data: []byte("a")}, {Data: []byte("b")}}, io.EOF, ""},
	{"OneSpaceRemoved", "data:  two\n\n", []Event{{Data: []byte(" two")}}, io.EOF, ""},
	{"NoColon", "event\ndata\n\n", []Event{{Data: []byte("")}}, io.EOF, ""},
	{"ColonInValue", "data: a: b\n\n", []Event{{Data: []byte("a: b")}}, io.EOF, ""},
	{"CommentOnly", ": keepalive\n\n:\n\n", nil, io.EOF, ""},
	{"NoData", "event: x\nid: 7\n\n", nil, io.EOF, "7"},
	{"UnknownField", "foo: bar\nDATA: no\ndata: x\n\n", []Event{{Data: []byte("x")}}, io.EOF, ""},
	{"LastFieldWins", "event: a\nevent: b\nid: 1\nid: 2\ndata: x\n\n",
		[]Event{{Name: "b", ID: "2", Data: []byte("x")}}, io.EOF, "2"},
	{"IDPersists", "id: 5\ndata: a\n\ndata: b\n\n",
		[]Event{{ID: "5", Data: []byte("a")}, {Data: []byte("b")}}, io.EOF, "5"},
	{"EmptyIDResets", "id: 5\ndata: a\n\nid\ndata: b\n\n",
		[]Event{{ID: "5", Data: []byte("a")}, {Data: []byte("b")}}, io.EOF, ""},
	{"IDWithNULIgnored", "id: 5\ndata: a\n\nid: 6\x007\ndata: b\n\n",
		[]Event{{ID: "5", Data: []byte("a")}, {Data: []byte("b")}}, io.EOF, "5"},
	{"NameResetsAfterDispatch", "event: a\ndata: 1\n\ndata: 2\n\n",
		[]Event{{Name: "a", Data: []byte("1")}, {Data: []byte("2")}}, io.EOF, ""},
	{"BOM", "\xEF\xBB\xBFdata: a\n\n", []Event{{Data: []byte("a")}}, io.EOF, ""},
	{"SecondBOMIsAFieldName", "\xEF\xBB\xBF\xEF\xBB\xBFdata: a\n\ndata: b\n\n", []Event{{Data: []byte("b")}}, io.EOF, ""},
	{"CutInLine", "data: a\n\ndata: b", []Event{{Data: []byte("a")}}, io.ErrUnexpectedEOF, ""},
	{"CutInEvent", "data: a\n", nil, io.ErrUnexpectedEOF, ""},
	{"CutAfterComment", ": c\n", nil, io.EOF, ""},
	{"Empty", "", nil, io.EOF, ""},
	{"BlankLines", "\n\r\n\r", nil, io.EOF, ""},
}

func TestDecoder(t *testing.T) {
	readers := []struct {
		name string
		wrap func(io.Reader) io.Reader
	}{
		{"Whole", func(r io.Reader) io.Reader { return r }},
		{"OneByte", iotest.OneByteReader},
		{"Half", iotest.HalfReader},
	}
	for _, tt := range decoderTests {
		for _, rd := range readers {
			t.Run(tt.name+"/"+rd.name, func(t *testing.T) {
				dec := NewDecoder(rd.wrap(strings.NewReader(tt.in)))
				var got []Event
				var err error
				for {
					var ev Event
					if ev, err = dec.Next(); err != nil {
						break
					}
					got = append(got, ev)
				}
				if !equalEvents(got, tt.want) {
					t.Errorf("events:\n got %s\nwant %s", formatEvents(got), formatEvents(tt.want))
				}
				if err != tt.err {
					t.Errorf("err = %v, want %v", err, tt.err)
				}
				if _, again := dec.Next(); again != err {
					t.Errorf("err not sticky: %v then %v", err, again)
				}
				if got := dec.LastEventID(); got != tt.lastID {
					t.Errorf("LastEventID = %q, want %q", got, tt.lastID)
				}
			})
		}
	}
}

func TestDecoderRetry(t *testing.T) {
	tests := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"retry: 2500\n\n", 2500 * time.Millisecond, true},
		{"retry:0\n\n", 0, true},
		{"retry: 1000\nretry: x\n\n", time.Second, true},
		{"retry: 10s\n\n", 0, false},
		{"retry: -1\n\n", 0, false},
		{"retry:\n\n", 0, false},
		{"retry: 99999999999999999999999\n\n", time.Duration(1<<63-1) / time.Millisecond * time.Millisecond, true},
	}
	for _, tt := range tests {
		dec := NewDecoder(strings.NewReader(tt.in))
		if _, err := dec.Next(); err != io.EOF {
			t.Errorf("%q: err = %v", tt.in, err)
		}
		if got, ok := dec.Retry(); got != tt.want || ok != tt.ok {
			t.Errorf("%q: Retry() = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

func TestDecoderComments(t *testing.T) {
	var got []string
	dec := NewDecoder(strings.NewReader(": keepalive\n\n:x\r\ndata: 1\n\n"))
	dec.OnComment = func(text []byte) { got = append(got, string(text)) }
	ev, err := dec.Next()
	if err != nil || string(ev.Data) != "1" {
		t.Fatalf("Next = %v, %v", ev, err)
	}
	if want := []string{" keepalive", "x"}; strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("comments = %q, want %q", got, want)
	}
}

func TestDecoderTooLarge(t *testing.T) {
	tests := map[string]string{
		"Line": "data: " + strings.Repeat("x", 100) + "\n\n",
		"Data": strings.Repeat("data: xxxxxxxx\n", 20) + "\n",
	}
	for name, in := range tests {
		t.Run(name, func(t *testing.T) {
			dec := NewDecoder(strings.NewReader(in))
			dec.MaxEventSize = 64
			if _, err := dec.Next(); !errors.Is(err, ErrEventTooLarge) {
				t.Errorf("err = %v, want ErrEventTooLarge", err)
			}
		})
	}
}

// normalize is what a decoder makes of an encoded event: framing bytes in
// Name and ID become spaces, line endings in Data become LF.
func normalize(ev Event) Event {
	clean := func(s string, nul bool) string {
		return string(appendLine(nil, s, nul))
	}
	data := bytes.ReplaceAll(ev.Data, []byte("\r\n"), []byte("\n"))
	data = bytes.ReplaceAll(data, []byte("\r"), []byte("\n"))
	return Event{Name: clean(ev.Name, false), ID: clean(ev.ID, true), Data: data}
}

// FuzzDecoder feeds arbitrary input to the decoder, which must not panic,
// must produce only events whose fields are single lines, and whose events,
// encoded by AppendEvent, must decode to the same events again.
func FuzzDecoder(f *testing.F) {
	for _, tt := range decoderTests {
		f.Add([]byte(tt.in))
	}
	f.Add([]byte("retry: 100\n\nevent: change\nid: 1\ndata: {}\n\n: keepalive\n\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		dec := NewDecoder(bytes.NewReader(in))
		dec.MaxEventSize = 1 << 16
		dec.OnComment = func([]byte) {}
		var evs []Event
		var wire []byte
		for {
			ev, err := dec.Next()
			if err != nil {
				break
			}
			if strings.ContainsAny(ev.Name, "\r\n") || strings.ContainsAny(ev.ID, "\r\n\x00") || bytes.IndexByte(ev.Data, '\r') >= 0 {
				t.Fatalf("decoder produced a multi-line field: %q", formatEvents([]Event{ev}))
			}
			evs = append(evs, ev)
			wire = AppendEvent(wire, ev)
		}
		got := readAll(t, NewDecoder(bytes.NewReader(wire)))
		if !equalEvents(got, evs) {
			t.Fatalf("round trip of %q:\n got %s\nwant %s", wire, formatEvents(got), formatEvents(evs))
		}
	})
}

// FuzzAppendEvent encodes arbitrary events: each must decode to exactly one
// event, equal to the original up to normalization.
func FuzzAppendEvent(f *testing.F) {
	f.Add("change", "42", []byte(`{"a":1}`))
	f.Add("", "", []byte(""))
	f.Add("a\nb", "1\x00\r", []byte("x\r\ny\rz\n"))
	f.Add(" ", " ", []byte(" "))
	f.Fuzz(func(t *testing.T, name, id string, data []byte) {
		ev := Event{Name: name, ID: id, Data: data}
		wire := AppendEvent(nil, ev)
		got := readAll(t, NewDecoder(bytes.NewReader(wire)))
		if want := []Event{normalize(ev)}; !equalEvents(got, want) {
			t.Fatalf("%q decoded to %s, want %s", wire, formatEvents(got), formatEvents(want))
		}
	})
}
