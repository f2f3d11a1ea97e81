package app

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/musterhq/muster/fleetstore"
)

// RegisterStoreFlags defines the flags that name the fleet store, as
// `muster serve` reads them, for the tools that open it themselves
// (`muster fleet export|import`, `muster backup`).
func (m *Main) RegisterStoreFlags(fs *flag.FlagSet) {
	fs.StringVar(&m.DataDir, "data-dir", m.DataDir, "the broker's data `DIR` (the bbolt store is DIR/"+fleetstore.BoltFileName+")")
	fs.StringVar(&m.StoreURL, "store", m.StoreURL, "fleet store `URL`: empty = the bbolt file in the data dir, or postgres://… (prefer --store-file or $"+EnvStore+")")
	fs.StringVar(&m.StoreFile, "store-file", m.StoreFile, "read the fleet store URL from the first line of `FILE`")
}

// ResolveStore settles the store URL from the flags and the environment
// as `muster serve` does, and reports whether it is the bbolt store.
func (m *Main) ResolveStore() (bolt bool, err error) {
	if err := m.resolveStoreURL(); err != nil {
		return false, err
	}
	return m.StoreURL == "", nil
}

// OpenOffline opens the fleet store without a broker, for export and
// import. For bbolt it takes the data directory's lock first, so it fails
// at once, naming the broker's pid, while one serves there (stop it, or
// use `muster backup`); existing says that the store must exist already
// (an export), else it is created (an import). A PostgreSQL store may be
// opened beside running brokers. close releases the store and the lock.
func (m *Main) OpenOffline(ctx context.Context, existing bool) (f *fleetstore.Fleet, close func() error, err error) {
	bolt, err := m.ResolveStore()
	if err != nil {
		return nil, nil, err
	}
	unlock := func() {}
	if bolt {
		path := filepath.Join(m.DataDir, fleetstore.BoltFileName)
		if existing {
			if _, err := os.Stat(path); err != nil {
				return nil, nil, fmt.Errorf("no fleet store at %s: %w", path, err)
			}
		} else if err := os.MkdirAll(m.DataDir, 0o750); err != nil {
			return nil, nil, fmt.Errorf("data dir: %w", err)
		}
		if unlock, err = lockDataDir(m.DataDir); err != nil {
			return nil, nil, err
		}
	}
	ctx, cancel := context.WithTimeout(ctx, StoreOpenTimeout)
	defer cancel()
	store, err := fleetstore.Open(ctx, m.DataDir, m.StoreURL)
	if err != nil {
		unlock()
		return nil, nil, fmt.Errorf("fleet store: %w", err)
	}
	f = fleetstore.New(store)
	return f, func() error {
		err := f.Close()
		unlock()
		return err
	}, nil
}
