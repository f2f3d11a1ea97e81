package load

import "runtime"

func testingProcs() int { return runtime.GOMAXPROCS(0) }
