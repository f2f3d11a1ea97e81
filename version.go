package muster

import "runtime/debug"

// Build is what the Go toolchain recorded of this binary: the module's
// version ("(devel)" for a build of a checkout), the commit ("unknown"
// when the build did not stamp one: go build -buildvcs=false, or no
// checkout) with "+modified" when its tree had uncommitted changes, the
// commit's time (RFC 3339, "" when not stamped: the date a reproducible
// build can record) and the Go version.
type Build struct {
	Version, Commit, CommitTime, GoVersion string
}

// BuildInfo reads Build from the running binary.
func BuildInfo() Build {
	b := Build{Version: "unknown", Commit: "unknown", GoVersion: "unknown"}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	b.Version, b.GoVersion = bi.Main.Version, bi.GoVersion
	modified := ""
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Commit = s.Value
		case "vcs.time":
			b.CommitTime = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = "+modified"
			}
		}
	}
	b.Commit += modified
	return b
}
