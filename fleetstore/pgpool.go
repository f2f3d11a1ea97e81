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

// close closes the pool; it waits for the connections in use to be released.
func (p *connPool) close() { p.p.Close() }
