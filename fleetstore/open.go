package fleetstore

import (
	"context"
	"path/filepath"
	"strings"

	"github.com/musterhq/muster"
)

// Open picks the backend the way `muster serve --store` does: an empty
// storeURL is the bbolt file BoltFileName in dataDir (the default, no set-up);
// postgres://… or postgresql://… is a PostgreSQL database. Anything else is
// CodeInvalidRequest.
func Open(ctx context.Context, dataDir, storeURL string) (Store, error) {
	switch {
	case storeURL == "":
		return OpenBolt(filepath.Join(dataDir, BoltFileName), nil)
	case strings.HasPrefix(storeURL, "postgres://"), strings.HasPrefix(storeURL, "postgresql://"):
		return OpenPostgres(ctx, storeURL)
	default:
		return nil, muster.Errorf(muster.CodeInvalidRequest,
			"store must be empty (bbolt in the data directory) or a postgres:// URL")
	}
}
