package app

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// secretFile holds the master secret that per-epoch cursor keys derive
// from. It outlives restarts so that a cursor of an earlier broker lifetime
// is answered `epoch_changed` rather than taken for a forgery.
const secretFile = "cursor.key"

// loadSecret reads the data directory's master secret, creating it (32
// random bytes, mode 0600) on first start.
func loadSecret(dataDir string) ([]byte, error) {
	path := filepath.Join(dataDir, secretFile)
	b, err := os.ReadFile(path)
	if err == nil {
		if len(b) != 32 {
			return nil, fmt.Errorf("%s: expected 32 bytes, found %d", path, len(b))
		}
		return b, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	b = randomBytes(32)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, path); err != nil {
		return nil, err
	}
	return b, nil
}
