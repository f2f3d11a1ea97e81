package fleetstore

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/puddle/v2"
)

// DefaultPostgresConnectTimeout bounds each connection attempt unless the URL's
// connect_timeout parameter says otherwise.
const DefaultPostgresConnectTimeout = 10 * time.Second

// DefaultPostgresConns is the connection limit of a PostgreSQL store unless
// the URL's pool_max_conns parameter (pgxpool's spelling) says otherwise.
const DefaultPostgresConns = 8

// The schema. Names are compared in the "C" collation, so ORDER BY and ">"
// are byte order on every server whatever its locale. Specs are bytea: json
// would keep the text but not guarantee it byte for byte across encodings,
// and jsonb rewrites it.
const (
	pgVersionTable = "muster_schema_version"
	pgComponent    = "fleetstore"
	// pgMigrateLock is the pg_advisory_xact_lock key serializing migrations of
	// brokers starting together (an arbitrary constant: "fleetsto" in ASCII).
	pgMigrateLock = 0x666c65657473746f
)

// pgMigrations[i] takes the schema from version i to version i+1. Append only.
var pgMigrations = [][]string{
	{
		`CREATE TABLE muster_fleet_counters (
			family  text COLLATE "C" NOT NULL,
			root    text COLLATE "C" NOT NULL,
			next_id bigint NOT NULL CHECK (next_id > 0),
			PRIMARY KEY (family, root))`,
		`CREATE TABLE muster_fleet_specs (
			family text COLLATE "C" NOT NULL,
			root   text COLLATE "C" NOT NULL,
			name   text COLLATE "C" NOT NULL,
			spec   bytea NOT NULL,
			PRIMARY KEY (family, root, name))`,
	},
}

// pgRegister is Register's critical section in one statement: bump (or create
// at 2) the root's counter under its row lock, and insert the spec under the
// number it had. The counter row lock serializes concurrent registers of one
// root across every broker sharing the database.
//
// pgRegisterMax is the same with the root's quota ($5): the spec is stored
// only while the root holds fewer rows. The count reads the statement's
// snapshot, so registers racing on other connections may pass the quota by
// at most their number. A refused register still consumes a number (names
// may have gaps; they are never reused).
const pgRegisterMax = `
WITH c AS (
	INSERT INTO muster_fleet_counters AS t (family, root, next_id)
	VALUES ($1::text, $2::text, 2)
	ON CONFLICT (family, root) DO UPDATE SET next_id = t.next_id + 1
	RETURNING t.next_id - 1 AS n
)
INSERT INTO muster_fleet_specs (family, root, name, spec)
SELECT $1::text, $2::text, $3::text || '-' || c.n::text, $4::bytea FROM c
WHERE (SELECT count(*) FROM muster_fleet_specs WHERE family = $1::text AND root = $2::text) < $5::bigint
RETURNING name`

const pgRegister = `
WITH c AS (
	INSERT INTO muster_fleet_counters AS t (family, root, next_id)
	VALUES ($1::text, $2::text, 2)
	ON CONFLICT (family, root) DO UPDATE SET next_id = t.next_id + 1
	RETURNING t.next_id - 1 AS n
)
INSERT INTO muster_fleet_specs (family, root, name, spec)
SELECT $1::text, $2::text, $3::text || '-' || c.n::text, $4::bytea FROM c
RETURNING name`

type pgStore struct {
	pool *connPool
}

// OpenPostgres connects to the PostgreSQL database at connURL
// (postgres://… or postgresql://…) and creates or migrates the schema, which
// several brokers may do at once. The optional pool_max_conns query parameter
// bounds the connections (DefaultPostgresConns), connect_timeout each attempt
// to connect (DefaultPostgresConnectTimeout). A database whose schema is
// newer than this broker knows is refused.
func OpenPostgres(ctx context.Context, connURL string) (Store, error) {
	cfg, err := pgConfig(connURL)
	if err != nil {
		return nil, err
	}
	p, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, backendErr("open", fmt.Errorf("postgres pool: %w", err), false)
	}
	s := &pgStore{pool: &connPool{p: p}}
	if err := s.pool.inTx(ctx, func(tx pgx.Tx) error { return migrate(ctx, tx) }); err != nil {
		s.pool.close()
		return nil, pgErr("open", err)
	}
	return s, nil
}

// pgConfig parses the URL with pgxpool's parser, which takes the pool_*
// parameters out of it.
func pgConfig(connURL string) (*pgxpool.Config, error) {
	bad := func(why string) error {
		return fmt.Errorf("postgres store URL %s", why) // never echo the URL: it may hold a password
	}
	u, err := url.Parse(connURL)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return nil, backendErr("open", bad("is not a postgres:// URL"), false)
	}
	// pool_max_conns is checked here, not read back from pgxpool's error
	// text: a positive integer, DefaultPostgresConns when absent.
	q := u.Query()
	if !q.Has("pool_max_conns") {
		q.Set("pool_max_conns", strconv.Itoa(DefaultPostgresConns))
		u.RawQuery = q.Encode()
	} else if n, err := strconv.ParseInt(q.Get("pool_max_conns"), 10, 32); err != nil || n < 1 {
		return nil, backendErr("open", bad("has a bad pool_max_conns"), false)
	}
	cfg, err := pgxpool.ParseConfig(u.String())
	if err != nil {
		return nil, backendErr("open", bad("cannot be parsed"), false)
	}
	cfg.ShouldPing = shouldPing
	cc := cfg.ConnConfig
	if cc.ConnectTimeout == 0 {
		cc.ConnectTimeout = DefaultPostgresConnectTimeout
	}
	if _, ok := cc.RuntimeParams["application_name"]; !ok {
		cc.RuntimeParams["application_name"] = "muster"
	}
	return cfg, nil
}

// migrate creates or migrates the schema inside tx, under an advisory lock
// so that brokers starting together take turns.
func migrate(ctx context.Context, tx pgx.Tx) error {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(pgMigrateLock)); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+pgVersionTable+` (
		component text PRIMARY KEY,
		version   integer NOT NULL)`); err != nil {
		return err
	}
	var have int
	err := tx.QueryRow(ctx, `SELECT version FROM `+pgVersionTable+` WHERE component = $1`,
		pgComponent).Scan(&have)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return err
	}
	if have > len(pgMigrations) {
		return fmt.Errorf("database schema of %s is version %d; this broker knows up to %d",
			pgComponent, have, len(pgMigrations))
	}
	for _, step := range pgMigrations[have:] {
		for _, stmt := range step {
			if _, err := tx.Exec(ctx, stmt); err != nil {
				return err
			}
		}
	}
	_, err = tx.Exec(ctx, `INSERT INTO `+pgVersionTable+` (component, version) VALUES ($1, $2)
		ON CONFLICT (component) DO UPDATE SET version = EXCLUDED.version`,
		pgComponent, len(pgMigrations))
	return err
}

func (s *pgStore) Register(ctx context.Context, family, root, kind string, spec []byte, max int) (string, error) {
	var name string
	err := s.pool.with(ctx, func(c *pgx.Conn) error {
		if max > 0 {
			return c.QueryRow(ctx, pgRegisterMax, family, root, kind, spec, max).Scan(&name)
		}
		return c.QueryRow(ctx, pgRegister, family, root, kind, spec).Scan(&name)
	})
	if max > 0 && errors.Is(err, pgx.ErrNoRows) {
		return "", errSpecLimit(max)
	}
	if err != nil {
		return "", pgErr("register", err)
	}
	return name, nil
}

func (s *pgStore) Get(ctx context.Context, family, root, name string) (Row, error) {
	var spec []byte
	err := s.pool.with(ctx, func(c *pgx.Conn) error {
		return c.QueryRow(ctx, `SELECT spec FROM muster_fleet_specs
			WHERE family = $1 AND root = $2 AND name = $3`, family, root, name).Scan(&spec)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return Row{}, errSpecNotFound()
	}
	if err != nil {
		return Row{}, pgErr("read", err)
	}
	return Row{Name: name, Spec: spec}, nil
}

func (s *pgStore) Forget(ctx context.Context, family, root string, names ...string) error {
	if len(names) == 0 {
		return nil
	}
	err := s.pool.with(ctx, func(c *pgx.Conn) error {
		_, err := c.Exec(ctx, `DELETE FROM muster_fleet_specs
			WHERE family = $1 AND root = $2 AND name = ANY($3::text[])`, family, root, names)
		return err
	})
	return pgErr("forget", err)
}

// pgDrop deletes the judged rows stored with the judged bytes, compared by
// SHA-256 (so a page of judged specs, up to MaxPageSize × MaxSpecBytes,
// need not travel back to the server); each row is compared and deleted
// under the row lock the DELETE takes. The "name = ANY" lets the primary
// key find the rows.
const pgDrop = `
DELETE FROM muster_fleet_specs s
USING unnest($3::text[], $4::bytea[]) AS j(name, digest)
WHERE s.family = $1 AND s.root = $2 AND s.name = ANY($3::text[])
	AND s.name = j.name AND sha256(s.spec) = j.digest
RETURNING s.name`

// Drop deletes what matches, then, in the same transaction and only if some
// judged name was not deleted, looks for it: a name still stored was stored
// with other bytes (names are never reused), and the transaction is rolled
// back; a name gone was forgotten meanwhile.
func (s *pgStore) Drop(ctx context.Context, family, root string, judged []Row) ([]string, error) {
	dropped := []string{}
	if len(judged) == 0 {
		return dropped, nil
	}
	names := make([]string, len(judged))
	digests := make([][]byte, len(judged))
	for i, r := range judged {
		d := sha256.Sum256(r.Spec)
		names[i], digests[i] = r.Name, d[:]
	}
	err := s.pool.inTx(ctx, func(tx pgx.Tx) error {
		deleted, err := queryNames(ctx, tx, pgDrop, family, root, names, digests)
		if err != nil {
			return err
		}
		var rest []string
		for _, n := range names {
			if !deleted[n] {
				rest = append(rest, n)
			}
		}
		if len(rest) > 0 {
			var changed int
			if err := tx.QueryRow(ctx, `SELECT count(*) FROM muster_fleet_specs
				WHERE family = $1 AND root = $2 AND name = ANY($3::text[])`, family, root, rest).Scan(&changed); err != nil {
				return err
			}
			if changed > 0 {
				return ErrSpecChanged
			}
		}
		del := []string{}
		for _, n := range names {
			if deleted[n] {
				del = append(del, n)
			}
		}
		dropped = del
		return nil
	})
	if err != nil {
		return nil, pgErr("sweep", err)
	}
	return dropped, nil
}

// Names is Desired without the specs.
func (s *pgStore) Names(ctx context.Context, family, root, after string, limit int) ([]string, bool, error) {
	var name string
	return pgPage(ctx, s, "name", family, root, after, limit, []any{&name}, func() string { return name })
}

func (s *pgStore) Desired(ctx context.Context, family, root, after string, limit int) ([]Row, bool, error) {
	var name string
	var spec []byte // pgx copies bytea into a fresh slice on every scan
	return pgPage(ctx, s, "name, spec", family, root, after, limit, []any{&name, &spec},
		func() Row { return Row{Name: name, Spec: spec} })
}

// pgPage reads the columns cols of at most limit spec rows after the name
// after, in name order, scanning each into dst and keeping take(); more says
// that rows remain past the last one kept.
func pgPage[T any](ctx context.Context, s *pgStore, cols, family, root, after string, limit int, dst []any, take func() T) ([]T, bool, error) {
	out := make([]T, 0, min(limit, DefaultPageSize))
	err := s.pool.with(ctx, func(c *pgx.Conn) error {
		out = out[:0]
		r, err := c.Query(ctx, `SELECT `+cols+` FROM muster_fleet_specs
			WHERE family = $1 AND root = $2 AND name > $3
			ORDER BY name LIMIT $4`, family, root, after, limit+1)
		if err != nil {
			return err
		}
		_, err = pgx.ForEachRow(r, dst, func() error {
			out = append(out, take())
			return nil
		})
		return err
	})
	if err != nil {
		return nil, false, pgErr("list", err)
	}
	more := len(out) > limit
	if more {
		out = out[:limit]
	}
	return out, more, nil
}

func (s *pgStore) Close() error {
	s.pool.close()
	return nil
}

// pgErr wraps a PostgreSQL failure, telling transient ones (no connection,
// server shutting down or out of resources, a cancelled call) from the rest.
func pgErr(op string, err error) error {
	if err == nil {
		return nil
	}
	return backendErr(op, err, pgTransient(err))
}

func pgTransient(err error) bool {
	var fe finalErr
	if errors.As(err, &fe) && fe.lost {
		return true
	}
	var pge *pgconn.PgError
	if errors.As(err, &pge) {
		return strings.HasPrefix(pge.Code, "08") || // connection exception
			strings.HasPrefix(pge.Code, "53") || // insufficient resources
			strings.HasPrefix(pge.Code, "57P") || // operator intervention: shutdown, cannot connect now
			pge.Code == "40001" || pge.Code == "40P01" // serialization failure, deadlock
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	return errors.As(err, &ce) || errors.As(err, &ne) || pgconn.Timeout(err) ||
		pgconn.SafeToRetry(err) || errors.Is(err, puddle.ErrClosedPool) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// queryNames runs a statement that returns one name a row, and answers the
// set of them.
func queryNames(ctx context.Context, tx pgx.Tx, sql string, args ...any) (map[string]bool, error) {
	rows, err := tx.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	var name string
	_, err = pgx.ForEachRow(rows, []any{&name}, func() error {
		out[name] = true
		return nil
	})
	return out, err
}
