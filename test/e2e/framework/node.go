package framework

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/test/controlplane"
	"github.com/nodeguard/nodeguard/test/freeport"
)

// DefaultKubeletVersion is what a simulated kubelet reports unless told
// otherwise: the version of the control plane.
const DefaultKubeletVersion = controlplane.KubernetesVersion

// Trial settings of simulated nodes: seconds where a real node has minutes
// (the agent's defaults are a 10m trial and a 2m grace period).
const (
	DefaultTrialPeriod      = 3 * time.Second
	DefaultTrialGracePeriod = 4 * time.Second
)

// startTimeout bounds the wait for a node's processes to come up on a busy
// two-core machine.
const startTimeout = 2 * time.Minute

// NodeOptions shape a simulated node.
type NodeOptions struct {
	// Name of the Node; required.
	Name string
	// Binaries are the agent and the kubelet stub (BuildNodeBinaries);
	// required.
	Binaries NodeBinaries
	// Dir holds the node's files: kubelet configuration, certificates,
	// the agent's state and both logs. Empty means nodes/<Name> in the
	// environment's work directory.
	Dir string
	// KubeletVersion is the status.nodeInfo.kubeletVersion the node
	// registers with; empty means DefaultKubeletVersion.
	KubeletVersion string
	// Labels are the labels the node registers with, as kubelet
	// --node-labels would set them.
	Labels map[string]string
	// TrialPeriod is the agent's --trial-period; zero means
	// DefaultTrialPeriod.
	TrialPeriod time.Duration
	// StubStartupDelay is how long a kubelet restart keeps /healthz down;
	// zero means 100ms.
	StubStartupDelay time.Duration
	// WithoutCertificate starts the agent before the kubelet's client
	// certificate exists, as on a node whose TLS bootstrap is not done;
	// RotateCertificate provides one.
	WithoutCertificate bool
	// AgentArgs are added to the agent's flags; later flags win, so they
	// override the ones StartNode sets.
	AgentArgs []string
	// KubeletArgs are added to the stub kubelet's flags (for example
	// --config-dir).
	KubeletArgs []string
}

// Node is a simulated node: a Node object registered with the node's own
// credentials, test/kubeletstub standing in for its kubelet, and the agent
// (cmd/agent) beside it with the kubelet's client certificate, each a
// process of its own. Its methods are safe for concurrent use.
type Node struct {
	// Name is the Node's name.
	Name string
	// Dir holds the node's files.
	Dir string
	// KubeletConfigFile is the kubelet's --config file: what the agent
	// writes and the stub runs.
	KubeletConfigFile string
	// LocalConfigFile is the node's own configuration, used when nothing
	// is assigned and for node-local fields.
	LocalConfigFile string
	// KubeletHealthzPort is where the stub serves /healthz on 127.0.0.1.
	KubeletHealthzPort int
	// AgentPort is where the agent serves /healthz and /metrics.
	AgentPort int
	// TrialPeriod is the agent's trial period.
	TrialPeriod time.Duration

	env              *Env
	binaries         NodeBinaries
	stubStartupDelay time.Duration
	pidFile          string
	restartLog       string
	certLink         string
	kubeconfig       string
	agentArgs        []string
	kubeletArgs      []string

	mu    sync.Mutex
	stub  *child
	agent *child
}

// StartNode registers a Node as its kubelet would (with the node's client
// certificate, so admission judges the registration) and starts the stub
// kubelet and the agent, returning once both are up. When registration is
// refused the error is the apiserver's (apierrors.IsForbidden and friends
// work on it) and nothing is started. On any error no process is left
// running; a Node already registered stays.
func StartNode(ctx context.Context, env *Env, opts NodeOptions) (node *Node, err error) {
	if msgs := validation.IsDNS1123Subdomain(opts.Name); len(msgs) > 0 {
		return nil, fmt.Errorf("node name %q: %s", opts.Name, strings.Join(msgs, "; "))
	}
	if opts.Binaries.Agent == "" || opts.Binaries.KubeletStub == "" {
		return nil, errors.New("starting a node needs the agent and kubelet stub binaries (BuildNodeBinaries)")
	}
	n := &Node{Name: opts.Name, Dir: opts.Dir, TrialPeriod: opts.TrialPeriod, env: env, binaries: opts.Binaries,
		stubStartupDelay: opts.StubStartupDelay, kubeletArgs: opts.KubeletArgs}
	if n.Dir == "" {
		n.Dir = filepath.Join(env.dir, "nodes", opts.Name)
	}
	if n.TrialPeriod <= 0 {
		n.TrialPeriod = DefaultTrialPeriod
	}
	if n.stubStartupDelay <= 0 {
		n.stubStartupDelay = 100 * time.Millisecond
	}
	n.KubeletConfigFile = filepath.Join(n.Dir, "kubelet", "config.yaml")
	n.LocalConfigFile = filepath.Join(n.Dir, "kubelet-local.yaml")
	n.pidFile = filepath.Join(n.Dir, "kubelet.pid")
	n.restartLog = filepath.Join(n.Dir, "kubelet-restarts.log")
	n.certLink = filepath.Join(n.Dir, "pki", "kubelet-client-current.pem")
	n.kubeconfig = filepath.Join(n.Dir, "kubelet.kubeconfig")
	if n.KubeletHealthzPort, err = freeport.Get(); err != nil {
		return nil, err
	}
	if n.AgentPort, err = freeport.Get(); err != nil {
		return nil, err
	}

	kubeletVersion := opts.KubeletVersion
	if kubeletVersion == "" {
		kubeletVersion = DefaultKubeletVersion
	}
	if err := n.register(ctx, kubeletVersion, opts.Labels); err != nil {
		return nil, err
	}
	if err := n.writeFiles(opts.WithoutCertificate); err != nil {
		return nil, err
	}
	n.agentArgs = append(n.defaultAgentArgs(), opts.AgentArgs...)

	defer func() {
		if err != nil {
			n.Stop()
		}
	}()
	if err := n.StartKubelet(ctx); err != nil {
		return nil, err
	}
	if err := n.StartAgent(ctx); err != nil {
		return nil, err
	}
	return n, nil
}

func (n *Node) register(ctx context.Context, kubeletVersion string, labels map[string]string) error {
	client, err := n.env.NodeClient(n.Name)
	if err != nil {
		return fmt.Errorf("node %s: credentials: %w", n.Name, err)
	}
	obj := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: labels},
		Status:     corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{KubeletVersion: kubeletVersion}},
	}
	if _, err := client.CoreV1().Nodes().Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("registering node %s (kubelet %s): %w", n.Name, kubeletVersion, err)
	}
	return nil
}

// writeFiles lays out what a node has before its kubelet starts: its own
// configuration (which the kubelet already runs), the client certificate
// and the kubeconfig that points at it.
func (n *Node) writeFiles(withoutCertificate bool) error {
	local := KubeletConfigHeader + fmt.Sprintf("healthzBindAddress: 127.0.0.1\nhealthzPort: %d\nproviderID: e2e://%s\n", n.KubeletHealthzPort, n.Name)
	for _, path := range []string{n.LocalConfigFile, n.KubeletConfigFile} {
		if err := writeFile(path, local); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(filepath.Dir(n.certLink), 0o700); err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	if !withoutCertificate {
		if err := n.RotateCertificate("1"); err != nil {
			return err
		}
	}
	cfg := &rest.Config{Host: n.env.CP.URL(), TLSClientConfig: rest.TLSClientConfig{
		CAData: n.env.CP.CA().CertPEM(), CertFile: n.certLink, KeyFile: n.certLink,
	}}
	if err := controlplane.WriteKubeconfig(n.kubeconfig, cfg); err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	return nil
}

func (n *Node) defaultAgentArgs() []string {
	return []string{
		"--node-name=" + n.Name,
		"--kubeconfig=" + n.kubeconfig,
		"--state-dir=" + filepath.Join(n.Dir, "state"),
		"--kubelet-config-mode=config",
		"--kubelet-config-file=" + n.KubeletConfigFile,
		"--local-config-file=" + n.LocalConfigFile,
		fmt.Sprintf("--kubelet-restart-command=%s restart --pid-file %s", n.binaries.KubeletStub, n.pidFile),
		fmt.Sprintf("--kubelet-healthz-url=http://127.0.0.1:%d/healthz", n.KubeletHealthzPort),
		"--health-probe-period=200ms",
		"--health-probe-timeout=150ms",
		"--trial-period=" + n.TrialPeriod.String(),
		"--trial-grace-period=" + DefaultTrialGracePeriod.String(),
		"--trial-failure-threshold=3",
		fmt.Sprintf("--listen-address=127.0.0.1:%d", n.AgentPort),
		"--resync-period=10s",
		"--kube-api-qps=50",
		"--kube-api-burst=100",
		"-v=2",
	}
}

func writeFile(path, content string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// CertificatePath is where RotateCertificate puts a generation's
// certificate and key.
func (n *Node) CertificatePath(generation string) string {
	return filepath.Join(filepath.Dir(n.certLink), "kubelet-client-"+generation+".pem")
}

// RotateCertificate issues a new client certificate and moves the
// kubelet-client-current.pem symlink to it, as the kubelet does.
func (n *Node) RotateCertificate(generation string) error {
	certPEM, keyPEM, err := n.env.CP.CA().IssueClientCert(contract.NodeUserPrefix+n.Name, contract.NodesGroup)
	if err != nil {
		return fmt.Errorf("node %s: issuing a client certificate: %w", n.Name, err)
	}
	target := n.CertificatePath(generation)
	if err := os.WriteFile(target, append(certPEM, keyPEM...), 0o600); err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	tmp := n.certLink + ".tmp"
	_ = os.Remove(tmp)
	if err := os.Symlink(target, tmp); err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	if err := os.Rename(tmp, n.certLink); err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	return nil
}

// StartKubelet starts the stub kubelet and waits until it has written its
// PID, which the agent's restart command needs.
func (n *Node) StartKubelet(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.stub != nil {
		return fmt.Errorf("node %s: the kubelet is already running", n.Name)
	}
	_ = os.Remove(n.pidFile)
	args := append([]string{n.binaries.KubeletStub, "serve",
		"--config", n.KubeletConfigFile, "--healthz-port", strconv.Itoa(n.KubeletHealthzPort), "--pid-file", n.pidFile,
		"--restart-log", n.restartLog, "--startup-delay", n.stubStartupDelay.String()}, n.kubeletArgs...)
	stub, err := startChild("kubelet stub", n.kubeletLog(), args...)
	if err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	n.stub = stub
	return Eventually(ctx, startTimeout, "the kubelet stub of "+n.Name+" to write its PID", func(context.Context) (bool, string, error) {
		if !stub.running() {
			return false, "", fmt.Errorf("the kubelet stub of %s exited; log:\n%s", n.Name, n.KubeletLogTail(20))
		}
		_, err := os.Stat(n.pidFile)
		return err == nil, fmt.Sprint(err), nil
	})
}

// StopKubelet stops the stub kubelet.
func (n *Node) StopKubelet() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.stub != nil {
		n.stub.stop()
		n.stub = nil
	}
}

// StartAgent starts the agent and waits until its /healthz answers.
func (n *Node) StartAgent(ctx context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.agent != nil {
		return fmt.Errorf("node %s: the agent is already running", n.Name)
	}
	agent, err := startChild("agent", n.agentLog(), append([]string{n.binaries.Agent}, n.agentArgs...)...)
	if err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	n.agent = agent
	return Eventually(ctx, startTimeout, "the agent of "+n.Name+" to answer /healthz", func(context.Context) (bool, string, error) {
		if !agent.running() {
			return false, "", fmt.Errorf("the agent of %s exited; log:\n%s", n.Name, n.AgentLogTail(40))
		}
		code, body, err := n.AgentGet("/healthz")
		return err == nil && code == http.StatusOK, fmt.Sprint(code, " ", body, " ", err), nil
	})
}

// StopAgent stops the agent.
func (n *Node) StopAgent() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.agent != nil {
		n.agent.stop()
		n.agent = nil
	}
}

// AgentPID is the running agent's process ID, or 0.
func (n *Node) AgentPID() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.agent == nil {
		return 0
	}
	return n.agent.cmd.Process.Pid
}

// agentExited reports an agent that was started and has died since.
func (n *Node) agentExited() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.agent != nil && !n.agent.running()
}

// Stop stops the agent, then the kubelet. The Node object stays.
func (n *Node) Stop() {
	n.StopAgent()
	n.StopKubelet()
}

func (n *Node) agentLog() string   { return filepath.Join(n.Dir, "agent.log") }
func (n *Node) kubeletLog() string { return filepath.Join(n.Dir, "kubelet.log") }

// AgentLogTail returns the last lines of the agent's log.
func (n *Node) AgentLogTail(lines int) string { return tail(n.agentLog(), lines) }

// KubeletLogTail returns the last lines of the stub kubelet's log.
func (n *Node) KubeletLogTail(lines int) string { return tail(n.kubeletLog(), lines) }
