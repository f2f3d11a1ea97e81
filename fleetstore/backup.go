package fleetstore

import (
	"errors"
	"fmt"
	"io"

	bolt "go.etcd.io/bbolt"
)

// ErrNotBolt is the refusal of Backup on a store that is not bbolt: a
// PostgreSQL store is backed up with PostgreSQL's tools (pg_dump).
var ErrNotBolt = errors.New("the fleet store is PostgreSQL: back it up with pg_dump; muster backup copies the bbolt store only")

// Backup writes a consistent copy of a bbolt store while it serves: one
// read transaction, which sees every commit before it and none after, and
// which does not stop registers (bbolt readers and its writer run
// together; a writer that must grow the file's mapping waits for the copy
// to end). start is called first with the copy's size in bytes; then
// exactly that many bytes are written to w. The copy is a bbolt file that
// OpenBolt opens as the store was at the transaction's start.
func (f *Fleet) Backup(w io.Writer, start func(size int64) error) error {
	s, ok := f.store.(*boltStore)
	if !ok {
		return ErrNotBolt
	}
	err := s.db.View(func(tx *bolt.Tx) error {
		if err := start(tx.Size()); err != nil {
			return err
		}
		_, err := tx.WriteTo(w)
		return err
	})
	return boltErr("back up", err)
}

// VerifyBolt checks that the file at path is a bbolt fleet store this
// broker can open: its layout version, and bbolt's own consistency check
// of every page. It opens the file read-only (so it must not be held by a
// running broker) and changes nothing.
func VerifyBolt(path string) error {
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: DefaultBoltTimeout})
	if err != nil {
		return err
	}
	defer db.Close()
	return db.View(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if meta == nil || tx.Bucket(bucketFleets) == nil {
			return errors.New("not a fleet store: the meta or fleets bucket is missing")
		}
		if v := meta.Get(keyFormat); string(v) != boltFormat {
			return fmt.Errorf("fleet store file has format %q, this broker knows %q", v, boltFormat)
		}
		var errs []error
		for err := range tx.Check() { // drained whole: the check runs inside tx
			if len(errs) < 10 {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	})
}
