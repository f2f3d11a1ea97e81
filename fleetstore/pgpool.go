package fleetstore

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// connPool is the store's pgxpool with one addition: a call that never reached
// the server is retried once. pgxpool itself bounds the connections
// (pool_max_conns), reuses idle ones, pings one that sat idle for pingAfter
// before handing it out (so a server restart costs a reconnect rather
// than a failed call), and destroys a connection released closed or inside a
// transaction.
type connPool struct {
	p *pgxpool.Pool
}

// pingAfter is how long a connection may sit idle before it is pinged on
// reuse, so a server restart costs a reconnect rather than a failed call.
const pingAfter = time.Second

// shouldPing is the pool's ShouldPing hook: ping a connection idle for
// pingAfter or longer.
func shouldPing(_ context.Context, p pgxpool.ShouldPingParams) bool {
	return p.IdleDuration >= pingAfter
}

// with runs fn on a pooled connection. fn must leave the connection outside
// any transaction. A failure that pgconn marks as safe to retry (nothing
// reached the server) is retried once on another connection.
func (p *connPool) with(ctx context.Context, fn func(*pgx.Conn) error) error {
	for attempt := 0; ; attempt++ {
		err := p.p.AcquireFunc(ctx, func(c *pgxpool.Conn) error { return fn(c.Conn()) })
		if err != nil && attempt == 0 && pgconn.SafeToRetry(err) && ctx.Err() == nil {
			continue
		}
		return err
	}
}

// inTx runs fn inside a transaction on a pooled connection, committing when
// fn succeeds. Only a failure to begin is retried (as with does): once BEGIN
// is answered, a failure is final. pgx reports a connection lost while
// reading the answer to a simple-protocol statement (COMMIT included) as a
// "conn closed" error that pgconn.SafeToRetry calls safe, though the
// statement reached the server and a COMMIT may have taken effect;
// retrying the transaction would then run it again on a state it already
// changed.
func (p *connPool) inTx(ctx context.Context, fn func(pgx.Tx) error) error {
	return p.with(ctx, func(c *pgx.Conn) error {
		tx, err := c.Begin(ctx)
		if err != nil {
			return err
		}
		if err := fn(tx); err != nil {
			_ = tx.Rollback(ctx) // the connection is destroyed if this fails
			return finalErr{err, c.IsClosed()}
		}
		if err := tx.Commit(ctx); err != nil {
			return finalErr{err, c.IsClosed()}
		}
		return nil
	})
}

// finalErr is a failure that must not be retried, whatever its cause says;
// lost says that the connection was lost with it (a transient failure).
type finalErr struct {
	error
	lost bool
}

func (e finalErr) Unwrap() error     { return e.error }
func (e finalErr) SafeToRetry() bool { return false }

// close closes the pool; it waits for the connections in use to be released.
func (p *connPool) close() { p.p.Close() }
