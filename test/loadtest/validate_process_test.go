package loadtest

import (
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nodeguard/nodeguard/test/manifests"
)

// validateServerEnv, when set to a directory, makes
// TestValidateServerProcess serve /validate and its floor for
// BenchmarkValidate, which starts this test binary again for it.
const validateServerEnv = "NODEGUARD_LOADTEST_VALIDATE_SERVER"

// validateGCEnv set to "go-defaults" runs the server process with Go's
// collector settings instead of the shipped Deployment's.
const validateGCEnv = "NODEGUARD_LOADTEST_GC"

// validateEndpoints is what the server process tells the benchmark.
type validateEndpoints struct {
	Ours    string `json:"ours"`
	Floor   string `json:"floor"`
	CertPEM []byte `json:"certPEM"`
}

// TestValidateServerProcess is BenchmarkValidate's server process: it
// serves /validate over the benchmark cluster and the floor, writes their
// endpoints to the directory validateServerEnv names, and serves until its
// standard input closes. Skipped in any other run.
func TestValidateServerProcess(t *testing.T) {
	dir := os.Getenv(validateServerEnv)
	if dir == "" {
		t.Skip("runs only as BenchmarkValidate's server process")
	}
	ours, floor, certPEM := startValidate(t, benchShape)
	data, err := json.Marshal(validateEndpoints{Ours: ours, Floor: floor, CertPEM: certPEM})
	if err != nil {
		t.Fatal(err)
	}
	// Written whole, then renamed: the benchmark polls for the name.
	tmp := filepath.Join(dir, "endpoints.json.tmp")
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "endpoints.json")); err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, os.Stdin)
}

// startValidateProcess runs startValidate's servers in a process of their
// own (this test binary, running TestValidateServerProcess), as the webhook
// runs apart from the apiserver, and stops it when b ends.
// Its collector is set as the shipped Deployment sets it (gc lists the
// settings), or left to Go's defaults when validateGCEnv says so.
func startValidateProcess(b *testing.B) (ours, floor string, roots *x509.CertPool, gc []string) {
	b.Helper()
	dir := b.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestValidateServerProcess$", "-test.timeout=0")
	env := slices.DeleteFunc(os.Environ(), func(e string) bool {
		return strings.HasPrefix(e, "GOGC=") || strings.HasPrefix(e, "GOMEMLIMIT=")
	})
	if os.Getenv(validateGCEnv) != "go-defaults" {
		var err error
		if gc, err = manifests.WebhookGCSettings(); err != nil {
			b.Fatal(err)
		}
	}
	cmd.Env = append(append(env, gc...), validateServerEnv+"="+dir)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatalf("starting the server process: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	b.Cleanup(func() {
		_ = stdin.Close()
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})

	deadline := time.Now().Add(2 * time.Minute)
	for {
		data, err := os.ReadFile(filepath.Join(dir, "endpoints.json"))
		if err == nil {
			var ep validateEndpoints
			if err := json.Unmarshal(data, &ep); err != nil {
				b.Fatalf("reading the server process's endpoints: %v", err)
			}
			return ep.Ours, ep.Floor, rootsOf(ep.CertPEM), gc
		}
		if !errors.Is(err, os.ErrNotExist) {
			b.Fatal(err)
		}
		select {
		case err := <-exited:
			b.Fatalf("the server process exited before serving: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			b.Fatal("the server process did not serve within 2 minutes")
		}
	}
}
