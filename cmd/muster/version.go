package main

import (
	"fmt"
	"io"

	"github.com/musterhq/muster"
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

// versionLine is "muster <version> <commit>[+modified] [<commit time>]
// <go version>".
func versionLine() string {
	b := muster.BuildInfo()
	if b.CommitTime != "" {
		return fmt.Sprintf("muster %s %s %s %s", b.Version, b.Commit, b.CommitTime, b.GoVersion)
	}
	return fmt.Sprintf("muster %s %s %s", b.Version, b.Commit, b.GoVersion)
}
