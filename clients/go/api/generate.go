// Package api is the low-level Muster client, generated from the contract
// (openapi.yaml at the repository root) by oapi-codegen: the models and a
// typed client with one method per operation. Never edit client.gen.go by
// hand; run `go generate ./api` in clients/go.
//
// Most programs want the idiomatic package one level up
// (github.com/musterhq/muster/clients/go), which adds typed errors, managed
// sessions and leases, iterators, watch streams and the observer. The watch
// stream is not usable through this package: the generated client reads
// whole bodies, so an event stream never returns.
package api

//go:generate go tool oapi-codegen -config config.yaml ../../../openapi.yaml
