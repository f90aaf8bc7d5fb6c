// Package doccheck holds tests that hold the documentation to the code.
package doccheck

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// root is the module's root, from this package's directory.
const root = "../.."

// TestDesignPackageTable: docs/design.md's package table has one row for
// every package `go list ./...` prints (test-support packages included) and
// no other. A package added, renamed or removed fails here, naming the row
// to add or drop; the table's rule is written under it.
func TestDesignPackageTable(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH to list the packages with")
	}
	mod := modulePath(t)
	cmd := exec.Command(goBin, "list", "-e", "-f", "{{.ImportPath}}", "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list ./...: %v\n%s", err, stderr.String())
	}
	var listed []string
	for _, p := range strings.Fields(string(out)) {
		rel, ok := strings.CutPrefix(p, mod+"/")
		if !ok {
			rel = p // the module's root package, were there one
		}
		listed = append(listed, rel)
	}

	rows := packageRows(t, filepath.Join(root, "docs", "design.md"))
	var missing, extra, twice []string
	for _, p := range listed {
		if !slices.Contains(rows, p) {
			missing = append(missing, p)
		}
	}
	seen := map[string]bool{}
	for _, r := range rows {
		if seen[r] {
			twice = append(twice, r)
		}
		seen[r] = true
		if !slices.Contains(listed, r) {
			extra = append(extra, r)
		}
	}
	if len(missing)+len(extra)+len(twice) == 0 {
		return
	}
	var b strings.Builder
	b.WriteString("docs/design.md's package table (## Packages) does not match `go list ./...`:")
	for _, p := range missing {
		b.WriteString("\n  no row for package " + p + ": add | `" + p + "` | responsibility | imports |")
	}
	for _, p := range extra {
		b.WriteString("\n  row `" + p + "` names no package: drop or rename it")
	}
	for _, p := range twice {
		b.WriteString("\n  row `" + p + "` appears more than once")
	}
	t.Error(b.String())
}

// modulePath is the module line of the root's go.mod.
func modulePath(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for l := range strings.Lines(string(b)) {
		if p, ok := strings.CutPrefix(strings.TrimSpace(l), "module "); ok {
			return strings.Trim(strings.TrimSpace(p), `"`)
		}
	}
	t.Fatal("go.mod has no module line")
	return ""
}

// packageRows returns the first cells of the table under the heading
// "## Packages" in the Markdown file path: the package paths written as
// | `path` | … |, in order.
func packageRows(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows []string
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		l := sc.Text()
		if strings.HasPrefix(l, "## ") {
			if in {
				break
			}
			in = l == "## Packages"
			continue
		}
		if !in {
			continue
		}
		cell, ok := strings.CutPrefix(l, "| `")
		if !ok {
			continue
		}
		if i := strings.Index(cell, "` |"); i > 0 {
			rows = append(rows, cell[:i])
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(rows) == 0 {
		t.Fatalf("%s: no table rows | `package` | … | under ## Packages", path)
	}
	return rows
}
