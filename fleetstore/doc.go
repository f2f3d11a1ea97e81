// Package fleetstore owns a fleet's desired set: one durable spec per unit of
// work, the answer to "what should be running?". It holds the store geometry,
// the numbering, the validate-or-drop sweep, and the pure difference between
// the desired set and the live set (Plan).
//
// # Geometry
//
// Everything is per family (the tenant boundary, an opaque string) and per
// root (one or more legal segments joined by "/", the application's own
// constant). Under a root the store holds
//
//	<root>/specs/<name>   one row per unit of work: the spec exactly as given
//	<root>/next_id        the name counter, beside the specs, not among them
//
// Two roots never touch, even when one is a prefix of the other ("a" and
// "a/specs" are unrelated), and two families never touch.
//
// # Names
//
// A legal segment is one or more of a-z, 0-9, '-' and '_'. A kind is one
// legal segment; Register mints "<kind>-<n>" from the root's single counter,
// so the kinds of one root share one sequence (repo-1, reminder-2, repo-3).
// A name is never reused, not after Forget, not across restarts.
//
// # What a caller may rely on
//
//   - Register mints the number and writes the spec in one transaction: when
//     it returns a name, the spec is durable (bbolt fsyncs the commit;
//     PostgreSQL commits before answering, durable with its default
//     synchronous_commit = on). Concurrent Register calls, from
//     one process or, on PostgreSQL, from several, never mint the same name.
//   - Specs are stored and returned byte for byte as given.
//   - Forget is the only way a spec leaves the store, apart from Sweep dropping
//     a spec it validated and found failing. An illegal name is refused
//     (CodeInvalidName) and nothing is deleted; its lower-case spelling is not
//     tried. Forgetting a name that is not there succeeds.
//   - Desired lists in name order, which is byte order ("repo-10" sorts before
//     "repo-2"), and pages strictly after a given name. Pages are not a
//     snapshot: a spec registered or forgotten between two pages may or may not
//     appear, but a spec present for the whole listing appears exactly once.
//   - Sweep visits every spec present when it starts and deletes exactly the
//     specs it validated and found failing, each only while it is stored with
//     the very bytes validated (compare-and-delete, Store.Drop). A spec
//     registered while a sweep runs is either validated by it or left alone.
//     Any failure (the store, a cut connection, a read that returned other
//     bytes than those stored, the client leaving) stops the sweep with an
//     error and deletes nothing more.
//   - Plan is pure and has no effects.
//   - Errors are *muster.Error values (or wrap one, see BackendError), so the
//     HTTP layer maps muster.ErrorCode(err) directly.
//
// The bbolt backend (the default) is one file in the data directory that one
// process at a time may open. The PostgreSQL backend lets several brokers share
// one desired set; it creates or migrates its schema when opened.
package fleetstore
