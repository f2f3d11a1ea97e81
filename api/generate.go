// Package api is generated from openapi.yaml by oapi-codegen: the chi server,
// the strict handler interface, the models and the embedded spec. Never edit
// api.gen.go by hand; run `make generate`.
package api

//go:generate go tool oapi-codegen -config config.yaml ../openapi.yaml
