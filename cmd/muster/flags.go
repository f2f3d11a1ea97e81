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

// parseInterspersed is parse for commands whose flags may come before,
// between or after their arguments (`muster lease acquire ROUTE --ttl 1m`).
// Everything after a "--" is an argument, flags included. It returns the
// arguments.
func parseInterspersed(fs *flag.FlagSet, synopsis string, args []string, maxArgs int, stdout, stderr io.Writer) (pos []string, done bool, code int) {
	for {
		if done, code := parse(fs, synopsis, args, -1, stdout, stderr); done {
			return nil, true, code
		}
		rest := fs.Args()
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			pos = append(pos, rest...)
			break
		}
		if len(rest) == 0 {
			break
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
	if maxArgs >= 0 && len(pos) > maxArgs {
		fmt.Fprintf(stderr, "%s: unexpected argument %q\n\n", fs.Name(), pos[maxArgs])
		printUsage(fs, synopsis, stderr)
		return nil, true, 2
	}
	return pos, false, 0
}
