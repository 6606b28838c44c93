package agent_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/test/e2e/framework"
)

// waitTimeout bounds every wait: generous for a busy two-core machine, and
// including the authorizer's caches and the informers' backoff.
const waitTimeout = 2 * time.Minute

// node is one node (framework.Node: a real kubelet unless the test asks for
// the stub) with the test's conveniences:
// its own namespace for ConfigMaps, and helpers that fail the test instead
// of returning errors.
type node struct {
	*framework.Node
	t   testing.TB
	ctx context.Context
	ns  string
}

type nodeOptions struct {
	// withoutCertificate starts the agent before the kubelet's client
	// certificate exists (TLS bootstrap not done).
	withoutCertificate bool
	// agentArgs are added to the agent's flags (later flags win).
	agentArgs []string
	// stub, when set, runs test/kubeletstub instead of a real kubelet,
	// for a fault no real kubelet produces (its Reason says which).
	stub *framework.StubKubelet
	// dir holds the node's files; empty means a new temporary directory.
	dir string
	// kubeletArgs are added to the kubelet's flags.
	kubeletArgs []string
	// localConfig is added to the node's own kubelet configuration.
	localConfig string
	// labels are the node's labels.
	labels map[string]string
	// withoutLocalConfig leaves the agent to seed its local configuration.
	withoutLocalConfig bool
}

// newNode starts a node, its kubelet and its agent; all of it is removed
// when the test ends.
func newNode(t testing.TB, opts nodeOptions) *node {
	t.Helper()
	suffix := strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	name, ns := "agent-"+suffix, "agent-e2e-"+suffix
	admin := env.Admin
	if _, err := admin.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admin.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{})
		_ = admin.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
	})
	if opts.dir == "" {
		opts.dir = t.TempDir()
	}
	started, err := framework.StartNode(t.Context(), env, framework.NodeOptions{
		Name:               name,
		Binaries:           binaries,
		Dir:                opts.dir,
		KubeletArgs:        opts.kubeletArgs,
		WithoutCertificate: opts.withoutCertificate,
		AgentArgs:          opts.agentArgs,
		Stub:               opts.stub,
		LocalConfig:        opts.localConfig,
		WithoutLocalConfig: opts.withoutLocalConfig,
		Labels:             opts.labels,
	})
	if err != nil {
		t.Fatal(err)
	}
	n := &node{Node: started, t: t, ctx: t.Context(), ns: ns}
	t.Cleanup(func() {
		n.Stop()
		if t.Failed() {
			t.Logf("agent log tail:\n%s", n.AgentLogTail(60))
			t.Logf("kubelet log tail:\n%s", n.KubeletLogTail(40))
		}
	})
	return n
}

func (n *node) rotateCertificate(generation string) {
	n.t.Helper()
	if err := n.RotateCertificate(generation); err != nil {
		n.t.Fatal(err)
	}
}

func (n *node) startAgent() {
	n.t.Helper()
	if err := n.StartAgent(n.ctx); err != nil {
		n.t.Fatal(err)
	}
}

func (n *node) stopAgent() { n.StopAgent() }

// metric returns the value of the first sample line starting with prefix.
func (n *node) metric(prefix string) (float64, bool) {
	n.t.Helper()
	v, ok, err := n.Metric(prefix)
	if err != nil {
		n.t.Fatal(err)
	}
	return v, ok
}

// openFDs counts the agent's open file descriptors.
func (n *node) openFDs() int {
	n.t.Helper()
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", n.AgentPID()))
	if err != nil {
		n.t.Fatal(err)
	}
	return len(entries)
}

// eventually polls cond until it holds, failing the test with cond's last
// description after waitTimeout.
func (n *node) eventually(what string, cond func() (bool, string)) {
	n.t.Helper()
	err := framework.Eventually(n.ctx, waitTimeout, what, func(context.Context) (bool, string, error) {
		ok, detail := cond()
		return ok, detail, nil
	})
	if err != nil {
		n.t.Fatal(err)
	}
}

// configMap creates or replaces an eligible ConfigMap in the node's
// namespace and returns it as stored.
func (n *node) configMap(name, config string) *corev1.ConfigMap {
	n.t.Helper()
	cm, err := framework.PutKubeletConfigMap(n.ctx, env.Admin, n.ns, name, config)
	if err != nil {
		n.t.Fatal(err)
	}
	return cm
}

// assign points the Node at a ConfigMap in its namespace; "" clears it.
func (n *node) assign(name string) {
	n.t.Helper()
	source := ""
	if name != "" {
		source = n.ns + "/" + name
	}
	if err := n.Assign(n.ctx, source); err != nil {
		n.t.Fatal(err)
	}
}

func (n *node) observe() framework.Report {
	n.t.Helper()
	r, err := n.Report(n.ctx)
	if err != nil {
		n.t.Fatal(err)
	}
	return r
}

// waitReport waits until the Node's report satisfies want.
func (n *node) waitReport(what string, want func(framework.Report) bool) framework.Report {
	n.t.Helper()
	r, err := n.WaitReport(n.ctx, waitTimeout, what, want)
	if err != nil {
		n.t.Fatal(err)
	}
	return r
}

func is(ref *contract.ConfigMapVersion, cm *corev1.ConfigMap) bool {
	return framework.RefersTo(ref, cm)
}

func reason(r framework.Report, status corev1.ConditionStatus, reason string) bool {
	return r.ConditionIs(status, reason)
}

// restarts returns what became of each of the kubelet's (re)starts
// (framework.KubeletRunning and friends; the stub's behaviours for a stub).
func (n *node) restarts() []string {
	n.t.Helper()
	var behaviors []string
	for _, r := range n.restartRecords() {
		behaviors = append(behaviors, r.Behavior)
	}
	return behaviors
}

func (n *node) restartRecords() []framework.KubeletRestart {
	n.t.Helper()
	records, err := n.KubeletRestarts()
	if err != nil {
		n.t.Fatal(err)
	}
	return records
}

func (n *node) kubeletFile() string {
	n.t.Helper()
	data, err := n.KubeletConfig()
	if err != nil {
		n.t.Fatal(err)
	}
	return data
}

// localConfigSHA256 hashes the node's own configuration, which the agent
// writes verbatim with nothing assigned.
func (n *node) localConfigSHA256() string {
	n.t.Helper()
	data, err := os.ReadFile(n.LocalConfigFile)
	if err != nil {
		n.t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// waitNodeReady waits until the kubelet reports its Node Ready.
func (n *node) waitNodeReady() *corev1.Node {
	n.t.Helper()
	var node *corev1.Node
	n.eventually("the Node to be Ready", func() (bool, string) {
		var err error
		node, err = env.Admin.CoreV1().Nodes().Get(n.ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status == corev1.ConditionTrue, string(c.Status) + " " + c.Reason
			}
		}
		return false, "no Ready condition"
	})
	return node
}

// waitRegistered waits until the kubelet has registered its Node.
func (n *node) waitRegistered() {
	n.t.Helper()
	if err := n.WaitRegistered(n.ctx); err != nil {
		n.t.Fatal(err)
	}
}

// noNodeYet fails the test when the Node exists: a kubelet without
// credentials cannot have registered it, nor an agent written a status.
func (n *node) noNodeYet() {
	n.t.Helper()
	_, err := env.Admin.CoreV1().Nodes().Get(n.ctx, n.Name, metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		n.t.Fatalf("the Node exists before the kubelet has credentials (err %v)", err)
	}
}
