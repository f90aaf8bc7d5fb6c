// Package docs holds the one copy of the REST API's OpenAPI description,
// openapi.yaml, which the server embeds and serves (GET /_openapi) and its
// tests check against the running server.
//
// The description lives here, beside the REST API's page (rest-api.md),
// rather than in httpapi: go:embed reaches no parent directory, and a
// second copy would drift.
package docs

import _ "embed"

//go:embed openapi.yaml
var openAPI string

// OpenAPI is openapi.yaml, the OpenAPI 3.1 description of the REST API.
func OpenAPI() string { return openAPI }
