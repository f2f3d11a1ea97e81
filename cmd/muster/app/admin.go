package app

import (
	"bufio"
	"fmt"

	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// AdminSocket is the Unix socket in the data directory through which
// `muster backup` and `muster reload`, run on the broker's host, ask the
// running broker for a consistent copy of its bbolt store, or to reload its
// configuration file and say whether it took. The broker holds the bbolt file with
// an exclusive lock, so no other process can read it while it serves: the
// copy has to be made inside the broker (fleetstore.Fleet.Backup).
//
// The socket is mode 0600, created in a private directory and renamed into
// place, so only the broker's user (and root) can ever connect: file
// permissions are the authorization, as they are for fleet.db itself. It
// serves one request per connection, a line naming the verb:
//
//	backup\n  →  "ok SIZE\n" then SIZE bytes of a bbolt file,
//	              or "error MESSAGE\n"
//	reload\n  →  "ok\n" once the configuration file is in force again
//	              (as on SIGHUP), or "error MESSAGE\n": why it was refused
//
// It is no HTTP endpoint: nothing of it is in the contract (openapi.yaml),
// and nothing reaches it over the network.
const AdminSocket = "admin.sock"

// Admin socket bounds: the wait for the verb, and for each write of the
// copy to be taken by the client (a client that stops reading must not
// hold the store's read transaction for ever).
const (
	adminReadTimeout  = 10 * time.Second
	adminWriteTimeout = 30 * time.Second
)

// admin is the broker's side of the admin socket.
type admin struct {
	m    *Main
	ln   *net.UnixListener
	path string
	busy chan struct{} // one backup at a time

	mu    sync.Mutex
	conns map[net.Conn]bool
	wg    sync.WaitGroup
}

// openAdmin listens on DataDir/AdminSocket. The data directory's lock is
// held, so a socket file found there is a dead broker's and is replaced.
// A failure (a data directory path too long for a socket, say) is logged:
// the broker serves without online backup rather than not at all.
func (m *Main) openAdmin() {
	a, err := listenAdmin(m.DataDir)
	if err != nil {
		m.Logger.Warn("admin socket unavailable: muster backup and muster reload will not reach this broker (SIGHUP still reloads)", "err", err)
		return
	}
	a.m, a.busy, a.conns = m, make(chan struct{}, 1), map[net.Conn]bool{}
	m.admin = a
	a.wg.Add(1)
	go a.serve()
}

func listenAdmin(dir string) (*admin, error) {
	path := filepath.Join(dir, AdminSocket)
	private, err := os.MkdirTemp(dir, "admin")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(private)
	tmp := filepath.Join(private, "s")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: tmp, Net: "unix"})
	if err != nil {
		return nil, err
	}
	ln.SetUnlinkOnClose(false) // it is renamed: close removes path instead
	if err := os.Chmod(tmp, 0o600); err != nil {
		_ = ln.Close()
		return nil, err
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = ln.Close()
		return nil, err
	}
	return &admin{ln: ln, path: path}, nil
}

func (a *admin) serve() {
	defer a.wg.Done()
	for {
		c, err := a.ln.Accept()
		if err != nil {
			return // closed
		}
		a.mu.Lock()
		a.conns[c] = true
		a.mu.Unlock()
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			a.handle(c)
			a.mu.Lock()
			delete(a.conns, c)
			a.mu.Unlock()
			_ = c.Close()
		}()
	}
}

// handle answers one request.
func (a *admin) handle(c net.Conn) {
	_ = c.SetReadDeadline(time.Now().Add(adminReadTimeout))
	verb, err := bufio.NewReaderSize(c, 64).ReadString('\n')
	if err != nil {
		return
	}
	switch verb = strings.TrimSpace(verb); verb {
	case "backup":
		a.backup(c)
	case "reload":
		// What SIGHUP does, with its outcome answered: "ok", or the
		// reason the file was refused (the configuration in force stays).
		if err := a.m.Reload(); err != nil {
			fmt.Fprintf(c, "error %s\n", strings.ReplaceAll(err.Error(), "\n", " "))
			return
		}
		fmt.Fprintln(c, "ok")
	default:
		fmt.Fprintf(c, "error unknown verb %q (this broker knows: backup, reload)\n", verb)
	}
}

func (a *admin) backup(c net.Conn) {
	select {
	case a.busy <- struct{}{}:
		defer func() { <-a.busy }()
	default:
		fmt.Fprintln(c, "error another backup is running")
		return
	}
	started := time.Now()
	var size int64
	err := a.m.fleet.Backup(deadlineWriter{c}, func(n int64) error {
		size = n
		_ = c.SetWriteDeadline(time.Now().Add(adminWriteTimeout))
		_, err := fmt.Fprintf(c, "ok %d\n", n)
		return err
	})
	if err != nil {
		if size == 0 { // nothing sent yet: the client can be told why
			fmt.Fprintf(c, "error %s\n", oneLine(err))
		}
		a.m.Logger.Warn("backup failed", "err", err)
		return
	}
	a.m.Logger.Info("backup sent", "bytes", size, "took", time.Since(started).Round(time.Millisecond).String())
}

// deadlineWriter gives each write adminWriteTimeout.
type deadlineWriter struct{ c net.Conn }

func (w deadlineWriter) Write(p []byte) (int, error) {
	_ = w.c.SetWriteDeadline(time.Now().Add(adminWriteTimeout))
	return w.c.Write(p)
}

// closeAdmin stops listening, removes the socket, cuts the backups in
// flight (their clients see a short copy and keep nothing) and waits for
// them, so the store can be closed after it.
func (m *Main) closeAdmin() {
	a := m.admin
	if a == nil {
		return
	}
	_ = a.ln.Close()
	_ = os.Remove(a.path)
	a.mu.Lock()
	for c := range a.conns {
		_ = c.Close()
	}
	a.mu.Unlock()
	a.wg.Wait()
	m.admin = nil
}

func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}
