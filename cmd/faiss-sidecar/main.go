package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/faiss-sidecar/faiss-sidecar/internal/buildinfo"
)

// doc describes one command for --help and the top-level usage.
type doc struct {
	name     string // "bench storage" for a subcommand of bench
	synopsis string // the usage line after "faiss-sidecar "
	summary  string // one sentence
}

// docs lists the commands in the order the top-level usage shows them.
var docs = []doc{
	{"serve", "serve [--config FILE] [--listen ADDR] [--data-root DIR]… [--memory-budget BYTES] [--token T] [--demo]",
		"Serve FAISS indexes over HTTP; with nothing configured, the embedded demo index."},
	{"health", "health [--url URL] [--wait D]",
		"Ask a running server's /_health endpoint and exit 0 when it answers 200."},
	{"inspect", "inspect FILE [--json] [--verify] [--backend NAME] [--vectors FILE]",
		"Print an index file's structure, sections and memory needs; --verify also checks every section."},
	{"search", "search INDEX --queries Q (--k K | --radius R) [--ef-search EF] [--index-ef-search N] [--mode full|memory_efficient|on_disk] [--compression C] [--guide-dir DIR] [--backend NAME] [--memory-budget BYTES] " +
		"[--semantics S] [--kernel K] [--allow-ids FILE] [--vectors FILE] [--rerank-vectors FILE [--oversample F] [--rerank-strategy S]] [--out OUT.jsonl]",
		"Search an HNSW index with query vectors, writing one JSON line of ids and distances per query."},
	{"bench", "bench INDEX --queries Q --k K [--ef-search EF] [--index-ef-search N] [--threads N] [--mode M] [--compression C] [--guide-dir DIR] [--oversample F] [--memory-budget BYTES] [--backend B] [--vectors FILE] [--gt GT.ivecs] [--duration D | --fresh] [--max-queries N] [--json]",
		"Measure search throughput, latency and (with --gt) recall@k on an index."},
	{"bench storage", "bench storage FILE --backend NAME [--cold] [--warmup] [--reads N] [--read-size B] [--inflight K] [--json]",
		"Measure random reads of a file through one storage backend."},
	{"bench rerank", "bench rerank --vectors FILE [--shortlist N] [--trials T] [--strategy S] [--workers W] [--cold] [--json]",
		"Measure fetching and rescoring random shortlists of full-precision vectors."},
	{"compress", "compress IN OUT [--frame-size N] [--level L]",
		"Write a copy of a file in the seekable zstd format, which --backend zstd reads in place."},
	{"quantize", "quantize INDEX --compression " + strings.Join(levelNames(), "|") + " [--out FILE] [--guide-dir DIR]",
		"Build the compressed guide mode on_disk walks the graph on, ahead of time (else the first on_disk open builds it)."},
	{"export-vectors", "export-vectors IN(.fvecs|.npy|FAISS file) OUT.vec [--layout auto|packed|aligned]",
		"Write full-precision vectors (.fvecs, float32 .npy, or a FAISS file's flat vectors) as a .vec file, packed or aligned for direct I/O."},
	{"version", "version [--json]",
		"Print the version and the source revision this binary was built from."},
}

// commands runs the top-level commands (bench dispatches its subcommands).
var commands = map[string]func(args []string, stdout, stderr io.Writer) error{
	"serve":          runServe,
	"health":         runHealth,
	"inspect":        runInspect,
	"search":         runSearch,
	"bench":          runBench,
	"compress":       runCompress,
	"quantize":       runQuantize,
	"export-vectors": runExportVectors,
	"version":        runVersion,
}

func docOf(name string) doc {
	for _, d := range docs {
		if d.name == name {
			return d
		}
	}
	return doc{name: name, synopsis: name}
}

// usageError marks errors that should exit with status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return &usageError{fmt.Sprintf(format, a...)} }

// checkArgs is the usage error, naming what is wrong, for a command whose
// positional arguments are not the names given (nil when they are).
func checkArgs(name string, pos []string, names ...string) error {
	switch {
	case len(pos) > len(names):
		return usagef("unexpected argument %q; usage: faiss-sidecar %s", pos[len(names)], docOf(name).synopsis)
	case len(pos) < len(names):
		return usagef("missing argument %s; usage: faiss-sidecar %s", names[len(pos)], docOf(name).synopsis)
	}
	return nil
}

// required is the usage error for a required flag not given (nil when it was).
func required(name, flag, value string) error {
	if value != "" {
		return nil
	}
	return usagef("--%s is required; usage: faiss-sidecar %s", flag, docOf(name).synopsis)
}

// helpRequest is what parseArgs returns for --help: run prints the
// command's help to stdout and exits 0.
type helpRequest struct{ fs *flag.FlagSet }

func (h *helpRequest) Error() string { return "help requested" }
func (h *helpRequest) Unwrap() error { return flag.ErrHelp }

func main() {
	// The libraries read no environment; this switch is the binary's.
	procEnv.NoAVX512 = os.Getenv("FAISS_SIDECAR_NO_AVX512") != ""
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		printUsage(stderr)
		return 2
	}
	switch args[0] {
	case "-h", "-help", "--help":
		printUsage(stdout)
		return 0
	case "help": // help COMMAND is COMMAND --help
		if len(args) == 1 {
			printUsage(stdout)
			return 0
		}
		return run(append(args[1:], "--help"), stdout, stderr)
	case "-version", "--version":
		args = append([]string{"version"}, args[1:]...)
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "faiss-sidecar: unknown command %q (run faiss-sidecar --help)\n", args[0])
		return 2
	}
	err := cmd(args[1:], stdout, stderr)
	var help *helpRequest
	switch {
	case err == nil:
		return 0
	case errors.As(err, &help):
		printHelp(stdout, help.fs)
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	}
	name := args[0]
	if name == "bench" && len(args) > 1 && (args[1] == "storage" || args[1] == "rerank") {
		name += " " + args[1]
	}
	// Exactly one line: collapse any newline in wrapped messages.
	msg := strings.ReplaceAll(err.Error(), "\n", " ")
	fmt.Fprintf(stderr, "faiss-sidecar %s: %s\n", name, msg)
	var ue *usageError
	if errors.As(err, &ue) {
		return 2
	}
	return 1
}

func printUsage(w io.Writer) {
	fmt.Fprintf(w, "usage: faiss-sidecar COMMAND [ARGS]   (faiss-sidecar COMMAND --help for its flags)\n\ncommands:\n")
	for _, d := range docs {
		fmt.Fprintf(w, "  %-15s %s\n", d.name, d.summary)
	}
	fmt.Fprintf(w, "\nexit status: 0 success, 1 failure (missing or corrupt file, I/O error), 2 usage error (bad flag, value or arguments)\n")
}

// printHelp prints a command's usage line, what it does, and its flags.
func printHelp(w io.Writer, fs *flag.FlagSet) {
	d := docOf(fs.Name())
	fmt.Fprintf(w, "usage: faiss-sidecar %s\n\n%s\n", d.synopsis, d.summary)
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n > 0 {
		fmt.Fprintf(w, "\nflags:\n")
		fs.SetOutput(w)
		fs.PrintDefaults()
		fs.SetOutput(io.Discard)
	}
}

// parseArgs parses flags that may come before or after positional
// arguments (`inspect FILE --json` and `inspect --json FILE` both work) and
// returns the positionals. Flag errors become usage errors of one line;
// -h or --help a *helpRequest.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	fs.SetOutput(io.Discard)
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, &helpRequest{fs}
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

// runVersion prints buildinfo.Version, or with --json its fields.
func runVersion(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print one JSON object: version, revision, time, modified, go")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if err := checkArgs("version", pos); err != nil {
		return err
	}
	if *asJSON {
		return printJSON(stdout, buildinfo.Get())
	}
	_, err = fmt.Fprintln(stdout, buildinfo.Version())
	return err
}
