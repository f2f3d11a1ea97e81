package fleetstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/musterhq/muster"
	berrors "go.etcd.io/bbolt/errors"
)

// BoltFileName is the bbolt file Open uses inside the data directory.
const BoltFileName = "fleet.db"

// DefaultBoltTimeout is how long OpenBolt waits for the file lock by default.
// Another process holding the file makes OpenBolt fail after it, instead of
// blocking forever.
const DefaultBoltTimeout = 2 * time.Second

// boltFormat is the layout version recorded in the meta bucket.
const boltFormat = "1"

// Top-level buckets. A root bucket sits at fleets/<family>/<root>, keyed by
// the whole root ("a/b" is one key), so no root can collide with another
// root's SpecsBucket or CounterKey.
var (
	bucketMeta   = []byte("meta")
	bucketFleets = []byte("fleets")
	keyFormat    = []byte("format")
)

// BoltOptions tunes OpenBolt. The zero value is the default.
type BoltOptions struct {
	// Timeout is how long to wait for the file lock; 0 means
	// DefaultBoltTimeout.
	Timeout time.Duration
}

type boltStore struct {
	db *bolt.DB
}

// OpenBolt opens (creating it and its directory if needed) the bbolt file at
// path. Every commit is fsynced before the call that made it returns. Only
// one process may hold the file: a second OpenBolt fails with
// CodeUnavailable once the timeout has passed.
func OpenBolt(path string, opts *BoltOptions) (Store, error) {
	timeout := DefaultBoltTimeout
	if opts != nil && opts.Timeout > 0 {
		timeout = opts.Timeout
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, backendErr("open", err, false)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: timeout})
	if err != nil {
		return nil, backendErr("open", err, errors.Is(err, berrors.ErrTimeout))
	}
	if err := db.Update(initBolt); err != nil {
		_ = db.Close()
		return nil, backendErr("open", err, false)
	}
	return &boltStore{db: db}, nil
}

func initBolt(tx *bolt.Tx) error {
	meta, err := tx.CreateBucketIfNotExists(bucketMeta)
	if err != nil {
		return err
	}
	switch v := meta.Get(keyFormat); {
	case v == nil:
		if err := meta.Put(keyFormat, []byte(boltFormat)); err != nil {
			return err
		}
	case string(v) != boltFormat:
		return fmt.Errorf("fleet store file has format %q, this broker knows %q", v, boltFormat)
	}
	_, err = tx.CreateBucketIfNotExists(bucketFleets)
	return err
}

// rootBucket finds (or, when create is set, creates) fleets/<family>/<root>.
// It returns nil when the root was never written.
func rootBucket(tx *bolt.Tx, family, root string, create bool) (*bolt.Bucket, error) {
	fleets := tx.Bucket(bucketFleets)
	if fleets == nil {
		return nil, errors.New("fleet store file lacks its fleets bucket")
	}
	if !create {
		fb := fleets.Bucket([]byte(family))
		if fb == nil {
			return nil, nil
		}
		return fb.Bucket([]byte(root)), nil
	}
	fb, err := fleets.CreateBucketIfNotExists([]byte(family))
	if err != nil {
		return nil, err
	}
	return fb.CreateBucketIfNotExists([]byte(root))
}

// specsBucket is rootBucket's SpecsBucket, or nil.
func specsBucket(tx *bolt.Tx, family, root string) (*bolt.Bucket, error) {
	rb, err := rootBucket(tx, family, root, false)
	if rb == nil || err != nil {
		return nil, err
	}
	return rb.Bucket([]byte(SpecsBucket)), nil
}

func (s *boltStore) Register(ctx context.Context, family, root, kind string, spec []byte, max int) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", backendErr("register", err, true)
	}
	var name string
	err := s.db.Update(func(tx *bolt.Tx) error {
		var err error
		name, err = boltMint(tx, family, root, kind, spec, max)
		return err
	})
	if muster.ErrorCode(err) == muster.CodeSpecLimit {
		return "", err
	}
	if err != nil {
		return "", boltErr("register", err)
	}
	return name, nil
}

// boltMint is the critical section of Register: read the counter, store the
// spec under the minted name, write the counter back, all inside tx.
func boltMint(tx *bolt.Tx, family, root, kind string, spec []byte, max int) (string, error) {
	rb, err := rootBucket(tx, family, root, true)
	if err != nil {
		return "", err
	}
	n := uint64(1)
	if v := rb.Get([]byte(CounterKey)); v != nil {
		if n, err = strconv.ParseUint(string(v), 10, 64); err != nil || n == 0 {
			return "", fmt.Errorf("counter of a root is corrupt: %q", v)
		}
	}
	if n >= math.MaxInt64 {
		return "", errors.New("counter of a root is exhausted")
	}
	specs, err := rb.CreateBucketIfNotExists([]byte(SpecsBucket))
	if err != nil {
		return "", err
	}
	if max > 0 && specs.Stats().KeyN >= max {
		return "", errSpecLimit(max)
	}
	name := mintName(kind, n)
	if specs.Get([]byte(name)) != nil {
		return "", fmt.Errorf("counter of a root is behind its specs: %s exists", name)
	}
	if err := specs.Put([]byte(name), spec); err != nil {
		return "", err
	}
	if err := rb.Put([]byte(CounterKey), strconv.AppendUint(nil, n+1, 10)); err != nil {
		return "", err
	}
	return name, nil
}

func (s *boltStore) Get(ctx context.Context, family, root, name string) (Row, error) {
	if err := ctx.Err(); err != nil {
		return Row{}, backendErr("read", err, true)
	}
	var row Row
	err := s.db.View(func(tx *bolt.Tx) error {
		specs, err := specsBucket(tx, family, root)
		if err != nil {
			return err
		}
		var v []byte
		if specs != nil {
			v = specs.Get([]byte(name))
		}
		if v == nil {
			return errSpecNotFound()
		}
		row = Row{Name: name, Spec: bytes.Clone(v)}
		return nil
	})
	return row, boltErr("read", err)
}

func (s *boltStore) Forget(ctx context.Context, family, root string, names ...string) error {
	if len(names) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return backendErr("forget", err, true)
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		specs, err := specsBucket(tx, family, root)
		if specs == nil || err != nil {
			return err
		}
		for _, name := range names {
			if err := specs.Delete([]byte(name)); err != nil {
				return err
			}
		}
		return nil
	})
	return boltErr("forget", err)
}

// Drop compares each judged row with the stored one and deletes them, in one
// write transaction (bbolt has one writer at a time, so nothing changes
// between the comparison and the delete).
func (s *boltStore) Drop(ctx context.Context, family, root string, judged []Row) ([]string, error) {
	dropped := []string{}
	if len(judged) == 0 {
		return dropped, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, backendErr("sweep", err, true)
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		specs, err := specsBucket(tx, family, root)
		if specs == nil || err != nil {
			return err
		}
		for _, r := range judged {
			v := specs.Get([]byte(r.Name))
			if v == nil {
				continue
			}
			if !bytes.Equal(v, r.Spec) {
				return ErrSpecChanged
			}
			dropped = append(dropped, r.Name)
		}
		for _, name := range dropped {
			if err := specs.Delete([]byte(name)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, boltErr("sweep", err)
	}
	return dropped, nil
}

func (s *boltStore) Desired(ctx context.Context, family, root, after string, limit int) ([]Row, bool, error) {
	rows := []Row{}
	more, err := s.scan(ctx, family, root, after, limit, func(k, v []byte) {
		rows = append(rows, Row{Name: string(k), Spec: bytes.Clone(v)})
	})
	return rows, more, err
}

// Names is Desired without the specs.
func (s *boltStore) Names(ctx context.Context, family, root, after string, limit int) ([]string, bool, error) {
	names := []string{}
	more, err := s.scan(ctx, family, root, after, limit, func(k, _ []byte) {
		names = append(names, string(k))
	})
	return names, more, err
}

// scan hands each spec row after the name after (in name order) to take, at
// most limit of them, inside one read transaction: take must copy what it
// keeps. more says that rows remain past the last one taken.
func (s *boltStore) scan(ctx context.Context, family, root, after string, limit int, take func(k, v []byte)) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, backendErr("list", err, true)
	}
	more, n := false, 0
	err := s.db.View(func(tx *bolt.Tx) error {
		specs, err := specsBucket(tx, family, root)
		if specs == nil || err != nil {
			return err
		}
		c := specs.Cursor()
		k, v := c.Seek([]byte(after))
		if k != nil && string(k) == after {
			k, v = c.Next()
		}
		for ; k != nil; k, v = c.Next() {
			if n == limit {
				more = true
				break
			}
			take(k, v)
			n++
		}
		return nil
	})
	if err != nil {
		return false, boltErr("list", err)
	}
	return more, nil
}

func (s *boltStore) Close() error {
	return boltErr("close", s.db.Close())
}

// boltErr wraps a bbolt failure; a closed database counts as unavailable.
func boltErr(op string, err error) error {
	return backendErr(op, err, errors.Is(err, berrors.ErrDatabaseNotOpen))
}
