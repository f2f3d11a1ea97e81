package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os/signal"
	"syscall"

	"github.com/musterhq/muster/cmd/muster/app"
	"github.com/musterhq/muster/fleetstore"
)

const backupSynopsis = `  muster backup --to FILE [--data-dir DIR] [--store URL | --store-file FILE]

Copies the bbolt fleet store of the broker serving DIR, while it serves, to
FILE: a consistent snapshot (every register answered before the copy began,
none begun after it ended), written atomically (FILE is replaced only by a
complete copy that checks). Run it on the broker's host as the broker's
user: it asks the broker through DIR/admin.sock, mode 0600. Restore: stop
the broker, put FILE in place of DIR/fleet.db, start the broker.

With a PostgreSQL store there is nothing to copy here: use pg_dump.`

// backup is `muster backup`: exit 0 with the copy written, 1 when it could
// not be made (nothing written), 2 for a usage error.
func backup(args []string, stdout, stderr io.Writer) int {
	m := app.NewMain()
	fs := flag.NewFlagSet("muster backup", flag.ContinueOnError)
	m.RegisterStoreFlags(fs)
	var to string
	fs.StringVar(&to, "to", "", "write the copy to `FILE` (replaced atomically)")
	if done, code := parse(fs, backupSynopsis, args, 0, stdout, stderr); done {
		return code
	}
	if to == "" {
		fmt.Fprint(stderr, "muster backup: --to FILE is required\n\n")
		printUsage(fs, backupSynopsis, stderr)
		return 2
	}
	bolt, err := m.ResolveStore()
	if err != nil {
		fmt.Fprintln(stderr, "muster backup:", err)
		return 1
	}
	if !bolt {
		fmt.Fprintf(stderr, "muster backup: %v (docs/operations.md, Backup and restore); nothing written\n", fleetstore.ErrNotBolt)
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	size, err := app.Backup(ctx, m.DataDir, to)
	if err != nil {
		if errors.Is(err, context.Canceled) {
			err = errors.New("interrupted")
		}
		fmt.Fprintf(stderr, "muster backup: %s; nothing written\n", display(err.Error()))
		return 1
	}
	fmt.Fprintf(stdout, "%s: %d bytes, a consistent copy of the fleet store\n", display(to), size)
	return 0
}
