package app

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

// EnvStore names the fleet store's URL in the environment: what --store
// says, kept out of the process's arguments (which every user of the host
// can read in ps). A PostgreSQL URL holds its password.
const EnvStore = "MUSTER_STORE"

// resolveStoreURL settles StoreURL before anything is opened: --store as
// given; else the first line of --store-file (mode 0600 or stricter is the
// operator's business: the broker only reads it); else $MUSTER_STORE; else
// "" (the bbolt file in the data directory). --store with --store-file is
// an error: one source for a secret.
func (m *Main) resolveStoreURL() error {
	switch {
	case m.StoreURL != "" && m.StoreFile != "":
		return errors.New("--store and --store-file both name the fleet store: give one")
	case m.StoreURL != "":
		return nil
	case m.StoreFile != "":
		b, err := os.ReadFile(m.StoreFile)
		if err != nil {
			return fmt.Errorf("--store-file: %w", err)
		}
		line, _, _ := strings.Cut(string(b), "\n")
		if m.StoreURL = strings.TrimSpace(line); m.StoreURL == "" {
			return fmt.Errorf("--store-file %s: the first line is empty", m.StoreFile)
		}
		return nil
	}
	m.StoreURL = os.Getenv(EnvStore)
	return nil
}
