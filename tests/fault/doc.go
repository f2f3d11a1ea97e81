// Package fault is the fault campaign of issue 16: a mixed workload against
// the real broker binary while faults are injected, with invariants checked
// after every round. See campaign_test.go.
package fault
