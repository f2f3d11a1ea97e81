package peers

// acquireRoute is the route label of the acquire endpoint in the broker's
// latency histogram (read with load.ServerBuckets).
const acquireRoute = "/v1/leases/{realm}/{area}/{resource}/acquire"
