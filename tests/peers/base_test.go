package peers

import (
	"os"
	"testing"
)

// baseEnv, when set, is the path of a muster binary built from another
// commit (the "before" of a change): it is served beside this checkout's
// broker and gets the rows muster-base and muster-base-batch64, run in
// every round after the others, so before and after are compared within
// one run, round by round:
//
//	git worktree add /tmp/before <commit> && (cd /tmp/before && go build -o /tmp/muster-before ./cmd/muster)
//	MUSTER_PEERS_BASE_BIN=/tmp/muster-before go test -run '^$' -bench 'Pairs/round/^muster' -benchtime 5s .
const baseEnv = "MUSTER_PEERS_BASE_BIN"

func init() {
	if os.Getenv(baseEnv) == "" {
		return
	}
	systems = append(systems,
		system{name: "muster-base", server: "muster-base", open: func(tb testing.TB) leaser { return openHTTP(tb, baseURL(tb)) }},
		system{name: "muster-base-batch64", server: "muster-base", batch: func(tb testing.TB) batchLeaser { return openMusterBatchAt(tb, baseURL(tb)) }},
	)
}

// baseURL is the base URL of the broker of baseEnv.
func baseURL(tb testing.TB) string {
	return serveMuster(tb, "muster-base", func(testing.TB) string { return os.Getenv(baseEnv) })
}
