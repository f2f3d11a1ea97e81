package main

import (
	"fmt"
	"io"
	"runtime/debug"
)

// version is `muster version` and `muster --version`: the module version
// and the commit the binary was built from, as the Go toolchain recorded
// them ("(devel)" for a build of a checkout, and "+modified" when its tree
// had uncommitted changes).
func version(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		if args[0] == "--help" || args[0] == "-h" {
			fmt.Fprint(stdout, "usage: muster version\n\nPrints the version and commit of this binary.\n")
			return 0
		}
		fmt.Fprintf(stderr, "muster version: takes no arguments\n")
		return 2
	}
	fmt.Fprintln(stdout, versionLine())
	return 0
}

// versionLine is "muster <version> <commit>[+modified] <go version>".
func versionLine() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "muster unknown"
	}
	commit, modified := "unknown", ""
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			commit = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = "+modified"
			}
		}
	}
	return fmt.Sprintf("muster %s %s%s %s", bi.Main.Version, commit, modified, bi.GoVersion)
}
