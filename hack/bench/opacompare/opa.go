package opacompare

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"time"

	"github.com/nodeguard/nodeguard/policies"
)

// opaModule is the module the stock server is built from.
const opaModule = "github.com/open-policy-agent/opa"

// OPAVersion is the version of OPA linked into this binary, which is the
// version nodeguard's go.mod requires (hack/bench replaces nodeguard with
// the checkout, so its requirements hold here too).
func OPAVersion() (string, error) {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "", errors.New("no build information in this binary")
	}
	for _, dep := range info.Deps {
		if dep.Path == opaModule {
			if dep.Replace != nil {
				return dep.Replace.Version, nil
			}
			return dep.Version, nil
		}
	}
	return "", fmt.Errorf("%s is not linked into this binary", opaModule)
}

// EnsureOPA returns the path of the opa binary at version, building it
// with `go install` from the module proxy into cacheDir/opa/<version> when
// it is not there yet, as hack/testbin.sh caches the kube binaries.
func EnsureOPA(ctx context.Context, cacheDir, version string, progress io.Writer) (string, error) {
	dir := filepath.Join(cacheDir, "opa", version)
	binary := filepath.Join(dir, "opa")
	if info, err := os.Stat(binary); err == nil && info.Mode().IsRegular() && info.Mode()&0o111 != 0 {
		return binary, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("creating %s: %w", dir, err)
	}
	fmt.Fprintf(progress, "building opa %s into %s (once; about a minute)\n", version, dir)
	cmd := exec.CommandContext(ctx, "go", "install", opaModule+"@"+version)
	cmd.Env = append(os.Environ(), "GOBIN="+dir, "GOWORK=off", "GOFLAGS=-buildvcs=false")
	cmd.Stdout, cmd.Stderr = progress, progress
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go install %s@%s: %w", opaModule, version, err)
	}
	return binary, nil
}

// builtinCall matches a call of nodeguard's graph built-ins, and not a
// reference that merely ends in the same name (input.nodeguard.node).
var builtinCall = regexp.MustCompile(`(^|[^.\w])nodeguard\.(node|reachable)\(`)

// shimModule maps the graph built-ins onto the graph facts in data.
// nodeguard.reachable fails for kinds other than "configmap"; the shim
// answers false there, which no shipped policy depends on.
const shimModule = `package nodeguard_shim

node(name) := data.nodeguard_graph.nodes[name]

default reachable(_, _, _, _) := false

reachable(node_name, "configmap", namespace, name) if data.nodeguard_graph.reachable[node_name][namespace][name]
`

// queryModule asks what nodeguard's engine asks, one document per
// endpoint: deny and warn for admission, deny and allow (default false)
// for authorization.
const queryModule = `package nodeguard_bench

admission := {"deny": data.nodeguard.admission.deny, "warn": data.nodeguard.admission.warn}

default authz_allow := false

authz_allow := data.nodeguard.authz.allow

authz := {"deny": data.nodeguard.authz.deny, "allow": authz_allow}
`

// Query paths on the stock server.
const (
	opaAdmissionPath = "/v1/data/nodeguard_bench/admission"
	opaAuthzPath     = "/v1/data/nodeguard_bench/authz"
)

// writePolicies writes the shipped policies (not their tests), rewritten
// to call the shim, with the shim, the query module and the graph facts
// into dir.
func writePolicies(dir string, facts *GraphFacts) error {
	fsys := policies.FS()
	err := fs.WalkDir(fsys, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".rego") || strings.HasSuffix(path, "_test.rego") {
			return err
		}
		src, err := fs.ReadFile(fsys, path)
		if err != nil {
			return fmt.Errorf("reading %s: %w", path, err)
		}
		out := builtinCall.ReplaceAll(src, []byte("${1}data.nodeguard_shim.${2}("))
		target := filepath.Join(dir, "policies", filepath.FromSlash(path))
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return fmt.Errorf("creating %s: %w", filepath.Dir(target), err)
		}
		return os.WriteFile(target, out, 0o600)
	})
	if err != nil {
		return fmt.Errorf("writing the shipped policies: %w", err)
	}
	for name, src := range map[string]string{"shim.rego": shimModule, "query.rego": queryModule} {
		if err := os.WriteFile(filepath.Join(dir, "policies", name), []byte(src), 0o600); err != nil {
			return fmt.Errorf("writing %s: %w", name, err)
		}
	}
	data, err := json.Marshal(map[string]any{"nodeguard_graph": facts})
	if err != nil {
		return fmt.Errorf("encoding graph facts: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "policies", "data.json"), data, 0o600); err != nil {
		return fmt.Errorf("writing graph facts: %w", err)
	}
	return nil
}

// opaServer is a running `opa run --server`.
type opaServer struct {
	url  string
	cmd  *exec.Cmd
	done chan error
}

// startOPA serves dir/policies over HTTPS on a free loopback port with the
// given certificate, and waits until it answers /health.
func startOPA(ctx context.Context, binary, dir, certFile, keyFile string, client *http.Client, logTo io.Writer) (*opaServer, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("finding a free port: %w", err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	cmd := exec.CommandContext(ctx, binary, "run", "--server",
		"--addr", addr,
		"--tls-cert-file", certFile, "--tls-private-key-file", keyFile,
		"--log-level", "error", "--skip-version-check",
		filepath.Join(dir, "policies"))
	cmd.Stdout, cmd.Stderr = logTo, logTo
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting opa: %w", err)
	}
	s := &opaServer{url: "https://" + addr, cmd: cmd, done: make(chan error, 1)}
	go func() { s.done <- cmd.Wait() }()

	deadline := time.Now().Add(2 * time.Minute)
	for {
		resp, err := client.Get(s.url + "/health")
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s, nil
			}
		}
		select {
		case err := <-s.done:
			return nil, fmt.Errorf("opa exited before it was ready: %v", err)
		case <-ctx.Done():
			s.stop()
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("opa did not answer /health within 2m (last error: %v)", err)
		}
	}
}

// stop interrupts the server and waits for it.
func (s *opaServer) stop() {
	_ = s.cmd.Process.Signal(os.Interrupt)
	select {
	case <-s.done:
	case <-time.After(15 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}
