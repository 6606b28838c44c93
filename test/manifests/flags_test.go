package manifests

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/nodeguard/nodeguard/test/controlplane"
)

// klogFlags are the flags every command adds through klog.InitFlags.
var klogFlags = []string{"v", "vmodule", "logtostderr", "alsologtostderr", "stderrthreshold", "log_dir", "log_file", "log_file_max_size", "one_output", "skip_headers", "skip_log_headers", "add_dir_header", "log_backtrace_at"}

var (
	flagNamesOnce sync.Once
	flagNames     map[string][]string
	flagNamesErr  error
)

// commandFlags returns the flags a command under cmd/ defines, read from the
// fs.*Var calls of its options.go: commands are package main and cannot be
// imported, and a manifest passing a flag the binary does not know would
// crash-loop every pod.
func commandFlags(t *testing.T, command string) []string {
	t.Helper()
	flagNamesOnce.Do(func() {
		flagNames = map[string][]string{}
		for _, cmd := range []string{"webhook", "agent", "rollout-controller"} {
			names, err := parseFlagNames(cmd)
			if err != nil {
				flagNamesErr = err
				return
			}
			flagNames[cmd] = append(names, klogFlags...)
		}
	})
	if flagNamesErr != nil {
		t.Fatal(flagNamesErr)
	}
	names, ok := flagNames[command]
	if !ok {
		t.Fatalf("no flags known for cmd/%s", command)
	}
	return names
}

func parseFlagNames(command string) ([]string, error) {
	root, err := controlplane.RepoRoot()
	if err != nil {
		return nil, err
	}
	path := filepath.Join(root, "cmd", command, "options.go")
	file, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	if err != nil {
		return nil, fmt.Errorf("parsing %s: %w", path, err)
	}
	var names []string
	ast.Inspect(file, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || len(call.Args) < 2 {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok || !strings.HasSuffix(sel.Sel.Name, "Var") {
			return true
		}
		if lit, ok := call.Args[1].(*ast.BasicLit); ok && lit.Kind == token.STRING {
			if name, err := strconv.Unquote(lit.Value); err == nil {
				names = append(names, name)
			}
		}
		return true
	})
	if len(names) < 5 {
		return nil, fmt.Errorf("%s: found only %d flag definitions (%v); has the way flags are defined changed?", path, len(names), names)
	}
	return names, nil
}

// parseArgs reads --name=value and -name=value arguments; every argument in
// the manifests is written that way, so that one argument is one flag.
func parseArgs(args []string) (map[string]string, error) {
	values := map[string]string{}
	for _, arg := range args {
		trimmed := strings.TrimPrefix(strings.TrimPrefix(arg, "-"), "-")
		name, value, ok := strings.Cut(trimmed, "=")
		if !ok || trimmed == arg || name == "" {
			return nil, fmt.Errorf("argument %q: write flags as --name=value", arg)
		}
		if _, dup := values[name]; dup {
			return nil, fmt.Errorf("flag --%s given twice", name)
		}
		values[name] = value
	}
	return values, nil
}

// checkArgsAreFlags checks every argument against the command's flags.
func checkArgsAreFlags(t *testing.T, command string, args []string) (map[string]string, error) {
	known := commandFlags(t, command)
	values, err := parseArgs(args)
	if err != nil {
		return nil, err
	}
	for name := range values {
		if !slices.Contains(known, name) {
			return nil, fmt.Errorf("--%s is not a flag of cmd/%s", name, command)
		}
	}
	return values, nil
}

func TestParseFlagNames(t *testing.T) {
	for command, want := range map[string][]string{
		"webhook": {"secure-port", "tls-cert-file", "tls-private-key-file", "client-ca-file", "settings", "shutdown-drain-duration", "shutdown-timeout"},
		"agent":   {"node-name", "kubeconfig", "state-dir", "kubelet-config-file", "kubelet-restart-command"},
	} {
		got := commandFlags(t, command)
		for _, name := range want {
			if !slices.Contains(got, name) {
				t.Errorf("cmd/%s: flag --%s not found among %v", command, name, got)
			}
		}
	}
}

func TestParseArgs(t *testing.T) {
	for _, tt := range []struct {
		args    []string
		wantErr bool
	}{
		{args: []string{"--a=1", "-v=2", "--b="}},
		{args: []string{"--a", "1"}, wantErr: true},
		{args: []string{"positional"}, wantErr: true},
		{args: []string{"--a=1", "--a=2"}, wantErr: true},
		{args: []string{"--=x"}, wantErr: true},
	} {
		if _, err := parseArgs(tt.args); (err != nil) != tt.wantErr {
			t.Errorf("parseArgs(%q) error = %v, want error %v", tt.args, err, tt.wantErr)
		}
	}
}
