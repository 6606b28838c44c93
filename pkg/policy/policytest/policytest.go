package policytest

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/format"
	"github.com/open-policy-agent/opa/v1/storage/inmem"
	"github.com/open-policy-agent/opa/v1/tester"

	"github.com/nodeguard/nodeguard/pkg/policy"
)

// DefaultTimeout bounds each Rego test, as `opa test` does by default.
const DefaultTimeout = 5 * time.Second

// File is one Rego file, tests included.
type File struct {
	// Name is the path under the directory, slash-separated.
	Name string
	Data []byte
}

// ReadFiles reads every *.rego file under fsys, tests included, skipping
// hidden entries as the engine does, in a stable order.
func ReadFiles(fsys fs.FS) ([]File, error) {
	var files []File
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != "." && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.IsDir() || path.Ext(p) != ".rego" {
			return nil
		}
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		files = append(files, File{Name: p, Data: data})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading policy files: %w", err)
	}
	slices.SortFunc(files, func(a, b File) int { return strings.Compare(a.Name, b.Name) })
	return files, nil
}

// Run compiles every Rego file under fsys against policy.Capabilities and
// runs the tests (rules named test_*). It returns an error when the files do
// not parse or compile; failing tests are results whose Pass is false.
func Run(ctx context.Context, fsys fs.FS, timeout time.Duration) ([]*tester.Result, error) {
	files, err := ReadFiles(fsys)
	if err != nil {
		return nil, err
	}
	modules := make(map[string]*ast.Module, len(files))
	for _, f := range files {
		m, err := ast.ParseModuleWithOpts(f.Name, string(f.Data), ast.ParserOptions{RegoVersion: ast.RegoV1, ProcessAnnotation: true})
		if err != nil {
			return nil, fmt.Errorf("parsing %s: %w", f.Name, err)
		}
		modules[f.Name] = m
	}
	compiler := ast.NewCompiler().
		WithCapabilities(policy.Capabilities()).
		WithDefaultRegoVersion(ast.RegoV1).
		WithEnablePrintStatements(true).
		WithUseTypeCheckAnnotations(true)
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ch, err := tester.NewRunner().
		SetCompiler(compiler).
		SetStore(inmem.New()).
		SetDefaultRegoVersion(ast.RegoV1).
		CapturePrintOutput(true).
		SetTimeout(timeout).
		Run(ctx, modules)
	if err != nil {
		return nil, fmt.Errorf("compiling policies and tests: %w", err)
	}
	var results []*tester.Result
	for r := range ch {
		results = append(results, r)
	}
	slices.SortFunc(results, func(a, b *tester.Result) int {
		return strings.Compare(a.Package+"."+a.Name, b.Package+"."+b.Name)
	})
	return results, nil
}

// Unformatted lists the Rego files under fsys that `opa fmt` would change.
func Unformatted(fsys fs.FS) ([]string, error) {
	files, err := ReadFiles(fsys)
	if err != nil {
		return nil, err
	}
	var unformatted []string
	for _, f := range files {
		formatted, err := format.SourceWithOpts(f.Name, f.Data, format.Opts{RegoVersion: ast.RegoV1})
		if err != nil {
			return nil, fmt.Errorf("formatting %s: %w", f.Name, err)
		}
		if !bytes.Equal(formatted, f.Data) {
			unformatted = append(unformatted, f.Name)
		}
	}
	return unformatted, nil
}
