package disruption

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
)

// The reference generated from this package, and how to regenerate it.
const (
	docPath       = "../../../docs/disruptive-changes.md"
	updateEnv     = "NODEGUARD_UPDATE_DOCS"
	regenerateCmd = updateEnv + "=1 go test ./pkg/kubeletconfig/disruption -run TestDocsAreCurrent"
)

var update = flag.Bool("update", false, "rewrite the generated tables of "+docPath)

// docSection is a generated part of the doc, between its markers.
type docSection struct {
	begin, end string
	render     func() string
}

var docSections = []docSection{
	{begin: "<!-- BEGIN FIELDS -->", end: "<!-- END FIELDS -->", render: fieldsTable},
	{begin: "<!-- BEGIN STATE FILES -->", end: "<!-- END STATE FILES -->", render: stateFilesTable},
}

// TestDocsAreCurrent fails when the tables of docs/disruptive-changes.md
// differ from what Fields and StateFiles say, so the reference cannot drift
// from the code. With -update, or NODEGUARD_UPDATE_DOCS=1, it rewrites them.
func TestDocsAreCurrent(t *testing.T) {
	doc, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	regenerated := doc
	for _, section := range docSections {
		regenerated, err = replaceSection(regenerated, section)
		if err != nil {
			t.Fatalf("%s: %v", docPath, err)
		}
	}
	if bytes.Equal(doc, regenerated) {
		return
	}
	if *update || os.Getenv(updateEnv) != "" {
		if err := os.WriteFile(docPath, regenerated, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("rewrote the generated tables of %s", docPath)
		return
	}
	t.Errorf("%s is stale (%s); regenerate with: %s", docPath, firstDifference(doc, regenerated), regenerateCmd)
}

// replaceSection puts a freshly rendered section between its markers,
// which must each be there once, on lines of their own.
func replaceSection(doc []byte, section docSection) ([]byte, error) {
	text := string(doc)
	if strings.Count(text, section.begin) != 1 || strings.Count(text, section.end) != 1 {
		return nil, fmt.Errorf("want exactly one %s and one %s", section.begin, section.end)
	}
	before, rest, _ := strings.Cut(text, section.begin+"\n")
	_, after, found := strings.Cut(rest, section.end)
	if !found || !strings.HasSuffix(before, "\n") {
		return nil, fmt.Errorf("%s must be on a line of its own, before %s", section.begin, section.end)
	}
	return []byte(before + section.begin + "\n" + section.render() + section.end + after), nil
}

func fieldsTable() string {
	var b strings.Builder
	b.WriteString("| Field | Needs | When | Removes | Why |\n")
	b.WriteString("| --- | --- | --- | --- | --- |\n")
	for _, f := range Fields() {
		removes := "-"
		if len(f.StateFiles) > 0 {
			removes = "`" + strings.Join(f.StateFiles, "`, `") + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", f.Name, f.Need, cell(f.When), removes, cell(f.Why))
	}
	return b.String()
}

func stateFilesTable() string {
	var b strings.Builder
	b.WriteString("| File | In | Removed on a drain | Kept by | Why |\n")
	b.WriteString("| --- | --- | --- | --- | --- |\n")
	for _, f := range StateFiles() {
		removed := "never"
		if f.Removable {
			removed = "when a field that invalidates it changes"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", f.Name, cell(f.Where), removed, cell(f.Owner), cell(f.Why))
	}
	return b.String()
}

// cell makes text safe inside a Markdown table cell.
func cell(text string) string {
	return strings.ReplaceAll(text, "|", `\|`)
}

func firstDifference(old, updated []byte) string {
	oldLines, newLines := bytes.Split(old, []byte("\n")), bytes.Split(updated, []byte("\n"))
	for i := range min(len(oldLines), len(newLines)) {
		if !bytes.Equal(oldLines[i], newLines[i]) {
			return fmt.Sprintf("line %d: the doc says %q, the code %q", i+1, oldLines[i], newLines[i])
		}
	}
	return fmt.Sprintf("the doc has %d lines, the code makes %d", len(oldLines), len(newLines))
}
