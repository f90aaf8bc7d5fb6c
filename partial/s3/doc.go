// Package s3 is the storage backend for FAISS files in S3-compatible object
// storage: an object named s3://BUCKET/KEY served by ranged GETs.
//
// A Client opens objects; a program makes one and passes it to every
// open (nothing here is process-wide but the request metrics,
// ReadMetrics). Client.Open makes one request: a ranged GET of the
// object's first HeadBytes, whose answer also gives the object's size
// (Content-Range) and ETag; the bytes are kept, so the headers a parser
// reads first cost nothing more. Every later GET carries If-Match with
// that ETag: an object replaced while it is served answers 412, which is
// reported as an error wrapping partial.ErrFileChanged, and the Object
// stays changed (sticky) like a changed local file. Bytes of two versions
// are never mixed.
//
// Endpoint, region and credentials come from the standard AWS variables
// (AWS_ENDPOINT_URL, AWS_REGION, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
// AWS_PROFILE, …) and the shared config files, through aws-sdk-go-v2's
// config loader, once per endpoint per Client. With a custom endpoint (an
// S3-compatible server) requests use path-style addressing: a gateway on
// 127.0.0.1 has no bucket subdomains. Credentials never appear in errors:
// they travel in the request signature only, and errors name the object,
// the range and the server's status.
//
// Each GET has its own timeout; 5xx answers, throttling (429, SlowDown)
// and connection errors (resets, timeouts, truncated bodies) are retried
// with exponential backoff and jitter, a bounded number of times. Requests
// in flight are bounded per object and per server (all the objects of one
// Client). ReadBatch coalesces adjacent and overlapping ranges and sends
// the resulting GETs in parallel.
//
// Every request gives up when its caller's context ends: its attempts,
// waits for a request slot and backoffs.
//
// An Object implements partial.Storage, BatchReader, FileChecker and
// StatsReporter; partial/storage.Open puts a block cache in
// front of it, and OpenMemory downloads an object whole (mode full).
package s3
