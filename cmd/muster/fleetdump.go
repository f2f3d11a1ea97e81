package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"syscall"

	"github.com/musterhq/muster/cmd/muster/app"
	"github.com/musterhq/muster/fleetstore/dump"
)

const exportSynopsis = `  muster fleet export [--family F] [--root R] [--to FILE] [--data-dir DIR] [--store URL | --store-file FILE]

Writes the desired set of the fleet store as JSON Lines, on stdout or to
FILE (replaced only by a complete dump): per root
its counter line, then its specs in name order (docs/operations.md, Backup
and restore). It opens the store itself: a bbolt store only with its broker
stopped (the broker's lock refuses it otherwise: take a 'muster backup'
instead); a PostgreSQL store beside running brokers, though the export is
then not one snapshot.`

const importSynopsis = `  muster fleet import [--data-dir DIR] [--store URL | --store-file FILE] [FILE] < dump.jsonl

Applies a dump written by 'muster fleet export' (FILE, or stdin): each spec
stored under its own name, each root's counter raised past what the dump
holds, so no name is minted twice. Importing the same dump again changes
nothing. A refused line (malformed, or a name stored with a different spec,
which is kept) is reported on stderr with its number and the rest is
applied; the exit status is then 1. It opens the store itself, as export
does (a bbolt store is created if absent).`

// fleetExport is `muster fleet export`.
func fleetExport(args []string, stdout, stderr io.Writer) int {
	m := app.NewMain()
	fs := flag.NewFlagSet("muster fleet export", flag.ContinueOnError)
	m.RegisterStoreFlags(fs)
	var filter dump.Filter
	fs.StringVar(&filter.Family, "family", "", "export this `family` only")
	fs.StringVar(&filter.Root, "root", "", "export this `root` only (not the roots under it)")
	var to string
	fs.StringVar(&to, "to", "", "write the dump to `FILE`, atomically (default: stdout)")
	if done, code := parse(fs, exportSynopsis, args, 0, stdout, stderr); done {
		return code
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	f, closeStore, err := m.OpenOffline(ctx, true)
	if err != nil {
		fmt.Fprintf(stderr, "muster fleet export: %s\n", display(err.Error()))
		return 1
	}
	var n dump.Counts
	if to == "" {
		n, err = dump.Export(ctx, f, stdout, filter)
	} else {
		err = app.WriteAtomically(to, func(w io.Writer) error {
			var err error
			n, err = dump.Export(ctx, f, w, filter)
			return err
		})
	}
	err = errors.Join(err, closeStore())
	if err != nil {
		note := "the dump on stdout is incomplete"
		if to != "" {
			note = "--to was left as it was"
		}
		fmt.Fprintf(stderr, "muster fleet export: %s (%s)\n", display(err.Error()), note)
		return 1
	}
	fmt.Fprintf(stderr, "muster fleet export: %d roots, %d specs\n", n.Roots, n.Added)
	return 0
}

// fleetImport is `muster fleet import`.
func fleetImport(args []string, stdout, stderr io.Writer) int {
	m := app.NewMain()
	fs := flag.NewFlagSet("muster fleet import", flag.ContinueOnError)
	m.RegisterStoreFlags(fs)
	pos, done, code := parseInterspersed(fs, importSynopsis, args, 1, stdout, stderr)
	if done {
		return code
	}
	in := io.Reader(os.Stdin)
	if len(pos) == 1 && pos[0] != "-" {
		name := pos[0]
		file, err := os.Open(name)
		if err != nil {
			fmt.Fprintf(stderr, "muster fleet import: %s\n", display(err.Error()))
			return 1
		}
		defer file.Close()
		in = file
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	f, closeStore, err := m.OpenOffline(ctx, false)
	if err != nil {
		fmt.Fprintf(stderr, "muster fleet import: %s\n", display(err.Error()))
		return 1
	}
	var refused []dump.Refusal
	n, err := dump.Import(ctx, f, in, func(r dump.Refusal) { refused = append(refused, r) })
	err = errors.Join(err, closeStore())
	slices.SortStableFunc(refused, func(a, b dump.Refusal) int { return cmp.Compare(a.Line, b.Line) })
	for _, r := range refused {
		fmt.Fprintf(stderr, "muster fleet import: refused %s\n", display(r.Error()))
	}
	fmt.Fprintf(stdout, "added %d, unchanged %d, refused %d, counters %d\n", n.Added, n.Unchanged, n.Refused, n.Roots)
	if err != nil {
		fmt.Fprintf(stderr, "muster fleet import: stopped: %s (what was applied before stays; importing again is safe)\n", display(err.Error()))
		return 1
	}
	if len(refused) > 0 {
		return 1
	}
	return 0
}
