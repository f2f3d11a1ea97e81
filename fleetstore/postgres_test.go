package fleetstore

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/musterhq/muster"
)

// Tests of the PostgreSQL backend's own promises; the shared behaviour is in
// the conformance suite.

func pgConnect(tb testing.TB, u string) *pgx.Conn {
	tb.Helper()
	c, err := pgx.Connect(context.Background(), u)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

func TestPostgresMigratesOnce(t *testing.T) {
	u := MustPostgresSchema(t)
	f := New(MustOpenPostgresURL(t, u))
	mustRegister(t, f, fam, root, "repo", `{"kept":"across opens"}`)
	_ = MustOpenPostgresURL(t, u) // a second broker, or a restart

	c := pgConnect(t, u)
	var version, rows int
	must(t, c.QueryRow(ctx, `SELECT version, (SELECT count(*) FROM muster_schema_version)
		FROM muster_schema_version WHERE component = 'fleetstore'`).Scan(&version, &rows))
	if version != len(pgMigrations) || rows != 1 {
		t.Fatalf("schema version %d in %d rows, want %d in 1", version, rows, len(pgMigrations))
	}
	if _, err := f.Get(ctx, fam, root, "repo-1"); err != nil {
		t.Fatalf("spec lost across a second open: %v", err)
	}
}

// TestPostgresConcurrentOpen: brokers starting together on an empty database
// all succeed, one of them creating the schema.
func TestPostgresConcurrentOpen(t *testing.T) {
	u := MustPostgresSchema(t)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			s, err := OpenPostgres(ctx, u)
			if err != nil {
				t.Error(err)
				return
			}
			_ = s.Close()
		})
	}
	wg.Wait()
}

func TestPostgresRefusesNewerSchema(t *testing.T) {
	u := MustPostgresSchema(t)
	_ = MustOpenPostgresURL(t, u)
	_, err := pgConnect(t, u).Exec(ctx, `UPDATE muster_schema_version SET version = 99 WHERE component = 'fleetstore'`)
	must(t, err)
	s, err := OpenPostgres(ctx, u)
	if err == nil {
		_ = s.Close()
	}
	wantCode(t, err, muster.CodeInternal)
}

// TestPostgresGeometry pins the tables: specs as bytea (never jsonb, which
// rewrites), the counter in its own row per family and root.
func TestPostgresGeometry(t *testing.T) {
	u := MustPostgresSchema(t)
	f := New(MustOpenPostgresURL(t, u))
	spec := ` {"b" : 1, "a":[ 1.0 ]} `
	mustRegister(t, f, "acme", "inst-7/monitors", "repo", spec)
	mustRegister(t, f, "acme", "inst-7/monitors", "repo", `2`)
	c := pgConnect(t, u)

	var typ string
	must(t, c.QueryRow(ctx, `SELECT data_type FROM information_schema.columns
		WHERE table_schema = current_schema() AND table_name = 'muster_fleet_specs' AND column_name = 'spec'`).Scan(&typ))
	if typ != "bytea" {
		t.Errorf("spec column is %s, want bytea", typ)
	}
	var next int64
	must(t, c.QueryRow(ctx, `SELECT next_id FROM muster_fleet_counters
		WHERE family = 'acme' AND root = 'inst-7/monitors'`).Scan(&next))
	if next != 3 {
		t.Errorf("next_id = %d, want 3", next)
	}
	var stored []byte
	must(t, c.QueryRow(ctx, `SELECT spec FROM muster_fleet_specs WHERE name = 'repo-1'`).Scan(&stored))
	if string(stored) != spec {
		t.Errorf("stored %q, want %q", stored, spec)
	}
}

func TestPostgresPoolMaxConns(t *testing.T) {
	u := MustPostgresSchema(t)
	f := New(MustOpenPostgresURL(t, u+"&pool_max_conns=1"))
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			if _, err := f.Register(ctx, fam, root, "one", []byte(`{}`)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if got := len(listAll(t, f, fam, root, 0)); got != 16 {
		t.Fatalf("%d rows through one connection, want 16", got)
	}
	for _, bad := range []string{"&pool_max_conns=0", "&pool_max_conns=x", "&pool_max_conns=-3"} {
		s, err := OpenPostgres(ctx, u+bad)
		if err == nil {
			_ = s.Close()
			t.Errorf("OpenPostgres(%s) succeeded", bad)
		} else if !strings.Contains(err.Error(), "has a bad pool_max_conns") {
			t.Errorf("OpenPostgres(%s): %v, want the refusal to name pool_max_conns", bad, err)
		}
	}
}

// TestPostgresPoolBound: concurrent calls never hold more server connections
// than pool_max_conns (or DefaultPostgresConns without it). The pool keeps the
// connections it opened, so counting them after the burst bounds the peak.
func TestPostgresPoolBound(t *testing.T) {
	for _, tc := range []struct {
		param string
		max   int
	}{{"&pool_max_conns=2", 2}, {"", DefaultPostgresConns}} {
		app := "muster_test_" + randomHex(t, 6)
		f := New(MustOpenPostgresURL(t, MustPostgresSchema(t)+tc.param+"&application_name="+app))
		var wg sync.WaitGroup
		for range 4 * tc.max {
			wg.Go(func() {
				for range 8 {
					if _, err := f.Register(ctx, fam, root, "repo", []byte(`{}`)); err != nil {
						t.Error(err)
					}
				}
			})
		}
		wg.Wait()
		var n int
		must(t, pgConnect(t, PostgresURL(t)).QueryRow(ctx,
			`SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&n))
		if n < 1 || n > tc.max {
			t.Errorf("%q: %d server connections after the burst, want 1..%d", tc.param, n, tc.max)
		}
	}
}

// TestPostgresReconnects: connections killed by the server (a restart, an
// administrator) cost a reconnect, not a failed call, once they sat idle.
func TestPostgresReconnects(t *testing.T) {
	app := "muster_test_" + randomHex(t, 6) // terminate this test's connections only
	f := New(MustOpenPostgresURL(t, MustPostgresSchema(t)+"&application_name="+app))
	mustRegister(t, f, fam, root, "repo", `1`)
	tag, err := pgConnect(t, PostgresURL(t)).Exec(ctx, `SELECT pg_terminate_backend(pid)
		FROM pg_stat_activity WHERE application_name = $1`, app)
	must(t, err)
	if tag.RowsAffected() == 0 {
		t.Fatal("found no connection to terminate")
	}
	time.Sleep(pingAfter + 100*time.Millisecond)
	if _, err := f.Register(ctx, fam, root, "repo", []byte(`2`)); err != nil {
		t.Fatalf("Register after the server dropped the idle connection: %v", err)
	}
}

func TestPostgresCancelled(t *testing.T) {
	f := New(MustOpenPostgres(t))
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err := f.Register(cctx, fam, root, "repo", []byte(`{}`))
	wantCode(t, err, muster.CodeUnavailable)
	if got := mustRegister(t, f, fam, root, "repo", `{}`); got != "repo-1" {
		t.Fatalf("after a cancelled Register: %s, want repo-1 (nothing spent)", got)
	}
}
