package fleetstore

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// connPool is a small bounded pool of pgx connections. pgxpool would do, but
// it needs github.com/jackc/puddle/v2, which is not in go.mod; this covers what
// the store needs: at most max connections, idle reuse, a ping before reusing
// a connection that sat idle, and one retry of a call that never reached the
// server.
type connPool struct {
	cfg   *pgx.ConnConfig
	slots chan struct{} // a token per connection that exists or is being dialled

	mu     sync.Mutex
	idle   []idleConn
	closed bool
}

type idleConn struct {
	c     *pgx.Conn
	since time.Time
}

// pingAfter is how long a connection may sit idle before it is pinged on
// reuse, so a server restart costs a reconnect rather than a failed call.
const pingAfter = time.Second

var errPoolClosed = errors.New("postgres connection pool is closed")

func newConnPool(cfg *pgx.ConnConfig, maxConns int) *connPool {
	return &connPool{cfg: cfg, slots: make(chan struct{}, maxConns)}
}

// with runs fn on a pooled connection. fn must leave the connection outside
// any transaction; a connection that is closed or inside one afterwards is
// dropped. A failure that pgconn marks as safe to retry (nothing reached the
// server) is retried once on another connection.
func (p *connPool) with(ctx context.Context, fn func(*pgx.Conn) error) error {
	for attempt := 0; ; attempt++ {
		c, err := p.acquire(ctx)
		if err != nil {
			return err
		}
		err = fn(c)
		p.release(c)
		if err != nil && attempt == 0 && pgconn.SafeToRetry(err) && ctx.Err() == nil {
			continue
		}
		return err
	}
}

func (p *connPool) acquire(ctx context.Context) (*pgx.Conn, error) {
	select {
	case p.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			<-p.slots
			return nil, errPoolClosed
		}
		n := len(p.idle)
		if n == 0 {
			p.mu.Unlock()
			break
		}
		ic := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		if time.Since(ic.since) < pingAfter || ic.c.Ping(ctx) == nil {
			return ic.c, nil
		}
		closeConn(ic.c)
	}
	c, err := pgx.ConnectConfig(ctx, p.cfg)
	if err != nil {
		<-p.slots
		return nil, err
	}
	return c, nil
}

func (p *connPool) release(c *pgx.Conn) {
	defer func() { <-p.slots }()
	if c.IsClosed() || c.PgConn().TxStatus() != 'I' {
		closeConn(c)
		return
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		closeConn(c)
		return
	}
	p.idle = append(p.idle, idleConn{c: c, since: time.Now()})
	p.mu.Unlock()
}

// close closes the idle connections; connections in use close when released.
func (p *connPool) close() {
	p.mu.Lock()
	idle := p.idle
	p.idle, p.closed = nil, true
	p.mu.Unlock()
	for _, ic := range idle {
		closeConn(ic.c)
	}
}

func closeConn(c *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = c.Close(ctx)
}
