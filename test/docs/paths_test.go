package docs

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// root is the repository, from this package's directory.
const root = "../.."

// topLevel are the directories a repository-relative path in the docs
// starts with.
var topLevel = []string{".ci/", "charts/", "cmd/", "docs/", "hack/", "manifests/", "pkg/", "policies/", "test/"}

// fileExtensions mark a bare file name (`phase.go`, `kubelet/render.go`)
// as one of the repository's files. Not YAML: a bare `config.yaml` is as
// often a kubelet's or an apiserver's file on a host.
var fileExtensions = map[string]bool{".go": true, ".md": true, ".sh": true, ".rego": true}

// outputs are paths the docs name that commands write, not the repository.
var outputs = map[string]string{
	"manifests/overlays/static-certs/certs": "make certs writes it",
}

var (
	codeSpan = regexp.MustCompile("`([^`\n]+)`")
	link     = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	// fenced is a fenced block: commands and examples, not references.
	fenced = regexp.MustCompile("(?ms)^\\s*```.*?^\\s*```")
)

// TestNamedPathsExist fails on every path README.md and docs/*.md name that
// is not in the tree: repository-relative ones exactly, bare file names and
// partial paths as the end of some file's path, links relative to the
// document.
func TestNamedPathsExist(t *testing.T) {
	tree := repositoryTree(t)
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	docs = append(docs, filepath.Join(root, "README.md"))
	checked := 0
	for _, doc := range docs {
		rel, err := filepath.Rel(root, doc)
		if err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, named := range namedPaths(filepath.ToSlash(rel), string(data)) {
			checked++
			if !tree.has(named) {
				t.Errorf("%s names %s, which is not in the repository", rel, named)
			}
		}
	}
	t.Logf("%d paths checked", checked)
	if checked == 0 {
		t.Fatal("no path found in the docs: the parsing is broken")
	}
}

// TestNamedPathsFailsOnAMissingFile keeps the check able to fail.
func TestNamedPathsFailsOnAMissingFile(t *testing.T) {
	tree := repositoryTree(t)
	text := "The step is in `pkg/nodeagent/reconciler/phase.go`, then `apply.go`, see [gone](gone.md) and `cmd/nowhere/`."
	var missing []string
	for _, named := range namedPaths("docs/architecture.md", text) {
		if !tree.has(named) {
			missing = append(missing, named.String())
		}
	}
	want := []string{"apply.go", "cmd/nowhere", "docs/gone.md"}
	if strings.Join(missing, " ") != strings.Join(want, " ") {
		t.Fatalf("missing %q, want %q", missing, want)
	}
}

// namedPath is a path a document names: exact (repository-relative) or
// the end of some file's path.
type namedPath struct {
	path   string
	suffix bool
}

func (n namedPath) String() string { return n.path }

// namedPaths lists the paths the document doc (repository-relative) names
// in text, outside fenced blocks.
func namedPaths(doc, text string) []namedPath {
	text = fenced.ReplaceAllString(text, "")
	var out []namedPath
	for _, m := range codeSpan.FindAllStringSubmatch(text, -1) {
		token := strings.TrimSuffix(m[1], "/")
		if strings.ContainsAny(token, " <>*{}$=:,|()[]\"'") || strings.HasPrefix(token, "/") || strings.Contains(token, "...") {
			continue
		}
		switch {
		case outputs[token] != "":
		case hasTopLevel(token):
			// A package's identifier (`pkg/kubeletconfig/effective.Predict`)
			// names the package.
			if ext := path.Ext(token); len(ext) > 1 && !fileExtensions[ext] && ext[1] >= 'A' && ext[1] <= 'Z' {
				token = strings.TrimSuffix(token, ext)
			}
			out = append(out, namedPath{path: token})
		case fileExtensions[path.Ext(token)] && !strings.Contains(token, "://"):
			out = append(out, namedPath{path: token, suffix: true})
		}
	}
	for _, m := range link.FindAllStringSubmatch(text, -1) {
		target, _, _ := strings.Cut(m[1], "#")
		if target == "" || strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
			continue
		}
		out = append(out, namedPath{path: strings.TrimSuffix(path.Join(path.Dir(doc), target), "/")})
	}
	return out
}

func hasTopLevel(p string) bool {
	for _, dir := range topLevel {
		if strings.HasPrefix(p+"/", dir) {
			return true
		}
	}
	return false
}

// tree is every file and directory of the repository, by
// repository-relative path.
type tree map[string]bool

func repositoryTree(t *testing.T) tree {
	t.Helper()
	paths := tree{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		paths[filepath.ToSlash(rel)] = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return paths
}

func (tr tree) has(n namedPath) bool {
	if tr[n.path] {
		return true
	}
	if !n.suffix {
		return false
	}
	for p := range tr {
		if strings.HasSuffix(p, "/"+n.path) {
			return true
		}
	}
	return false
}
