package framework

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"
)

// RunSuite is a test binary's TestMain body: setup starts the suite's
// environments in a fresh work directory, the tests run, and then every
// environment setup returned is stopped, even after an error, and the
// directory removed. When a test failed, the end of each environment's
// logs is printed.
func RunSuite(m *testing.M, name string, setup func(ctx context.Context, dir string) ([]*Env, error)) int {
	dir, err := os.MkdirTemp("", "nodeguard-e2e-"+name+"-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	envs, err := setup(ctx, dir)
	defer func() {
		for _, e := range envs {
			if e != nil {
				e.Stop()
			}
		}
	}()
	if err != nil {
		fmt.Fprintf(os.Stderr, "setting up the %s suite: %v\n", name, err)
		return 1
	}
	code := m.Run()
	if code != 0 {
		for _, e := range envs {
			fmt.Fprintf(os.Stderr, "webhook log tail:\n%s\n\ncontrol plane log tail:\n%s\n", e.WebhookLogTail(60), e.CP.LogTail(40))
		}
	}
	return code
}
