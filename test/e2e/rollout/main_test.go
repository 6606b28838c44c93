package rollout_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/nodeguard/nodeguard/pkg/contract"
	nodeguardclient "github.com/nodeguard/nodeguard/pkg/generated/clientset/versioned/typed/nodeguard/v1alpha1"
	"github.com/nodeguard/nodeguard/test/e2e/framework"
)

// The cluster: seven real nodes in two pools and one of its own, started
// once.
var (
	blue  = []string{"blue-a", "blue-b", "blue-c", "blue-d"}
	green = []string{"green-a", "green-b"}
	// slowNode has a long trial, so that a test can stop its kubelet
	// during it: a failure in a later batch on a configuration that runs
	// fine elsewhere.
	slowNode = "slow-z"
)

// trialPeriod keeps every rollout short; the slow node's trial is long
// enough for a test to fail it on purpose.
const (
	trialPeriod     = 2 * time.Second
	slowTrialPeriod = 20 * time.Second
)

var (
	env         *framework.Env
	binaries    framework.NodeBinaries
	nodes       = map[string]*framework.Node{}
	rollouts    nodeguardclient.KubeletConfigRolloutInterface
	controllers []*framework.RolloutController
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	return framework.RunSuite(m, "rollout", func(ctx context.Context, dir string) ([]*framework.Env, error) {
		var err error
		if binaries, err = framework.BuildNodeBinaries(ctx, filepath.Join(dir, "bin")); err != nil {
			return nil, err
		}
		env, err = framework.Start(ctx, framework.Options{WorkDir: filepath.Join(dir, "env"), ControllerManager: true})
		if err != nil {
			return nil, err
		}
		envs := []*framework.Env{env}
		if rollouts, err = env.Rollouts(); err != nil {
			return envs, err
		}
		if err := startNodes(ctx); err != nil {
			return envs, err
		}
		for _, id := range []string{"controller-1", "controller-2"} {
			c, err := env.StartRolloutController(ctx, id)
			if err != nil {
				return envs, err
			}
			controllers = append(controllers, c)
		}
		return envs, nil
	})
}

// startNodes starts every node, a few at a time.
func startNodes(ctx context.Context) error {
	type spec struct {
		name string
		opts framework.NodeOptions
	}
	var specs []spec
	for _, n := range blue {
		specs = append(specs, spec{n, framework.NodeOptions{AdminLabels: map[string]string{contract.PoolLabel: "blue"}, TrialPeriod: trialPeriod}})
	}
	for _, n := range green {
		specs = append(specs, spec{n, framework.NodeOptions{AdminLabels: map[string]string{contract.PoolLabel: "green"}, TrialPeriod: trialPeriod}})
	}
	specs = append(specs, spec{slowNode, framework.NodeOptions{AdminLabels: map[string]string{contract.PoolLabel: "slow"}, TrialPeriod: slowTrialPeriod}})
	var mu sync.Mutex
	var errs []error
	sem := make(chan struct{}, 3)
	var wg sync.WaitGroup
	for _, s := range specs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			opts := s.opts
			opts.Name, opts.Binaries = s.name, binaries
			n, err := framework.StartNode(ctx, env, opts)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("node %s: %w", s.name, err))
				return
			}
			nodes[s.name] = n
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		return errs[0]
	}
	return nil
}
