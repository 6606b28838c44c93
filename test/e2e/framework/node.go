package framework

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/kubelet"
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

// NodeOptions shape a node.
type NodeOptions struct {
	// Name of the Node; required.
	Name string
	// Binaries are the node's programs (BuildNodeBinaries); required.
	Binaries NodeBinaries
	// Dir holds the node's files: kubelet configuration, certificates,
	// the agent's state, the kubelet's root directory and every log.
	// Empty means nodes/<Name> in the environment's work directory.
	Dir string
	// Labels are the labels the node registers with (kubelet
	// --node-labels). Labels under nodeguard.dev are not a node's to set
	// (rule 2 refuses the registration): use AdminLabels for those.
	Labels map[string]string
	// AdminLabels are set on the Node by the administrator once it has
	// registered, before the agent starts, as an operator puts a node in a
	// pool (nodeguard.dev/pool). Not with WithoutCertificate, where the
	// Node does not exist yet when StartNode returns.
	AdminLabels map[string]string
	// TrialPeriod is the agent's --trial-period; zero means
	// DefaultTrialPeriod.
	TrialPeriod time.Duration
	// WithoutCertificate starts the node before the kubelet's client
	// certificate exists, as on a node whose TLS bootstrap is not done;
	// RotateCertificate provides one. A real kubelet fails to start until
	// then and is restarted by its unit, as systemd would.
	WithoutCertificate bool
	// AgentArgs are added to the agent's flags; later flags win, so they
	// override the ones StartNode sets.
	AgentArgs []string
	// KubeletArgs are added to the kubelet's flags (for example
	// --config-dir).
	KubeletArgs []string
	// LocalConfig holds top-level fields (YAML) that are added to, or
	// replace those of, the node's own kubelet configuration, which the
	// kubelet runs before anything is assigned.
	LocalConfig string
	// WithoutLocalConfig leaves only the kubelet's own file, as the agent
	// DaemonSet finds a kubeadm node: the agent seeds LocalConfigFile from
	// it when it starts.
	WithoutLocalConfig bool
	// Runtime is the real kubelet's container runtime: RuntimeFake (the
	// default) or RuntimeContainerd, for tests whose outcome is a cgroup
	// or a process (Binaries.Containers must then be set).
	Runtime ContainerRuntime
	// Stub, when set, runs test/kubeletstub instead of a real kubelet. It
	// is for a fault no real kubelet produces; its Reason says which.
	Stub *StubKubelet
}

// StubKubelet asks for test/kubeletstub in place of the real kubelet.
type StubKubelet struct {
	// Reason names the fault no real kubelet produces that the test
	// needs; required.
	Reason string
	// StartupDelay is how long a stub restart keeps /healthz down; zero
	// means 100ms.
	StartupDelay time.Duration
}

// Node is a node of the test cluster: a kubelet (a real one, run by
// test/kubeletunit as systemd would, on the kubelet's own fake container
// runtime or, with RuntimeContainerd, on containerd and runc; or
// test/kubeletstub) with the node's client certificate, and the
// agent (cmd/agent) beside it with the same credentials, each a process of
// its own. Its methods are safe for concurrent use.
type Node struct {
	// Name is the Node's name.
	Name string
	// Dir holds the node's files.
	Dir string
	// KubeletConfigFile is the kubelet's --config file: what the agent
	// writes in config mode and the kubelet runs.
	KubeletConfigFile string
	// LocalConfigFile is the node's own configuration, used when nothing
	// is assigned and for node-local fields.
	LocalConfigFile string
	// KubeletHealthzPort is where the kubelet serves /healthz on 127.0.0.1.
	KubeletHealthzPort int
	// KubeletPort is where a real kubelet serves its HTTPS API (/configz)
	// on 127.0.0.1; 0 for the stub.
	KubeletPort int
	// AgentPort is where the agent serves /healthz and /metrics.
	AgentPort int
	// TrialPeriod is the agent's trial period.
	TrialPeriod time.Duration

	env        *Env
	binaries   NodeBinaries
	certLink   string
	kubeconfig string
	agentArgs  []string
	kubelet    kubeletRunner

	mu    sync.Mutex
	agent *child
}

// kubeletRunner is the kubelet of a node: the real one under its unit, or
// the stub.
type kubeletRunner interface {
	// writeLocalConfig writes the node's own configuration with extra
	// lines added.
	writeLocalConfig(path, extra string) error
	// start starts the kubelet's process and returns once it can take
	// the agent's restart command.
	start(ctx context.Context) error
	stop()
	running() bool
	// controlArgs are the agent's flags that reach this kubelet: its
	// restart (and stop and start) commands and its root directory.
	controlArgs() []string
	// restartAsAdmin restarts the kubelet behind the agent's back.
	restartAsAdmin(ctx context.Context) error
	restarts() ([]KubeletRestart, error)
	// localFields are the agent's --local-fields, empty for its default.
	localFields() []string
	logPath() string
}

// StartNode starts a node: a real kubelet registers its Node itself, with
// the node's client certificate, and the call returns once the Node exists
// and the kubelet is healthy (or, WithoutCertificate, once its unit runs);
// for the stub the framework registers the Node with the node's
// credentials, so admission judges the registration, and when that is
// refused the error is the apiserver's (apierrors.IsForbidden and friends
// work on it) and nothing is started. The agent is started last. On any
// error no process is left running; a Node already registered stays.
func StartNode(ctx context.Context, env *Env, opts NodeOptions) (node *Node, err error) {
	if msgs := validation.IsDNS1123Subdomain(opts.Name); len(msgs) > 0 {
		return nil, fmt.Errorf("node name %q: %s", opts.Name, strings.Join(msgs, "; "))
	}
	if opts.Binaries.Agent == "" {
		return nil, errors.New("starting a node needs the node binaries (BuildNodeBinaries)")
	}
	if opts.Stub != nil && opts.Stub.Reason == "" {
		return nil, errors.New("a stub kubelet needs a Reason: the fault no real kubelet produces")
	}
	if len(opts.AdminLabels) > 0 && opts.WithoutCertificate {
		return nil, errors.New("AdminLabels need the Node registered when StartNode returns, which WithoutCertificate does not")
	}
	n := &Node{Name: opts.Name, Dir: opts.Dir, TrialPeriod: opts.TrialPeriod, env: env, binaries: opts.Binaries}
	if n.Dir == "" {
		n.Dir = filepath.Join(env.dir, "nodes", opts.Name)
	}
	if n.TrialPeriod <= 0 {
		n.TrialPeriod = DefaultTrialPeriod
	}
	n.KubeletConfigFile = filepath.Join(n.Dir, "kubelet", "config.yaml")
	n.LocalConfigFile = filepath.Join(n.Dir, "kubelet-local.yaml")
	n.certLink = filepath.Join(n.Dir, "pki", "kubelet-client-current.pem")
	n.kubeconfig = filepath.Join(n.Dir, "kubelet.kubeconfig")
	if n.KubeletHealthzPort, err = freeport.Get(); err != nil {
		return nil, err
	}
	if n.AgentPort, err = freeport.Get(); err != nil {
		return nil, err
	}

	if opts.Stub != nil {
		// The stub registers nothing: the framework does, with the node's
		// credentials.
		if err := n.register(ctx, DefaultKubeletVersion, opts.Labels); err != nil {
			return nil, err
		}
		n.kubelet = newStubKubelet(n, opts.Stub, opts.KubeletArgs)
	} else {
		if opts.Binaries.Kubelet == "" {
			return nil, errors.New("a real kubelet needs the kubelet, fakecri and kubeletunit binaries (BuildNodeBinaries)")
		}
		if n.KubeletPort, err = freeport.Get(); err != nil {
			return nil, err
		}
		if n.kubelet, err = newRealKubelet(n, opts.Labels, opts.KubeletArgs, opts.Runtime, opts.Binaries.Containers); err != nil {
			return nil, err
		}
	}
	if err := n.writeFiles(opts.WithoutCertificate, opts.WithoutLocalConfig, opts.LocalConfig); err != nil {
		return nil, err
	}
	n.agentArgs = append(n.defaultAgentArgs(), opts.AgentArgs...)
	env.nodesMu.Lock()
	env.nodes = append(env.nodes, n)
	env.nodesMu.Unlock()

	defer func() {
		if err != nil {
			n.Stop()
		}
	}()
	if err := n.StartKubelet(ctx); err != nil {
		return nil, err
	}
	if real, ok := n.kubelet.(*realKubelet); ok && !opts.WithoutCertificate {
		if err := real.waitRegistered(ctx); err != nil {
			return nil, err
		}
	}
	if err := LabelNode(ctx, env, n.Name, opts.AdminLabels); err != nil {
		return nil, err
	}
	if err := n.StartAgent(ctx); err != nil {
		return nil, err
	}
	return n, nil
}

func (n *Node) register(ctx context.Context, kubeletVersion string, labels map[string]string) error {
	return RegisterNode(ctx, n.env, n.Name, kubeletVersion, labels)
}

// RegisterNode creates a Node with the node's own client certificate, as a
// kubelet of kubeletVersion registers it, so that admission judges the
// registration; a refusal is the apiserver's error (apierrors.IsForbidden
// and friends work on it). No kubelet runs: it is how a test shows what
// happens to a kubelet version other than the one built here.
func RegisterNode(ctx context.Context, env *Env, name, kubeletVersion string, labels map[string]string) error {
	client, err := env.NodeClient(name)
	if err != nil {
		return fmt.Errorf("node %s: credentials: %w", name, err)
	}
	obj := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Status:     corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{KubeletVersion: kubeletVersion}},
	}
	if _, err := client.CoreV1().Nodes().Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("registering node %s (kubelet %s): %w", name, kubeletVersion, err)
	}
	return nil
}

// LabelNode sets labels on a Node with the administrator's credentials, as
// `kubectl label node` does: how a Node gets labels a node may not write
// itself, such as contract.PoolLabel.
func LabelNode(ctx context.Context, env *Env, name string, labels map[string]string) error {
	if len(labels) == 0 {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels}})
	if err != nil {
		return fmt.Errorf("labelling node %s: %w", name, err)
	}
	if _, err := env.Admin.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("labelling node %s as the administrator: %w", name, err)
	}
	return nil
}

// writeFiles lays out what a node has before its kubelet starts: its own
// configuration (which the kubelet already runs; without the local copy
// when withoutLocal), the client certificate and the kubeconfig that points
// at it.
func (n *Node) writeFiles(withoutCertificate, withoutLocal bool, extraConfig string) error {
	if err := n.kubelet.writeLocalConfig(n.LocalConfigFile, extraConfig); err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	local, err := os.ReadFile(n.LocalConfigFile)
	if err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	if err := writeFile(n.KubeletConfigFile, string(local)); err != nil {
		return err
	}
	if withoutLocal {
		if err := os.Remove(n.LocalConfigFile); err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
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
	args := []string{
		"--node-name=" + n.Name,
		"--kubeconfig=" + n.kubeconfig,
		"--state-dir=" + filepath.Join(n.Dir, "state"),
		"--kubelet-config-mode=config",
		"--kubelet-config-file=" + n.KubeletConfigFile,
		"--local-config-file=" + n.LocalConfigFile,
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
	args = append(args, n.kubelet.controlArgs()...)
	if fields := n.kubelet.localFields(); len(fields) > 0 {
		args = append(args, "--local-fields="+strings.Join(fields, ","))
	}
	return args
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

// StartKubelet starts the kubelet (a real one under its unit, or the stub)
// and waits until it can take the agent's restart command.
func (n *Node) StartKubelet(ctx context.Context) error {
	if err := n.kubelet.start(ctx); err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	return nil
}

// StopKubelet stops the kubelet (and a real kubelet's unit and container
// runtime).
func (n *Node) StopKubelet() { n.kubelet.stop() }

// KubeletRunning reports whether the kubelet's process (for a real kubelet,
// its unit) runs.
func (n *Node) KubeletRunning() bool { return n.kubelet.running() }

// IsStub reports whether the node runs test/kubeletstub.
func (n *Node) IsStub() bool {
	_, ok := n.kubelet.(*stubKubelet)
	return ok
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

func (n *Node) agentLog() string { return filepath.Join(n.Dir, "agent.log") }

// AgentLogTail returns the last lines of the agent's log.
func (n *Node) AgentLogTail(lines int) string { return tail(n.agentLog(), lines) }

// KubeletLogTail returns the last lines of the kubelet's log.
func (n *Node) KubeletLogTail(lines int) string { return tail(n.kubelet.logPath(), lines) }

// KubeletLog returns the kubelet's whole log.
func (n *Node) KubeletLog() (string, error) {
	data, err := os.ReadFile(n.kubelet.logPath())
	if err != nil {
		return "", fmt.Errorf("node %s: %w", n.Name, err)
	}
	return string(data), nil
}

// LocalFields are the agent's node-local fields on this node: its default
// ones, and for a real kubelet the fields this host needs (see hostFields).
func (n *Node) LocalFields() []string {
	if fields := n.kubelet.localFields(); len(fields) > 0 {
		return fields
	}
	return kubelet.DefaultLocalFields
}

// WaitRegistered waits until a real kubelet has registered its Node and
// answers /healthz: after a node started WithoutCertificate gets one, say.
// For the stub, whose Node the framework registered, it returns at once.
func (n *Node) WaitRegistered(ctx context.Context) error {
	if real, ok := n.kubelet.(*realKubelet); ok {
		return real.waitRegistered(ctx)
	}
	return nil
}
