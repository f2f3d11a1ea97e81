// Package sse writes Server-Sent-Events streams (the WHATWG HTML "server-sent
// events" format) for Muster's watch endpoint, and reads them back.
//
// The broker's actor owns lease state and must never block. It hands change
// events to a stream with [Stream.Offer], a non-blocking enqueue into the
// stream's bounded queue, and ends a stream with [Stream.End]. Everything
// after that belongs to this package: the queue, the wire framing, the retry
// field, heartbeats, per-write deadlines, the terminal event and shutdown.
// [Serve] runs in the HTTP handler goroutine and is the stream's only writer:
// it writes the stream itself, or, with a [Pool] (Options.Pool), has the
// pool's workers write it one turn at a time while it waits for the end.
// [Hub] ends all streams on server shutdown. [Decoder] parses a stream on the
// client side; the end-to-end tests use it.
//
// A stream on the wire:
//
//	retry: 2000
//
//	event: snapshot
//	data: {"epoch":"…","revision":41,"subscriptions":[…]}
//
//	event: change
//	id: 42
//	data: {"subscription_id":"…","route":"lease://acme/renderers/doc-1","kind":"acquired",…}
//
//	: keepalive
//
//	event: overflow
//	data: {}
//
// # Concurrency properties
//
// What a producer may rely on:
//
//   - Offer and End never block: they take the stream's mutex, which nobody
//     holds across I/O or for more than a slice append or swap, and signal
//     the writer through a one-slot channel with a non-blocking send (with
//     a Pool: put the stream on the pool's ready list, under a mutex held
//     for a few field updates and an append, never across I/O). A
//     client that stops reading costs the producer nothing; it is cut off by
//     the write deadline, and meanwhile its queue fills and overflows.
//   - Offer and End are safe from any goroutine. Events are written in the
//     order the Offer calls took effect (for one producer goroutine: the
//     order of its calls).
//   - Exactly once, or end. Every event for which Offer returned true is
//     written exactly once, in order, before the terminal event, unless the
//     stream dies first (client gone, write error or timeout), in which case
//     nothing more is written at all. No event is ever skipped: once Offer
//     returns false, every later Offer returns false too. So a client sees a
//     gap-free prefix of the accepted events, followed by the terminal event
//     if and only if the stream ended cleanly.
//   - Overflow is an explicit end: when the queue is full, Offer returns
//     false and the writer writes everything queued, then the overflow
//     event, then closes. The producer should treat false as "this stream is
//     finished" and drop its registrations.
//   - The first terminal wins: End after End or after overflow does nothing.
//     The terminal event follows everything queued before it.
//   - Done is closed once the writer has returned; after that every Offer
//     returns false and queued events are dropped.
//   - Encoding is the writer's work, not the producer's: an event whose
//     Payload is set is encoded when it is written, on the writer's
//     goroutine, so the producer's cost per offer is an enqueue whatever the
//     event. One Payload offered to many streams is shared by their writers
//     (it must be safe for that); it is never encoded for a stream that dies
//     before writing it.
//   - Memory is bounded: at most the queue capacity waits in the queue, plus
//     the one batch being written. An idle stream holds no wire buffer (they
//     come from a pool) and gives its queue buffer back after one heartbeat.
//
// What the writer guarantees: it writes the headers and the retry field at
// once, batches whatever is queued into one flush, writes ": keepalive" when
// idle for the heartbeat interval, and bounds every write with a deadline set
// through the ResponseWriter's SetWriteDeadline (found along Unwrap, as
// http.ResponseController finds it), so it never outlives a stalled client
// by more than the write timeout. It works the same over HTTP/1.1 and
// HTTP/2; over HTTP/2 no deadline is left pending between writes, since one
// would reset the stream.
//
// Streams served with a shared [Pool] are written by its few workers instead
// of a goroutine each: a stream with something to write joins the pool's
// ready list, and a worker writes its whole queue in one turn, so a change
// offered to thousands of streams wakes no goroutine per stream, and with
// thousands of busy streams each write carries every event since the
// stream's last turn. A worker stuck on a stalled client stops counting
// after the pool's MaxHold and another takes its place. The pool changes
// which goroutine writes a stream and when, never what or in which order;
// every guarantee above holds with it (the package's tests run once with a
// pool for every stream: MUSTER_SSE_POOL=1).
package sse
