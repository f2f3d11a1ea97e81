package fleetstore

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/musterhq/muster"
	bolt "go.etcd.io/bbolt"
)

// Tests of the bbolt backend's own promises; the shared behaviour is in the
// conformance suite.

func TestBoltSecondOpenTimesOut(t *testing.T) {
	path := filepath.Join(t.TempDir(), BoltFileName)
	_ = MustOpenBoltAt(t, path)
	start := time.Now()
	s, err := OpenBolt(path, &BoltOptions{Timeout: 100 * time.Millisecond})
	if err == nil {
		_ = s.Close()
	}
	wantCode(t, err, muster.CodeUnavailable)
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("second open gave up after %v", d)
	}
}

// TestBoltLayout pins the geometry: fleets/<family>/<root> holds the specs
// bucket and, beside it, the next_id counter.
func TestBoltLayout(t *testing.T) {
	path := filepath.Join(t.TempDir(), BoltFileName)
	s := MustOpenBoltAt(t, path)
	f := New(s)
	mustRegister(t, f, "acme", "inst-7/monitors", "repo", `{"a":1}`)
	mustRegister(t, f, "acme", "inst-7/monitors", "reminder", `{"b":2}`)
	must(t, f.Forget(ctx, "acme", "inst-7/monitors", "repo-1"))
	must(t, s.Close())

	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second, ReadOnly: true})
	must(t, err)
	defer func() { _ = db.Close() }()
	err = db.View(func(tx *bolt.Tx) error {
		rb := tx.Bucket([]byte("fleets")).Bucket([]byte("acme")).Bucket([]byte("inst-7/monitors"))
		if rb == nil {
			t.Fatal("no bucket fleets/acme/inst-7/monitors")
		}
		var keys []string
		must(t, rb.ForEach(func(k, v []byte) error {
			keys = append(keys, string(k))
			if string(k) == CounterKey && string(v) != "3" {
				t.Errorf("next_id = %q, want 3", v)
			}
			return nil
		}))
		if !slices.Equal(keys, []string{CounterKey, SpecsBucket}) {
			t.Errorf("root bucket holds %v, want [%s %s]", keys, CounterKey, SpecsBucket)
		}
		var specs []string
		must(t, rb.Bucket([]byte(SpecsBucket)).ForEach(func(k, v []byte) error {
			specs = append(specs, string(k)+"="+string(v))
			return nil
		}))
		if want := []string{`reminder-2={"b":2}`}; !slices.Equal(specs, want) {
			t.Errorf("specs bucket = %v, want %v", specs, want)
		}
		return nil
	})
	must(t, err)
}

func TestBoltRefusesUnknownFormat(t *testing.T) {
	path := filepath.Join(t.TempDir(), BoltFileName)
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	must(t, err)
	must(t, db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket([]byte("meta"))
		if err != nil {
			return err
		}
		return b.Put([]byte("format"), []byte("2"))
	}))
	must(t, db.Close())
	s, err := OpenBolt(path, nil)
	if err == nil {
		_ = s.Close()
	}
	wantCode(t, err, muster.CodeInternal)
}

// TestBoltNeverOverwrites: a counter set back by hand makes Register fail
// rather than overwrite the spec already stored under the minted name.
func TestBoltNeverOverwrites(t *testing.T) {
	path := filepath.Join(t.TempDir(), BoltFileName)
	s := MustOpenBoltAt(t, path)
	f := New(s)
	mustRegister(t, f, fam, root, "repo", `"first"`)
	must(t, s.(*boltStore).db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("fleets")).Bucket([]byte(fam)).Bucket([]byte(root)).Put([]byte(CounterKey), []byte("1"))
	}))
	_, err := f.Register(ctx, fam, root, "repo", []byte(`"second"`))
	wantCode(t, err, muster.CodeInternal)
	row, err := f.Get(ctx, fam, root, "repo-1")
	must(t, err)
	if string(row.Spec) != `"first"` {
		t.Fatalf("repo-1 = %s, want the first spec untouched", row.Spec)
	}
}
