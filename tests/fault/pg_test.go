package fault

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/musterhq/muster/tests/pgtest"
)

// startPrivatePG starts the campaign's own PostgreSQL server (stopping it
// cannot disturb the server the other test packages share); nil when
// MUSTER_TEST_PG=off, and the campaign then runs on bbolt.
func startPrivatePG(t *testing.T) *pgtest.Private {
	t.Helper()
	p := pgtest.StartPrivate(t)
	if p == nil {
		t.Log("MUSTER_TEST_PG=off: the campaign runs on bbolt and injects no PostgreSQL faults")
	}
	return p
}

// cutBroker terminates every connection of the broker (application_name
// muster) to the server at url, and returns how many it cut.
func cutBroker(t *testing.T, url string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var n int
	if err := c.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'muster'`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
