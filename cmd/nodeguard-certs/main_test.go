package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nodeguard/nodeguard/pkg/certs"
)

func TestRun(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	var stdout, stderr bytes.Buffer
	if code := run([]string{"--out-dir", dir, "--extra-ip", "10.96.0.40"}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr.String())
	}
	if got := strings.Count(stdout.String(), "wrote "); got != 8 {
		t.Errorf("stdout reports %d files, want 8:\n%s", got, stdout.String())
	}
	key := filepath.Join(dir, certs.WebhookServingKeyFile)
	if info, err := os.Stat(key); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("%s: %v, %v; want mode 0600", key, info, err)
	}
	before, err := os.ReadFile(key)
	if err != nil {
		t.Fatal(err)
	}

	stdout.Reset()
	stderr.Reset()
	if code := run([]string{"--out-dir", dir}, &stdout, &stderr); code != 1 {
		t.Errorf("second run without --force: exit %d, want 1", code)
	}
	if !strings.Contains(stderr.String(), "not replacing existing files") || !strings.Contains(stderr.String(), "--reuse-ca --force") {
		t.Errorf("second run without --force: stderr %q, want the refusal and a hint", stderr.String())
	}
	if after, _ := os.ReadFile(key); !bytes.Equal(before, after) {
		t.Error("a refused run changed the serving key")
	}

	stderr.Reset()
	if code := run([]string{"--out-dir", dir, "--reuse-ca", "--force"}, &stdout, &stderr); code != 0 {
		t.Fatalf("renewal: exit %d, stderr:\n%s", code, stderr.String())
	}
	if after, _ := os.ReadFile(key); bytes.Equal(before, after) {
		t.Error("renewal kept the old serving key")
	}
}

func TestRunExitCodes(t *testing.T) {
	for _, tt := range []struct {
		name string
		args []string
		want int
	}{
		{"help", []string{"--help"}, 0},
		{"unknown flag", []string{"--no-such-flag"}, 2},
		{"stray argument", []string{"extra"}, 2},
		{"invalid option", []string{"--extra-ip", "nope"}, 2},
		{"reusing CAs that do not exist", []string{"--reuse-ca"}, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			// Each run gets its own empty directory, so that nothing is written into the tree.
			args := append([]string{"--out-dir", filepath.Join(t.TempDir(), "certs")}, tt.args...)
			if got := run(args, &stdout, &stderr); got != tt.want {
				t.Errorf("exit %d, want %d; stderr:\n%s", got, tt.want, stderr.String())
			}
		})
	}
}
