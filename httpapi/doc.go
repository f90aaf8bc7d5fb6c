// Package httpapi serves FAISS indexes over a REST API (gin): per-index
// loading modes switched live, a node-wide memory budget, search with
// OpenSearch-style scores and per-query profiles, and Prometheus metrics.
//
// A file holds one job. The server: config.go (Config and its defaults),
// server.go (Server, serving and shutdown), routes.go, middleware.go
// (panics, access log, body limits, auth), body.go and decode.go (reading
// a request body within the bodies in flight, and decoding it strictly),
// respond.go (the one JSON envelope) and errors.go (the error
// constructors and the one map from error kinds to statuses), admin.go
// (the handlers that are not searches), search.go, msearch.go and
// request.go (searches and their parameters), admission.go (search slots
// and work charged), limits.go, memory.go (the node budget's default and
// the heap's limit), metrics.go, watch.go and notify_linux.go (the file
// watcher and its inotify). The indexes: registry.go (Registry), entry.go,
// handle.go, spec.go (LoadSpec), sandbox.go (which paths and objects may
// be served), nodebudget.go (admission of a load into the node's budget),
// openfiles.go (the descriptors they hold, max_open_files), load.go and
// switch.go.
package httpapi
