package main

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readmeTemp points a README command's /tmp/… arguments into dir, so the
// commands run as written without leaving files in the machine's /tmp.
func readmeTemp(args []string, dir string) []string {
	out := slices.Clone(args)
	for i, a := range out {
		if rest, ok := strings.CutPrefix(a, "/tmp/"); ok {
			out[i] = filepath.Join(dir, rest)
		}
	}
	return out
}

// flagValue is the value after flag in args ("" when absent).
func flagValue(args []string, flag string) string {
	if i := slices.Index(args, flag); i >= 0 && i+1 < len(args) {
		return args[i+1]
	}
	return ""
}

// TestReadmeGuideExactness holds the README's on_disk paragraph to what the
// guides are: its `quantize` and `inspect` examples run as written, the
// guide they show is exact (inspect prints its `exact:` line), and the 4x
// guide of the on_disk `search` example, which the README calls lossy, is not.
func TestReadmeGuideExactness(t *testing.T) {
	quantizes, inspects := readmeCommands(t, "quantize"), readmeCommands(t, "inspect")
	require.NotEmpty(t, quantizes, "README has no `go run ./cmd/faiss-sidecar quantize` example")
	var onDisk []string
	for _, args := range readmeCommands(t, "search") {
		if flagValue(args, "--mode") == "on_disk" {
			onDisk = args
		}
	}
	require.NotNil(t, onDisk, "README has no on_disk `search` example")
	dir := t.TempDir()
	t.Chdir(readmeRoot)

	// The README's own commands: each quantize writes a guide one of the
	// inspects reads, and that inspect says the guide is exact.
	guides := map[string]bool{}
	for _, args := range quantizes {
		args = readmeTemp(args, dir)
		code, _, stderr := runCLI(args...)
		require.Equal(t, 0, code, "%v: %s", args, stderr)
		out := flagValue(args, "--out")
		require.NotEmpty(t, out, "%v: the README's quantize names its guide with --out, for inspect to read", args)
		guides[out] = false
	}
	for _, args := range inspects {
		args = readmeTemp(args, dir)
		code, out, stderr := runCLI(args...)
		require.Equal(t, 0, code, "%v: %s", args, stderr)
		if _, ok := guides[args[1]]; ok {
			assert.Contains(t, out, "\nexact: ", "%v: the README says this guide is exact", args)
			guides[args[1]] = true
		}
	}
	for g, inspected := range guides {
		assert.True(t, inspected, "README: no `inspect` of the guide %s", g)
	}

	// The on_disk search example's guide at its compression: lossy, as the
	// README says.
	guide := filepath.Join(dir, "search-example.guide")
	code, _, stderr := runCLI("quantize", onDisk[1], "--compression", flagValue(onDisk, "--compression"), "--out", guide)
	require.Equal(t, 0, code, stderr)
	code, out, stderr := runCLI("inspect", guide, "--json")
	require.Equal(t, 0, code, stderr)
	var info struct {
		Exact *bool `json:"exact"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &info), out)
	require.NotNil(t, info.Exact, out)
	assert.False(t, *info.Exact, "the README calls the guide of %s lossy", onDisk[1])
}
