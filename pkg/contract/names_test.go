package contract

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// notNames are the nodeguard.dev/ strings that are no name on an object:
// a format tag private to the package that writes it.
var notNames = map[string]string{
	"nodeguard.dev/agent-state/v1": "the agent's checkpoint files' format (pkg/nodeagent/checkpoint)",
}

// TestEveryNameIsHere keeps every nodeguard.dev/ name in this package: a
// string literal that starts with the prefix anywhere else in the product
// (pkg and cmd, tests aside) is a second place a name can drift. Tests and
// harnesses may spell a name out: they check it from outside.
func TestEveryNameIsHere(t *testing.T) {
	fset := token.NewFileSet()
	for _, root := range []string{filepath.Join("..", "..", "pkg"), filepath.Join("..", "..", "cmd")} {
		walkGo(t, root, fset)
	}
}

func walkGo(t *testing.T, root string, fset *token.FileSet) {
	t.Helper()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != root && (strings.HasPrefix(name, ".") || name == "testdata") {
				return filepath.SkipDir
			}
			if path == filepath.Join(root, "contract") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		file, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(file, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			value, err := strconv.Unquote(lit.Value)
			if err == nil && strings.HasPrefix(value, "nodeguard.dev/") && notNames[value] == "" {
				t.Errorf("%s: %q: name it in pkg/contract (names.go)", fset.Position(lit.Pos()), value)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
