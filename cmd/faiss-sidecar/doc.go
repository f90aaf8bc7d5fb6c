// Command faiss-sidecar serves and inspects FAISS index files without
// loading them whole.
//
//	faiss-sidecar serve [--config FILE] [--listen ADDR] [--data-root DIR]…
//	faiss-sidecar health [--url URL]
//	faiss-sidecar inspect FILE [--json] [--verify] [--backend NAME]
//	faiss-sidecar compress IN OUT [--frame-size N] [--level L]
//	faiss-sidecar search INDEX --queries Q --k K [--ef-search EF] [--mode M] [--backend B] [--out OUT.jsonl]
//	faiss-sidecar export-vectors IN OUT.vec
//	faiss-sidecar bench INDEX --queries Q --k K [--ef-search EF] [--threads N] [--gt GT.ivecs] --json
//	faiss-sidecar bench storage FILE --backend NAME [--cold] [--inflight K] --json
//	faiss-sidecar bench rerank --vectors FILE --shortlist N --trials T --strategy S --json
//	faiss-sidecar version [--json]   (also faiss-sidecar --version)
//
// Every command takes --help. Every failure prints exactly one line on
// stderr and exits with status 1, or 2 for a usage error (an unknown flag,
// a bad flag value, a missing argument, an invalid configuration).
package main
