package sse

import (
	"testing"
	"time"
)

func TestAppendEvent(t *testing.T) {
	tests := []struct {
		name string
		ev   Event
		want string
	}{
		{"OK", Event{Name: "change", ID: "42", Data: []byte(`{"a":1}`)},
			"event: change\nid: 42\ndata: {\"a\":1}\n\n"},
		{"DataOnly", Event{Data: []byte("x")}, "data: x\n\n"},
		{"EmptyData", Event{Name: "overflow"}, "event: overflow\ndata: \n\n"},
		{"LF", Event{Data: []byte("a\nb")}, "data: a\ndata: b\n\n"},
		{"CRLF", Event{Data: []byte("a\r\nb")}, "data: a\ndata: b\n\n"},
		{"CR", Event{Data: []byte("a\rb")}, "data: a\ndata: b\n\n"},
		{"LFCR", Event{Data: []byte("a\n\rb")}, "data: a\ndata: \ndata: b\n\n"},
		{"TrailingLF", Event{Data: []byte("a\n")}, "data: a\ndata: \n\n"},
		{"TrailingCR", Event{Data: []byte("a\r")}, "data: a\ndata: \n\n"},
		{"OnlyLF", Event{Data: []byte("\n")}, "data: \ndata: \n\n"},
		{"LeadingSpace", Event{Data: []byte(" a")}, "data:  a\n\n"},
		{"NameNewline", Event{Name: "a\nb\rc", Data: []byte("x")}, "event: a b c\ndata: x\n\n"},
		{"NameNUL", Event{Name: "a\x00b", Data: []byte("x")}, "event: a\x00b\ndata: x\n\n"},
		{"IDNewlineNUL", Event{ID: "1\n2\x003", Data: []byte("x")}, "id: 1 2 3\ndata: x\n\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := string(AppendEvent([]byte("prefix|"), tt.ev))
			if want := "prefix|" + tt.want; got != want {
				t.Errorf("got %q, want %q", got, want)
			}
		})
	}
}

func TestAppendControl(t *testing.T) {
	if got, want := string(appendComment(nil, "keepalive")), ": keepalive\n\n"; got != want {
		t.Errorf("comment: got %q, want %q", got, want)
	}
	if got, want := string(appendRetry(nil, 2500*time.Millisecond)), "retry: 2500\n\n"; got != want {
		t.Errorf("retry: got %q, want %q", got, want)
	}
}

func TestAppendEventAllocs(t *testing.T) {
	ev := Event{Name: "change", ID: "123456", Data: []byte(`{"subscription_id":"s1","route":"lease://acme/renderers/doc-1","kind":"released","revision":123456}`)}
	buf := make([]byte, 0, 4096)
	if n := testing.AllocsPerRun(100, func() { buf = AppendEvent(buf[:0], ev) }); n != 0 {
		t.Errorf("AppendEvent allocates %v times per event", n)
	}
}
