// Command faiss-sidecar serves and inspects FAISS index files without
// loading them whole.
//
//	faiss-sidecar serve [--config FILE] [--listen ADDR] [--data-root DIR]…
//	faiss-sidecar inspect FILE [--json] [--verify] [--backend NAME]
//	faiss-sidecar compress IN OUT [--frame-size N]
//	faiss-sidecar search INDEX --queries Q --k K [--ef-search EF] [--mode M] [--backend B] --out OUT.jsonl
//	faiss-sidecar bench INDEX --queries Q --k K [--ef-search EF] [--threads N] [--gt GT.ivecs] --json
//	faiss-sidecar bench storage FILE --backend NAME [--cold] [--inflight K] --json
//
// Every failure prints exactly one line on stderr and exits with status 1
// (2 for a usage error).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// command is one subcommand.
type command struct {
	summary string
	run     func(args []string, stdout, stderr io.Writer) error
}

var commands = map[string]command{
	"serve":          {"serve indexes over HTTP (no arguments: the embedded demo index)", runServe},
	"health":         {"check a running server's /_health", runHealth},
	"inspect":        {"print an index file's structure, sections and memory needs", runInspect},
	"compress":       {"write a file in the zstd seekable format (read by --backend zstd)", runCompress},
	"search":         {"search an HNSW index with query vectors, writing JSON lines", runSearch},
	"export-vectors": {"write full-precision vectors as a .vec file (aligned for direct I/O)", runExportVectors},
	"bench":          {"benchmarks: bench INDEX (search QPS, latency, recall), bench storage FILE", runBench},
}

// usageError marks errors that should exit with status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return &usageError{fmt.Sprintf(format, a...)} }

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		printUsage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "faiss-sidecar: unknown command %q (run faiss-sidecar --help)\n", args[0])
		return 2
	}
	err := cmd.run(args[1:], stdout, stderr)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	}
	// Exactly one line: collapse any newline in wrapped messages.
	msg := strings.ReplaceAll(err.Error(), "\n", " ")
	fmt.Fprintf(stderr, "faiss-sidecar %s: %s\n", args[0], msg)
	var ue *usageError
	if errors.As(err, &ue) {
		return 2
	}
	return 1
}

func printUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: faiss-sidecar COMMAND [ARGS]\n\ncommands:")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-15s %s\n", n, commands[n].summary)
	}
}

// parseArgs parses flags that may come before or after positional
// arguments (`inspect FILE --json` and `inspect --json FILE` both work) and
// returns the positionals. Flag errors become usage errors of one line.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	fs.SetOutput(io.Discard)
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fs.SetOutput(os.Stderr)
				fs.PrintDefaults()
				return nil, err
			}
			return nil, usagef("%v", err)
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}
