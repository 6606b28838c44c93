package policy

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
)

// Limits on a policy set, so that a stray file in the directory gives a
// clear error instead of a slow or huge compile.
const (
	maxFileBytes = 1 << 20
	maxSetBytes  = 8 << 20
)

// Problem is one thing wrong with a policy set.
type Problem struct {
	// File is the file's path as the engine read it (the directory joined
	// with the relative path), or the directory itself.
	File string
	// Line and Column are 1-based; 0 when the problem has no position.
	Line, Column int
	// Code is OPA's error code (rego_parse_error, rego_type_error, ...) or
	// "nodeguard_policy_error" for nodeguard's own checks.
	Code    string
	Message string
}

func (p Problem) String() string {
	var b strings.Builder
	b.WriteString(p.File)
	if p.Line > 0 {
		fmt.Fprintf(&b, ":%d", p.Line)
		if p.Column > 0 {
			fmt.Fprintf(&b, ":%d", p.Column)
		}
	}
	b.WriteString(": ")
	if p.Code != "" {
		b.WriteString(p.Code)
		b.WriteString(": ")
	}
	b.WriteString(p.Message)
	return b.String()
}

// codeNodeguard marks problems found by nodeguard's checks rather than OPA's.
const codeNodeguard = "nodeguard_policy_error"

// LoadError says why a policy set was not put into service. The previous
// good set, if any, keeps serving.
type LoadError struct {
	// Source is the policy directory, or "embedded".
	Source string
	// Hash identifies the content that failed, "" when it could not be read.
	Hash     string
	Problems []Problem
}

func (e *LoadError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "policy set from %s does not load", e.Source)
	switch len(e.Problems) {
	case 0:
	case 1:
		b.WriteString(": ")
		b.WriteString(e.Problems[0].String())
	default:
		fmt.Fprintf(&b, " (%d problems): ", len(e.Problems))
		for i, p := range e.Problems {
			if i > 0 {
				b.WriteString("; ")
			}
			b.WriteString(p.String())
		}
	}
	return b.String()
}

// policyFile is one .rego file read from a source.
type policyFile struct {
	// name is the path shown in errors and locations.
	name string
	data []byte
}

// snapshot is the content of a source at one moment.
type snapshot struct {
	files []policyFile
	hash  string
}

// isPolicyFile reports whether a directory entry is part of the served set.
// Test files are left out, as are hidden entries: Kubernetes mounts a
// ConfigMap through "..data" and "..<timestamp>" directories, and the
// visible names are symlinks into them.
func isPolicyFile(name string) bool {
	return strings.HasSuffix(name, ".rego") && !strings.HasSuffix(name, "_test.rego") && !strings.HasPrefix(name, ".")
}

// readSnapshot reads every policy file under fsys, in a stable order, and
// hashes names and content together. displayRoot prefixes names in errors.
func readSnapshot(fsys fs.FS, displayRoot string) (snapshot, []Problem) {
	var (
		files    []policyFile
		problems []Problem
		total    int
	)
	display := func(p string) string {
		if p == "." {
			return displayRoot
		}
		return path.Join(displayRoot, p)
	}
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			problems = append(problems, Problem{File: display(p), Message: pathErrorMessage(err)})
			if d != nil && d.IsDir() && p != "." {
				return fs.SkipDir
			}
			return nil
		}
		if p == "." {
			return nil
		}
		if strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.IsDir() || !isPolicyFile(d.Name()) {
			return nil
		}
		// Stat follows symlinks (the ConfigMap layout); a name that leads to
		// a directory or device is not a policy.
		info, err := fs.Stat(fsys, p)
		if err != nil {
			problems = append(problems, Problem{File: display(p), Message: pathErrorMessage(err)})
			return nil
		}
		if !info.Mode().IsRegular() {
			return nil
		}
		if info.Size() > maxFileBytes {
			problems = append(problems, Problem{File: display(p), Code: codeNodeguard,
				Message: fmt.Sprintf("file is %d bytes, the limit is %d", info.Size(), maxFileBytes)})
			return nil
		}
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			problems = append(problems, Problem{File: display(p), Message: pathErrorMessage(err)})
			return nil
		}
		total += len(data)
		if total > maxSetBytes {
			return fmt.Errorf("policy files add up to more than %d bytes", maxSetBytes)
		}
		files = append(files, policyFile{name: display(p), data: data})
		return nil
	})
	if err != nil {
		problems = append(problems, Problem{File: displayRoot, Code: codeNodeguard, Message: err.Error()})
	}
	slices.SortFunc(files, func(a, b policyFile) int { return cmp.Compare(a.name, b.name) })
	return snapshot{files: files, hash: hashFiles(files)}, problems
}

// attemptKey names what one read of the source saw: the hash of the files
// it read and the problems met while reading. The problems belong in it
// because a read can fail on a directory changing under it (a file listed,
// then removed before it is read): keyed on the files alone, that failed
// attempt would carry the hash of the finished change, and no later poll
// would try the set again. A problem that persists, such as a file nobody
// may read, keeps the same key and is not retried on every poll.
func attemptKey(snap snapshot, problems []Problem) string {
	if len(problems) == 0 {
		return snap.hash
	}
	h := sha256.New()
	h.Write([]byte(snap.hash))
	for _, p := range problems {
		fmt.Fprintf(h, "\x00%s\x00%d\x00%d\x00%s\x00%s", p.File, p.Line, p.Column, p.Code, p.Message)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// pathErrorMessage drops the fs-relative path from an error, since the
// problem already names the file.
func pathErrorMessage(err error) string {
	var pathErr *fs.PathError
	if errors.As(err, &pathErr) {
		return pathErr.Op + ": " + pathErr.Err.Error()
	}
	return err.Error()
}

// hashFiles hashes names and content, length-prefixed so that no two
// different sets can run together into the same byte stream.
func hashFiles(files []policyFile) string {
	h := sha256.New()
	var n [8]byte
	for _, f := range files {
		for _, part := range [][]byte{[]byte(f.name), f.data} {
			binary.BigEndian.PutUint64(n[:], uint64(len(part)))
			h.Write(n[:])
			h.Write(part)
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// parseFiles parses every file as Rego v1 and reports every file's errors,
// not only the first file's.
func parseFiles(files []policyFile) (map[string]*ast.Module, []Problem) {
	modules := make(map[string]*ast.Module, len(files))
	var problems []Problem
	opts := ast.ParserOptions{RegoVersion: ast.RegoV1, ProcessAnnotation: true}
	for _, f := range files {
		m, err := ast.ParseModuleWithOpts(f.name, string(f.data), opts)
		if err != nil {
			problems = append(problems, problemsFrom(err, f.name)...)
			continue
		}
		if m == nil {
			problems = append(problems, Problem{File: f.name, Code: codeNodeguard, Message: "file holds no package"})
			continue
		}
		modules[f.name] = m
	}
	return modules, problems
}

// problemsFrom turns OPA errors into problems; fallbackFile names the file
// when an error carries no location.
func problemsFrom(err error, fallbackFile string) []Problem {
	var astErrs ast.Errors
	if !errors.As(err, &astErrs) {
		var one *ast.Error
		if !errors.As(err, &one) {
			return []Problem{{File: fallbackFile, Message: err.Error()}}
		}
		astErrs = ast.Errors{one}
	}
	problems := make([]Problem, 0, len(astErrs))
	for _, e := range astErrs {
		p := Problem{File: fallbackFile, Code: e.Code, Message: e.Message}
		if loc := e.Location; loc != nil {
			if loc.File != "" {
				p.File = loc.File
			}
			p.Line, p.Column = loc.Row, loc.Col
		}
		problems = append(problems, p)
	}
	return problems
}

// Rules the engine reads, and the shape each must have.
var (
	admissionDenyRef = ast.MustParseRef("data.nodeguard.admission.deny")
	admissionWarnRef = ast.MustParseRef("data.nodeguard.admission.warn")
	authzDenyRef     = ast.MustParseRef("data.nodeguard.authz.deny")
	authzAllowRef    = ast.MustParseRef("data.nodeguard.authz.allow")
	admissionPkgRef  = ast.MustParseRef("data.nodeguard.admission")
	authzPkgRef      = ast.MustParseRef("data.nodeguard.authz")
	reachableRef     = ast.MustParseRef(BuiltinReachable)
)

// checkShapes catches the mistakes the compiler accepts but the engine
// cannot use: deny/warn written as something other than a set (for
// instance a v0-style `deny[msg] { ... }`, which Rego v1 reads as an
// object), allow written as a set or object.
func checkShapes(c *ast.Compiler) []Problem {
	var problems []Problem
	for _, ref := range []ast.Ref{admissionDenyRef, admissionWarnRef, authzDenyRef} {
		for _, r := range c.GetRulesWithPrefix(ref) {
			if !r.Ref().Equal(ref) || r.Head.RuleKind() != ast.MultiValue {
				problems = append(problems, ruleProblem(r, fmt.Sprintf(
					"%s must be a set of messages: write `%s contains msg if { ... }`", ref, lastName(ref))))
			}
		}
	}
	for _, r := range c.GetRulesWithPrefix(authzAllowRef) {
		if !r.Ref().Equal(authzAllowRef) || r.Head.RuleKind() != ast.SingleValue {
			problems = append(problems, ruleProblem(r, fmt.Sprintf(
				"%s must be a boolean: write `allow if { ... }`", authzAllowRef)))
		}
	}
	return problems
}

// checkReachableKinds rejects a constant kind that nodeguard.reachable does
// not support: at run time the call would only be undefined, which a
// `not nodeguard.reachable(...)` would silently read as "unreachable".
func checkReachableKinds(modules map[string]*ast.Module) []Problem {
	var problems []Problem
	check := func(operands []*ast.Term, loc *ast.Location) {
		if len(operands) < 2 {
			return
		}
		kind, ok := operands[1].Value.(ast.String)
		if !ok || string(kind) == KindConfigMap {
			return
		}
		p := Problem{Code: codeNodeguard, Message: fmt.Sprintf(
			"%s: kind %q is not supported, only %q", BuiltinReachable, string(kind), KindConfigMap)}
		if loc != nil {
			p.File, p.Line, p.Column = loc.File, loc.Row, loc.Col
		}
		problems = append(problems, p)
	}
	for _, name := range sortedKeys(modules) {
		ast.WalkExprs(modules[name], func(e *ast.Expr) bool {
			if e.IsCall() && e.Operator().Equal(reachableRef) {
				check(e.Operands(), e.Location)
			}
			return false
		})
		ast.WalkTerms(modules[name], func(t *ast.Term) bool {
			if call, ok := t.Value.(ast.Call); ok && len(call) > 0 {
				if ref, ok := call[0].Value.(ast.Ref); ok && ref.Equal(reachableRef) {
					check(call[1:], t.Location)
				}
			}
			return false
		})
	}
	return problems
}

// lastName is the last part of a ref like data.nodeguard.authz.deny.
func lastName(ref ast.Ref) string {
	if s, ok := ref[len(ref)-1].Value.(ast.String); ok {
		return string(s)
	}
	return ref[len(ref)-1].String()
}

func ruleProblem(r *ast.Rule, msg string) Problem {
	p := Problem{Code: codeNodeguard, Message: msg}
	if loc := r.Location; loc != nil {
		p.File, p.Line, p.Column = loc.File, loc.Row, loc.Col
	}
	return p
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
