package agent_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/test/controlplane"
)

// waitTimeout bounds every wait: generous for a busy two-core machine, and
// including the authorizer's caches and the informers' backoff.
const waitTimeout = 2 * time.Minute

const configHead = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"

// node is one simulated node: a Node object, a kubelet stub, and the agent.
type node struct {
	t    testing.TB
	ctx  context.Context
	name string
	ns   string
	dir  string

	stubPort, agentPort int
	kubeletConfig       string
	localConfig         string
	pidFile, restartLog string
	certLink            string
	kubeconfig          string
	agentArgs           []string

	stub, agent      *exec.Cmd
	stubDone         chan struct{}
	agentDone        chan struct{}
	stubStartupDelay time.Duration
}

type nodeOptions struct {
	// withoutCertificate starts the agent before the kubelet's client
	// certificate exists (TLS bootstrap not done).
	withoutCertificate bool
	// agentArgs are added to the agent's flags (later flags win).
	agentArgs []string
	// stubStartupDelay is how long a stub restart keeps /healthz down;
	// zero means 100ms.
	stubStartupDelay time.Duration
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// newNode registers a Node and starts its stub kubelet and agent.
func newNode(t testing.TB, opts nodeOptions) *node {
	t.Helper()
	suffix := strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	n := &node{
		t: t, ctx: t.Context(), dir: t.TempDir(),
		name: "agent-" + suffix, ns: "agent-e2e-" + suffix,
	}
	n.stubPort, n.agentPort = freePort(t), freePort(t)
	n.stubStartupDelay = opts.stubStartupDelay
	if n.stubStartupDelay == 0 {
		n.stubStartupDelay = 100 * time.Millisecond
	}
	n.kubeletConfig = filepath.Join(n.dir, "kubelet", "config.yaml")
	n.localConfig = filepath.Join(n.dir, "kubelet-local.yaml")
	n.pidFile = filepath.Join(n.dir, "kubelet.pid")
	n.restartLog = filepath.Join(n.dir, "kubelet-restarts.log")
	n.certLink = filepath.Join(n.dir, "pki", "kubelet-client-current.pem")
	n.kubeconfig = filepath.Join(n.dir, "kubelet.kubeconfig")

	admin := env.Admin
	if _, err := admin.CoreV1().Namespaces().Create(n.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n.ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	created, err := admin.CoreV1().Nodes().Create(n.ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created.Status.NodeInfo.KubeletVersion = "v1.37.2"
	if _, err := admin.CoreV1().Nodes().UpdateStatus(n.ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = admin.CoreV1().Nodes().Delete(context.Background(), n.name, metav1.DeleteOptions{})
		_ = admin.CoreV1().Namespaces().Delete(context.Background(), n.ns, metav1.DeleteOptions{})
	})

	local := configHead + fmt.Sprintf("healthzBindAddress: 127.0.0.1\nhealthzPort: %d\nproviderID: e2e://%s\n", n.stubPort, n.name)
	n.writeFile(n.localConfig, local)
	// The kubelet already runs the node's own configuration.
	n.writeFile(n.kubeletConfig, local)
	if err := os.MkdirAll(filepath.Dir(n.certLink), 0o700); err != nil {
		t.Fatal(err)
	}
	if !opts.withoutCertificate {
		n.rotateCertificate("1")
	}
	if err := controlplane.WriteKubeconfig(n.kubeconfig, &rest.Config{Host: env.CP.URL(), TLSClientConfig: rest.TLSClientConfig{
		CAData: env.CP.CA().CertPEM(), CertFile: n.certLink, KeyFile: n.certLink,
	}}); err != nil {
		t.Fatal(err)
	}

	n.agentArgs = append([]string{
		"--node-name=" + n.name,
		"--kubeconfig=" + n.kubeconfig,
		"--state-dir=" + filepath.Join(n.dir, "state"),
		"--kubelet-config-mode=config",
		"--kubelet-config-file=" + n.kubeletConfig,
		"--local-config-file=" + n.localConfig,
		fmt.Sprintf("--kubelet-restart-command=%s restart --pid-file %s", stubBinary, n.pidFile),
		fmt.Sprintf("--kubelet-healthz-url=http://127.0.0.1:%d/healthz", n.stubPort),
		"--health-probe-period=200ms",
		"--health-probe-timeout=150ms",
		"--trial-period=3s",
		"--trial-grace-period=4s",
		"--trial-failure-threshold=3",
		fmt.Sprintf("--listen-address=127.0.0.1:%d", n.agentPort),
		"--resync-period=10s",
		"--kube-api-qps=50",
		"--kube-api-burst=100",
		"-v=2",
	}, opts.agentArgs...)

	n.startStub()
	n.startAgent()
	t.Cleanup(func() {
		n.stopAgent()
		n.stopStub()
		if t.Failed() {
			t.Logf("agent log tail:\n%s", tail(filepath.Join(n.dir, "agent.log"), 60))
			t.Logf("kubelet stub log tail:\n%s", tail(filepath.Join(n.dir, "kubelet.log"), 20))
		}
	})
	return n
}

func (n *node) writeFile(path, content string) {
	n.t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		n.t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		n.t.Fatal(err)
	}
}

// rotateCertificate issues a new client certificate and moves the
// kubelet-client-current.pem symlink to it, as the kubelet does.
func (n *node) rotateCertificate(generation string) {
	n.t.Helper()
	certPEM, keyPEM, err := env.CP.CA().IssueClientCert(contract.NodeUserPrefix+n.name, contract.NodesGroup)
	if err != nil {
		n.t.Fatal(err)
	}
	target := filepath.Join(filepath.Dir(n.certLink), "kubelet-client-"+generation+".pem")
	if err := os.WriteFile(target, append(certPEM, keyPEM...), 0o600); err != nil {
		n.t.Fatal(err)
	}
	tmp := n.certLink + ".tmp"
	_ = os.Remove(tmp)
	if err := os.Symlink(target, tmp); err != nil {
		n.t.Fatal(err)
	}
	if err := os.Rename(tmp, n.certLink); err != nil {
		n.t.Fatal(err)
	}
}

func startProcess(t testing.TB, logPath string, argv ...string) (*exec.Cmd, chan struct{}) {
	t.Helper()
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		t.Fatalf("starting %s: %v", argv[0], err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logFile.Close()
		close(done)
	}()
	return cmd, done
}

func stopProcess(cmd *exec.Cmd, done chan struct{}) {
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

func (n *node) startStub() {
	n.t.Helper()
	n.stub, n.stubDone = startProcess(n.t, filepath.Join(n.dir, "kubelet.log"), stubBinary, "serve",
		"--config", n.kubeletConfig, "--healthz-port", strconv.Itoa(n.stubPort), "--pid-file", n.pidFile,
		"--restart-log", n.restartLog, "--startup-delay", n.stubStartupDelay.String())
	n.eventually("the stub kubelet to write its PID", func() (bool, string) {
		_, err := os.Stat(n.pidFile)
		return err == nil, fmt.Sprint(err)
	})
}

func (n *node) stopStub() { stopProcess(n.stub, n.stubDone); n.stub = nil }

func (n *node) startAgent() {
	n.t.Helper()
	n.agent, n.agentDone = startProcess(n.t, filepath.Join(n.dir, "agent.log"), append([]string{agentBinary}, n.agentArgs...)...)
	n.eventually("the agent's /healthz", func() (bool, string) {
		select {
		case <-n.agentDone:
			n.t.Fatalf("the agent exited:\n%s", tail(filepath.Join(n.dir, "agent.log"), 40))
		default:
		}
		code, body, err := n.agentGet("/healthz")
		return err == nil && code == http.StatusOK, fmt.Sprint(code, body, err)
	})
}

func (n *node) stopAgent() { stopProcess(n.agent, n.agentDone); n.agent = nil }

func (n *node) agentGet(path string) (int, string, error) {
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(fmt.Sprintf("http://127.0.0.1:%d%s", n.agentPort, path))
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// metric returns the value of the first sample line starting with prefix.
func (n *node) metric(prefix string) (float64, bool) {
	n.t.Helper()
	_, body, err := n.agentGet("/metrics")
	if err != nil {
		n.t.Fatalf("scraping the agent: %v", err)
	}
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, prefix) {
			fields := strings.Fields(line)
			v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
			return v, err == nil
		}
	}
	return 0, false
}

// openFDs counts the agent's open file descriptors.
func (n *node) openFDs() int {
	n.t.Helper()
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", n.agent.Process.Pid))
	if err != nil {
		n.t.Fatal(err)
	}
	return len(entries)
}

// eventually polls cond until it holds, failing the test with cond's last
// description after waitTimeout.
func (n *node) eventually(what string, cond func() (bool, string)) {
	n.t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for {
		ok, detail := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			n.t.Fatalf("waiting for %s: gave up after %v; last: %s", what, waitTimeout, detail)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// configMap creates or replaces an eligible ConfigMap in the node's
// namespace and returns it as stored.
func (n *node) configMap(name, config string) *corev1.ConfigMap {
	n.t.Helper()
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: n.ns, Name: name, Labels: map[string]string{contract.EligibleLabel: contract.EligibleLabelValue}},
		Data:       map[string]string{contract.ConfigMapKey: configHead + config},
	}
	cms := env.Admin.CoreV1().ConfigMaps(n.ns)
	existing, err := cms.Get(n.ctx, name, metav1.GetOptions{})
	if err == nil {
		existing.Data = cm.Data
		stored, err := cms.Update(n.ctx, existing, metav1.UpdateOptions{})
		if err != nil {
			n.t.Fatal(err)
		}
		return stored
	}
	stored, err := cms.Create(n.ctx, cm, metav1.CreateOptions{})
	if err != nil {
		n.t.Fatal(err)
	}
	return stored
}

// assign points the Node at a ConfigMap in its namespace; "" clears it.
func (n *node) assign(name string) {
	n.t.Helper()
	var value any
	if name != "" {
		value = n.ns + "/" + name
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{contract.ConfigSourceAnnotation: value}}})
	if _, err := env.Admin.CoreV1().Nodes().Patch(n.ctx, n.name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		n.t.Fatal(err)
	}
}

// observed is what the agent reported on the Node.
type observed struct {
	status    contract.ConfigStatus
	condition *corev1.NodeCondition
}

func (o observed) String() string {
	data, _ := json.Marshal(o.status)
	if o.condition == nil {
		return string(data) + " (no condition)"
	}
	return fmt.Sprintf("%s %s/%s: %s", data, o.condition.Status, o.condition.Reason, o.condition.Message)
}

func (n *node) observe() observed {
	n.t.Helper()
	node, err := env.Admin.CoreV1().Nodes().Get(n.ctx, n.name, metav1.GetOptions{})
	if err != nil {
		n.t.Fatal(err)
	}
	var o observed
	_ = json.Unmarshal([]byte(node.Annotations[contract.ConfigStatusAnnotation]), &o.status)
	for i := range node.Status.Conditions {
		if node.Status.Conditions[i].Type == contract.ConditionKubeletConfigReady {
			o.condition = &node.Status.Conditions[i]
		}
	}
	return o
}

// waitReport waits until the Node's report satisfies want.
func (n *node) waitReport(what string, want func(observed) bool) observed {
	n.t.Helper()
	var last observed
	n.eventually(what, func() (bool, string) {
		last = n.observe()
		return want(last), last.String()
	})
	return last
}

func is(ref *contract.ObjectRef, cm *corev1.ConfigMap) bool {
	if cm == nil {
		return ref == nil
	}
	return ref != nil && ref.UID == string(cm.UID) && ref.ResourceVersion == cm.ResourceVersion
}

func reason(o observed, status corev1.ConditionStatus, reason string) bool {
	return o.condition != nil && o.condition.Status == status && o.condition.Reason == reason
}

// restarts returns the stub's restart log: one behaviour per (re)start.
func (n *node) restarts() []string {
	n.t.Helper()
	f, err := os.Open(n.restartLog)
	if err != nil {
		n.t.Fatal(err)
	}
	defer f.Close()
	var behaviors []string
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		var r struct {
			Behavior string `json:"behavior"`
		}
		if err := json.Unmarshal(scanner.Bytes(), &r); err != nil {
			n.t.Fatal(err)
		}
		behaviors = append(behaviors, r.Behavior)
	}
	return behaviors
}

func (n *node) kubeletFile() string {
	n.t.Helper()
	data, err := os.ReadFile(n.kubeletConfig)
	if err != nil {
		n.t.Fatal(err)
	}
	return string(data)
}

func tail(path string, lines int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	all := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}
