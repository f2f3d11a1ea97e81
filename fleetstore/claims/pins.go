package claims

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// Pin records that family should be served by broker (a manual move),
// for every broker of the deployment to read (Pins); broker "" removes the
// pin. A pin is a wish: the brokers honour it while that broker is live.
func (s *Store) Pin(ctx context.Context, family, broker string) error {
	if broker == "" {
		_, err := s.pool.Exec(ctx, `DELETE FROM muster_placement_pins WHERE family = $1`, family)
		return err
	}
	_, err := s.pool.Exec(ctx, `
		INSERT INTO muster_placement_pins (family, broker) VALUES ($1, $2)
		ON CONFLICT (family) DO UPDATE SET broker = EXCLUDED.broker`, family, broker)
	return err
}

// Pins reads every pin, by family.
func (s *Store) Pins(ctx context.Context) (map[string]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT family, broker FROM muster_placement_pins`)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	var fam, broker string
	_, err = pgx.ForEachRow(rows, []any{&fam, &broker}, func() error {
		out[fam] = broker
		return nil
	})
	return out, err
}
