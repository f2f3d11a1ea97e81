// Command rebalancer is a worker of a fleet that shares its desired set
// fairly with the other workers of the fleet, using only the Muster SDK:
//
//   - the desired set is the fleet's specs (Client.Fleet(root).Desired);
//   - each spec <name> is guarded by the lease lease://<realm>/<root>/<name>;
//   - each worker holds a membership lease lease://<realm>/<root>-members/<id>
//     so that workers holding no work are counted too;
//   - each worker observes both selectors (Client.Observe) and, whenever a
//     view changes, acquires unowned specs up to its fair share
//     ceil(desired / members) and releases what it holds beyond it.
//
// The views are advisory: a worker only ever acquires through the broker
// (which refuses a held lease) and releases its own leases, so a stale view
// costs a wasted request, never a double owner. A killed worker's leases
// expire after their TTL and the others take its work over.
//
//	rebalancer --broker http://127.0.0.1:7420 --root renders --id w1
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	var cfg config
	flag.StringVar(&cfg.broker, "broker", "http://127.0.0.1:7420", "broker base URL")
	flag.StringVar(&cfg.token, "token", os.Getenv("MUSTER_TOKEN"), "bearer token (default $MUSTER_TOKEN; none in dev mode)")
	flag.StringVar(&cfg.realm, "realm", "acme", "realm of the lease routes")
	flag.StringVar(&cfg.root, "root", "renders", "fleet root (one segment): the desired set and the lease area")
	flag.StringVar(&cfg.id, "id", "", "this worker's id (its owner id and membership lease)")
	flag.DurationVar(&cfg.ttl, "ttl", 2*time.Second, "lease TTL: a dead worker's work moves within about this long")
	flag.Parse()
	if cfg.id == "" {
		host, _ := os.Hostname()
		cfg.id = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	log := slog.New(slog.NewJSONHandler(os.Stdout, nil)).With("worker", cfg.id)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg, log); err != nil {
		log.Error("worker stopped", "err", err)
		os.Exit(1)
	}
}
