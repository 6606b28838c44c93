// Package drain_test runs changes that need the node drained
// (docs/disruptive-changes.md) on real kubelets: the agent (cmd/agent, with
// each node's client certificate) cordons its Node, evicts its pods through
// the Eviction API against PodDisruptionBudgets that kube-controller-manager
// keeps, stops the kubelet, removes the state files the change invalidates,
// starts it, runs the trial and uncordons; kube-scheduler places the
// evicted workloads elsewhere; the rollout controller moves a pool through
// it. Everything is real except the container runtime, the kubelet's own
// fake CRI.
package drain_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	nodeguardclient "github.com/nodeguard/nodeguard/pkg/generated/clientset/versioned/typed/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/test/e2e/framework"
)

var (
	env      *framework.Env
	binaries framework.NodeBinaries
	rollouts nodeguardclient.KubeletConfigRolloutInterface
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	return framework.RunSuite(m, "drain", func(ctx context.Context, dir string) ([]*framework.Env, error) {
		var err error
		if binaries, err = framework.BuildNodeBinaries(ctx, filepath.Join(dir, "bin")); err != nil {
			return nil, err
		}
		env, err = framework.Start(ctx, framework.Options{WorkDir: filepath.Join(dir, "env"), ControllerManager: true, Scheduler: true})
		if err != nil {
			return nil, err
		}
		envs := []*framework.Env{env}
		if rollouts, err = env.Rollouts(); err != nil {
			return envs, err
		}
		_, err = env.StartRolloutController(ctx, "controller-1")
		return envs, err
	})
}
