package cli_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/metadata"

	"github.com/nodeguard/nodeguard/pkg/cli"
	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/generated/clientset/versioned"
	"github.com/nodeguard/nodeguard/pkg/rollout/controller"
)

// startController runs the real rollout controller in-process for the
// rest of t. Only this file's tests run it: the others write the
// controller's part themselves and must not have it acting beside them.
func startController(t *testing.T) {
	t.Helper()
	cfg := env.CP.AdminConfig()
	meta, err := metadata.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rollouts, err := versioned.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	c, err := controller.New(controller.Config{Kube: env.Admin, Metadata: meta, Rollouts: rollouts})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx, 1) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("the rollout controller: %v", err)
		}
	})
}

// TestRolloutUndoWithTheController runs undo beside the real controller:
// the controller assigns the canary, undo's pause is shown in the status
// before undo reverts it, the paused controller leaves it reverted, and a
// resume starts over from the canary. No agent runs, so the canary stays
// in trial, which is all the test needs.
func TestRolloutUndoWithTheController(t *testing.T) {
	s := newScenario(t)
	client := rolloutClient(t)
	startController(t)
	s.configMap("v2", goodConfig, true)
	s.configMap("v3", goodConfig, true)
	a, b := s.node("a", "v1.37.2"), s.node("b", "v1.37.2")
	s.annotate(a, map[string]any{contract.ConfigSourceAnnotation: s.ns + "/v2"})
	s.ready(a)
	s.ready(b)
	name := s.ns

	s.createRollout(client, name)

	// The canary, a (first in name order), is assigned by the controller.
	s.waitNode(a, "the controller assigns the canary", func(n *corev1.Node) bool {
		return n.Annotations[contract.ConfigSourceAnnotation] == s.ns+"/v3" && n.Annotations[contract.RolloutAnnotation] == name
	})
	eventually(t, "status shows the canary in trial", func(r result) bool {
		return r.code == cli.ExitOK && strings.Contains(r.out, "State:    Canary (progressing)")
	}, "rollout", "status", name)

	r := plugin(t, "rollout", "undo", name)
	expect(t, "undo", r, cli.ExitOK, name+": paused", "node/"+a+": "+s.ns+"/v3 -> "+s.ns+"/v2: reverted", "1 node(s) moved by the rollout: 1 reverted")
	if strings.Contains(r.errOut, "has not shown the pause") {
		t.Errorf("undo did not see the controller show the pause: %s", r)
	}
	if st := s.getRollout(client, name); !st.Spec.Paused {
		t.Error("not paused after undo")
	}

	// Paused, the controller assigns nothing, however long it is left.
	time.Sleep(3 * time.Second)
	for _, node := range []string{a, b} {
		if src, _ := s.assignment(node); src == s.ns+"/v3" {
			t.Errorf("%s is assigned the target again while the rollout is paused", node)
		}
	}
	eventually(t, "status says Paused", func(r result) bool {
		return r.code == cli.ExitOK && strings.Contains(r.out, "State:    Paused")
	}, "rollout", "status", name)

	// A resume starts over from the canary.
	expect(t, "resume", plugin(t, "rollout", "resume", name), cli.ExitOK, name+": resumed")
	s.waitNode(a, "the controller assigns the canary again", func(n *corev1.Node) bool {
		return n.Annotations[contract.ConfigSourceAnnotation] == s.ns+"/v3" && n.Annotations[contract.PreviousConfigSourceAnnotation] == s.ns+"/v2"
	})
}

func (s *scenario) waitNode(node, what string, ok func(*corev1.Node) bool) {
	s.t.Helper()
	var last *corev1.Node
	err := wait.PollUntilContextTimeout(s.ctx, 200*time.Millisecond, authzDeadline, true, func(ctx context.Context) (bool, error) {
		n, err := s.admin.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		last = n
		return ok(n), nil
	})
	if err != nil {
		s.t.Fatalf("%s: %v; node %s annotations %v", what, err, node, last.GetAnnotations())
	}
}
