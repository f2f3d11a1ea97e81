package handlers

import (
	"net/http"
	"sync/atomic"
	"time"
)

// net/http formats the Date header of every answer anew with the generic
// time formatter, which costs more than the lease answer's whole body. The
// header changes once a second, so it is formatted once a second and shared
// (net/http never writes into a header's value slice, and Set or Add
// replace it rather than write into it).

type dateValue struct {
	unix  int64
	value []string
}

var lastDate atomic.Pointer[dateValue]

// stampDate sets h's Date header to now, as net/http would, unless the
// handler set one.
func stampDate(h http.Header) {
	if _, ok := h["Date"]; ok {
		return
	}
	now := time.Now()
	d := lastDate.Load()
	if d == nil || d.unix != now.Unix() {
		d = &dateValue{unix: now.Unix(), value: []string{now.UTC().Format(http.TimeFormat)}}
		lastDate.Store(d)
	}
	h["Date"] = d.value
}
