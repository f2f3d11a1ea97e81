// Package api is generated from openapi.yaml by oapi-codegen: the chi server,
// the strict handler interface, the models and the embedded spec. Never edit
// api.gen.go or openapi.yaml here by hand; run `make generate`.
package api

import _ "embed"

//go:generate go tool oapi-codegen -config config.yaml ../openapi.yaml
//go:generate cp ../openapi.yaml openapi.yaml

// SpecYAML is openapi.yaml byte for byte, as served at /openapi.yaml.
//
//go:embed openapi.yaml
var SpecYAML []byte
