package claims

import (
	"context"
	"errors"
	"fmt"
	"net/url"

	"github.com/jackc/pgx/v5"
)

// The schema shares fleetstore's version table under a component of its
// own. Names compare in the "C" collation (byte order on every server).
const (
	versionTable = "muster_schema_version"
	component    = "placement"
	// migrateLock is the pg_advisory_xact_lock key serializing migrations of
	// brokers starting together ("placemnt" in ASCII).
	migrateLock = 0x706c6163656d6e74
)

// migrations[i] takes the schema from version i to version i+1. Append only.
var migrations = [][]string{
	{
		`CREATE TABLE muster_placement (
			family     text COLLATE "C" PRIMARY KEY,
			owner      text COLLATE "C" NOT NULL,
			addr       text NOT NULL,
			epoch      bigint NOT NULL CHECK (epoch > 0),
			expires_at timestamptz NOT NULL,
			released   boolean NOT NULL)`,
		`CREATE TABLE muster_brokers (
			broker     text COLLATE "C" PRIMARY KEY,
			addr       text NOT NULL,
			expires_at timestamptz NOT NULL)`,
	},
	{
		// A planned move's handover (Store.Handover): the family's state,
		// written with the release of the claim of handover_epoch, for the
		// next acquisition only.
		`ALTER TABLE muster_placement
			ADD COLUMN handover       bytea,
			ADD COLUMN handover_epoch bigint,
			ADD COLUMN handover_to    text COLLATE "C",
			ADD COLUMN handover_at    timestamptz`,
	},
	{
		// Families pinned to a broker at run time (Store.Pin).
		`CREATE TABLE muster_placement_pins (
			family text COLLATE "C" PRIMARY KEY,
			broker text COLLATE "C" NOT NULL)`,
	},
}

func migrate(ctx context.Context, c *pgx.Conn) error {
	return pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(migrateLock)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+versionTable+` (
			component text PRIMARY KEY,
			version   integer NOT NULL)`); err != nil {
			return err
		}
		var have int
		err := tx.QueryRow(ctx, `SELECT version FROM `+versionTable+` WHERE component = $1`, component).Scan(&have)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if have > len(migrations) {
			return fmt.Errorf("database schema of %s is version %d; this broker knows up to %d", component, have, len(migrations))
		}
		for _, step := range migrations[have:] {
			for _, stmt := range step {
				if _, err := tx.Exec(ctx, stmt); err != nil {
					return err
				}
			}
		}
		_, err = tx.Exec(ctx, `INSERT INTO `+versionTable+` (component, version) VALUES ($1, $2)
			ON CONFLICT (component) DO UPDATE SET version = EXCLUDED.version`, component, len(migrations))
		return err
	})
}

// hasParam reports whether the URL sets query parameter name.
func hasParam(connURL, name string) bool {
	u, err := url.Parse(connURL)
	return err == nil && u.Query().Has(name)
}
