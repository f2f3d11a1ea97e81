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
)

const reloadSynopsis = `  muster reload [--data-dir DIR]

Asks the broker serving DIR to read its configuration file again and apply
it in place, as SIGHUP does (docs/operations.md, Reloading), and says
whether it took: exit 0 when the file is in force, 1 with the reason when
it was refused (the configuration in force stays) or no broker answered.
Run it on the broker's host as the broker's user: it asks through
DIR/admin.sock, mode 0600.`

// reload is `muster reload`.
func reload(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("muster reload", flag.ContinueOnError)
	dataDir := fs.String("data-dir", app.DefaultDataDir, "the broker's data `DIR`")
	if done, code := parse(fs, reloadSynopsis, args, 0, stdout, stderr); done {
		return code
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := app.Reload(ctx, *dataDir); err != nil {
		var re *app.ReloadError
		if errors.As(err, &re) {
			fmt.Fprintf(stderr, "muster reload: the broker kept its configuration: %s\n", display(re.Msg))
		} else {
			fmt.Fprintf(stderr, "muster reload: %s\n", display(err.Error()))
		}
		return 1
	}
	fmt.Fprintln(stdout, "reloaded: the configuration file is in force")
	return 0
}
