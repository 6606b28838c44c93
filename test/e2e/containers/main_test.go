// Package containers_test runs the end-to-end tests whose outcome is a cgroup
// or a process, on nodes whose kubelet runs real containers: containerd and
// runc (hack/testbin.sh builds them), each node with its own containerd, state
// and cgroup root (framework.RuntimeContainerd), its pods running
// test/workload from an image imported into it, never pulled. The CPU
// manager's static policy rolled through a drain pins a Guaranteed
// container's cgroup to an exclusive CPU and shrinks the shared pool, and
// going back to none unpins it; a reservation changes kubepods' limits; a
// drain ends the evicted pods' processes and they run again on another
// node; a kubelet restart leaves running containers running. After every
// test, each node it started has left nothing on the host: no cgroup, no
// process, no mount (framework.Node.Leftovers).
//
// Everything else runs on the kubelet's fake runtime (test/e2e/drain and the
// rest), which is faster where nothing depends on cgroups.
package containers_test

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
	return framework.RunSuite(m, "containers", func(ctx context.Context, dir string) ([]*framework.Env, error) {
		var err error
		if binaries, err = framework.BuildNodeBinaries(ctx, filepath.Join(dir, "bin")); err != nil {
			return nil, err
		}
		if binaries.Containers, err = framework.BuildContainerBinaries(ctx, filepath.Join(dir, "bin")); err != nil {
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
