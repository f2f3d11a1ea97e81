package app

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/musterhq/muster/fleetstore"
)

// ErrNoBroker is the failure of Backup when no broker answers on the data
// directory's admin socket.
var ErrNoBroker = errors.New("no broker answers on the admin socket")

// BackupError is the broker's refusal of a backup (a PostgreSQL store,
// another backup running, a failed read), or a copy that arrived short or
// does not check.
type BackupError struct {
	Msg string
}

func (e *BackupError) Error() string { return e.Msg }

// Backup asks the broker serving dataDir for a consistent copy of its bbolt
// store, through dataDir/AdminSocket, and writes it to the file to
// atomically: into a temporary file beside it, fsynced, checked with
// fleetstore.VerifyBolt, then renamed over to (mode 0600) and the directory
// fsynced. On any failure to is left as it was. It returns the copy's size.
func Backup(ctx context.Context, dataDir, to string) (int64, error) {
	live := filepath.Join(dataDir, fleetstore.BoltFileName)
	if sameFile(live, to) {
		return 0, &BackupError{Msg: fmt.Sprintf("--to %s is the live store itself: give another file", to)}
	}
	sock := filepath.Join(dataDir, AdminSocket)
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", sock)
	if err != nil {
		return 0, fmt.Errorf("%w %s (%v): is the broker running with --data-dir %s, on this host, as this user?", ErrNoBroker, sock, err, dataDir)
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { _ = c.Close() })
	defer stop()
	if _, err := io.WriteString(c, "backup\n"); err != nil {
		return 0, err
	}
	br := bufio.NewReaderSize(c, 64<<10)
	head, err := br.ReadString('\n')
	if err != nil {
		return 0, fmt.Errorf("the broker closed the admin socket without an answer: %w", err)
	}
	head = strings.TrimSuffix(head, "\n")
	if msg, ok := strings.CutPrefix(head, "error "); ok {
		return 0, &BackupError{Msg: msg}
	}
	sizeText, ok := strings.CutPrefix(head, "ok ")
	size, perr := strconv.ParseInt(sizeText, 10, 64)
	if !ok || perr != nil || size <= 0 {
		return 0, &BackupError{Msg: fmt.Sprintf("the broker answered %.60q, not a backup", head)}
	}
	if err := writeAtomically(to, func(f *os.File) error {
		n, err := io.CopyN(f, br, size)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return &BackupError{Msg: fmt.Sprintf("the copy stopped after %d of %d bytes: %v", n, size, err)}
		}
		return nil
	}, func(tmp string) error {
		if err := fleetstore.VerifyBolt(tmp); err != nil {
			return &BackupError{Msg: fmt.Sprintf("the copy does not check as a fleet store: %v", err)}
		}
		return nil
	}); err != nil {
		return 0, err
	}
	return size, nil
}

// writeAtomically writes a temporary file beside path with fill, fsyncs
// it, runs check on it, and renames it to path, then fsyncs the directory.
func writeAtomically(path string, fill func(*os.File) error, check func(tmp string) error) (err error) {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	if err = f.Chmod(0o600); err != nil {
		return err
	}
	if err = fill(f); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = check(tmp); err != nil {
		return err
	}
	if err = os.Rename(tmp, path); err != nil {
		return err
	}
	if d, derr := os.Open(dir); derr == nil {
		err = d.Sync()
		_ = d.Close()
	}
	return err
}

// sameFile reports whether a and b name one file: the same path, or the
// same file through links.
func sameFile(a, b string) bool {
	aa, err1 := filepath.Abs(a)
	bb, err2 := filepath.Abs(b)
	if err1 == nil && err2 == nil && aa == bb {
		return true
	}
	sa, err1 := os.Stat(a)
	sb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(sa, sb)
}

// WriteAtomically writes the file at path (mode 0600) with fill, so that
// path is replaced only by a complete, fsynced file: a failure leaves it as
// it was.
func WriteAtomically(path string, fill func(w io.Writer) error) error {
	return writeAtomically(path, func(f *os.File) error { return fill(f) }, func(string) error { return nil })
}

// Reload asks the broker serving dataDir, through its admin socket, to
// reload its configuration file (what SIGHUP does) and returns the reason
// when the file was refused (the configuration in force stays then).
func Reload(ctx context.Context, dataDir string) error {
	sock := filepath.Join(dataDir, AdminSocket)
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", sock)
	if err != nil {
		return fmt.Errorf("%w %s (%v): is the broker running with --data-dir %s, on this host, as this user?", ErrNoBroker, sock, err, dataDir)
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { _ = c.Close() })
	defer stop()
	if _, err := io.WriteString(c, "reload\n"); err != nil {
		return err
	}
	answer, err := bufio.NewReaderSize(c, 4<<10).ReadString('\n')
	if err != nil {
		return fmt.Errorf("the broker closed the admin socket without an answer: %w", err)
	}
	answer = strings.TrimSuffix(answer, "\n")
	if msg, ok := strings.CutPrefix(answer, "error "); ok {
		return &ReloadError{Msg: msg}
	}
	if answer != "ok" {
		return &ReloadError{Msg: fmt.Sprintf("the broker answered %.60q, not a reload", answer)}
	}
	return nil
}

// ReloadError is the broker's refusal of its configuration file: the
// configuration in force stays.
type ReloadError struct{ Msg string }

func (e *ReloadError) Error() string { return e.Msg }
