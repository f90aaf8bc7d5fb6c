package longtests

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCIRunsLongSuite: the README's test command runs a sample of the slow
// cases (On false), so CI must build the tests with -tags long, vetted
// too, or those cases would run nowhere; the README says so.
func TestCIRunsLongSuite(t *testing.T) {
	for file, lines := range map[string][]string{
		"../../.ci/run":         {"go vet -tags long ./...", "go test -race -count=1 -tags long ./..."},
		"../../README.md":       {"go test -race -count=1 ./...", "go test -race -count=1 -tags long ./..."},
		"../../docs/testing.md": {"go test -race -count=1 ./...", "go test -race -count=1 -tags long ./..."},
	} {
		b, err := os.ReadFile(file)
		require.NoError(t, err)
		for _, l := range lines {
			assert.True(t, strings.Contains(string(b), "\n"+l+"\n"), "%s has no line %q", file, l)
		}
	}
}
