package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
)

// parse parses the flags of one command. It returns done=true with the exit
// code when the command must stop here: 0 after --help (usage on stdout), 2
// after a usage error (the error and the usage on stderr). maxArgs bounds
// the positional arguments (-1: any number).
func parse(fs *flag.FlagSet, synopsis string, args []string, maxArgs int, stdout, stderr io.Writer) (done bool, code int) {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	err := fs.Parse(args)
	if errors.Is(err, flag.ErrHelp) {
		printUsage(fs, synopsis, stdout)
		return true, 0
	}
	if err == nil && maxArgs >= 0 && fs.NArg() > maxArgs {
		err = fmt.Errorf("unexpected argument %q", fs.Arg(maxArgs))
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n\n", fs.Name(), err)
		printUsage(fs, synopsis, stderr)
		return true, 2
	}
	return false, 0
}

func printUsage(fs *flag.FlagSet, synopsis string, w io.Writer) {
	fmt.Fprintf(w, "usage:\n%s\n", synopsis)
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n > 0 {
		fmt.Fprintln(w, "\nflags:")
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
}
