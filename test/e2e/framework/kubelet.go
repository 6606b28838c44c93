package framework

import (
	"bufio"
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/nodeguard/nodeguard/pkg/nodeagent/kubelet"
)

// KubeletRestartSec is the delay before a real kubelet that exited is
// started again: systemd's RestartSec= of the test's kubelet unit, seconds
// where kubeadm's kubelet.service waits 10.
const KubeletRestartSec = time.Second

// HostSysctls are the /proc/sys entries a real kubelet checks or writes,
// with the values it wants. Its unit bind-mounts files holding them over
// /proc/sys inside the kubelet's own mount namespace, so the host's are
// never read or changed by it.
var HostSysctls = map[string]string{
	"vm/overcommit_memory":      "1",
	"vm/panic_on_oom":           "0",
	"kernel/panic":              "10",
	"kernel/panic_on_oops":      "1",
	"kernel/keys/root_maxkeys":  "1000000",
	"kernel/keys/root_maxbytes": "25000000",
}

// hostFields are the top-level KubeletConfiguration fields every real
// kubelet here needs to run on this host (a cgroup v1 machine without a
// container runtime, shared by several kubelets), kept from the node's own
// configuration like the agent's default node-local fields.
var hostFields = []string{
	"address", "port", "readOnlyPort",
	"podLogsDir", "volumePluginDir",
	"failCgroupV1", "cgroupDriver", "cgroupsPerQOS", "enforceNodeAllocatable",
	"failSwapOn", "evictionHard",
}

// realKubelet is a real kubelet under test/kubeletunit, which plays
// systemd (Restart=always, `systemctl restart`) and starts it in a private
// mount namespace, beside fakecri as its container runtime; or, on
// RuntimeContainerd, the unit is the whole node: containerd and the kubelet
// in one private mount namespace, the containers in the node's own cgroup.
type realKubelet struct {
	node   *Node
	labels map[string]string
	args   []string
	// containerd is the node's runtime on RuntimeContainerd, else nil.
	containerd *containerdNode

	// socketDir is short, for unix socket paths' length limit (108
	// bytes); it holds the sockets and the kubelet's root directory, and
	// goes when the kubelet stops.
	socketDir   string
	criEndpoint string
	control     string
	rootDir     string
	journal     string
	log         string
	criLog      string
	configDir   string

	mu   sync.Mutex
	cri  *child
	unit *child
}

func newRealKubelet(n *Node, labels map[string]string, args []string, runtime ContainerRuntime, containers ContainerBinaries) (*realKubelet, error) {
	if runtime == "" {
		runtime = RuntimeFake
	}
	socketDir, err := os.MkdirTemp("", "ngk-")
	if err != nil {
		return nil, fmt.Errorf("creating the sockets' directory: %w", err)
	}
	k := &realKubelet{node: n, labels: labels, args: args, socketDir: socketDir,
		criEndpoint: "unix://" + filepath.Join(socketDir, "cri.sock"),
		control:     filepath.Join(socketDir, "unit.sock"),
		// The kubelet serves unix sockets under its root directory too
		// (pod resources, plugin registration).
		rootDir: filepath.Join(socketDir, "root"),
		journal: filepath.Join(n.Dir, "kubelet.journal"),
		log:     filepath.Join(n.Dir, "kubelet.log"),
		criLog:  filepath.Join(n.Dir, string(runtime)+".log"),
	}
	for _, arg := range args {
		if dir, ok := strings.CutPrefix(arg, "--config-dir="); ok {
			k.configDir = dir
		}
	}
	switch runtime {
	case RuntimeFake:
	case RuntimeContainerd:
		if containers.Containerd == "" {
			_ = os.RemoveAll(socketDir)
			return nil, errors.New("a node on containerd needs NodeBinaries.Containers (BuildContainerBinaries)")
		}
		if k.containerd, err = newContainerdNode(n.Name, n.Dir, socketDir, containers); err != nil {
			_ = os.RemoveAll(socketDir)
			return nil, err
		}
	default:
		_ = os.RemoveAll(socketDir)
		return nil, fmt.Errorf("unknown container runtime %q (want %s or %s)", runtime, RuntimeFake, RuntimeContainerd)
	}
	return k, nil
}

func (k *realKubelet) writeLocalConfig(path, extra string) error {
	n := k.node
	caFile := filepath.Join(n.Dir, "pki", "client-ca.crt")
	if err := writeFile(caFile, string(n.env.CP.CA().CertPEM())); err != nil {
		return err
	}
	podLogs, volumePlugins := filepath.Join(n.Dir, "pod-logs"), filepath.Join(n.Dir, "volume-plugins")
	for _, dir := range []string{k.rootDir, podLogs, volumePlugins, filepath.Join(n.Dir, "image-fs")} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	config := map[string]any{
		"apiVersion": "kubelet.config.k8s.io/v1beta1",
		"kind":       "KubeletConfiguration",
		"providerID": "e2e://" + n.Name,
		// Every address, as a kubelet serves by default: the apiserver
		// reaches it at the Node's InternalIP (kubectl logs, exec,
		// /api/v1/nodes/NAME/proxy/configz), which is this host's own
		// address, not loopback.
		"address":                  "0.0.0.0",
		"port":                     n.KubeletPort,
		"readOnlyPort":             0,
		"healthzBindAddress":       "127.0.0.1",
		"healthzPort":              n.KubeletHealthzPort,
		"containerRuntimeEndpoint": k.criEndpoint,
		"podLogsDir":               podLogs,
		"volumePluginDir":          volumePlugins,
		// What the test host needs (docs/agent.md, Tests): cgroup v1, no
		// runtime of its own, swap perhaps on, no eviction on a shared
		// machine.
		"failCgroupV1":  false,
		"cgroupDriver":  "cgroupfs",
		"cgroupsPerQOS": false,
		// "none" rather than []: merged with a --config-dir, the kubelet
		// reads an empty list as unset and enforces "pods", which needs
		// cgroupsPerQOS.
		"enforceNodeAllocatable": []string{"none"},
		"failSwapOn":             false,
		"evictionHard":           map[string]string{},
		// The apiserver's client certificate, and Configz's, are checked
		// against the control plane's CA and authorized by the apiserver.
		"authentication": map[string]any{
			"anonymous": map[string]any{"enabled": false},
			"webhook":   map[string]any{"enabled": true},
			"x509":      map[string]any{"clientCAFile": caFile},
		},
		"authorization": map[string]any{"mode": "Webhook"},
	}
	if k.containerd != nil {
		maps.Copy(config, k.containerd.localConfig())
	}
	var overrides map[string]any
	if err := yaml.Unmarshal([]byte(extra), &overrides); err != nil {
		return fmt.Errorf("the node's extra configuration: %w", err)
	}
	maps.Copy(config, overrides)
	data, err := yaml.Marshal(config)
	if err != nil {
		return fmt.Errorf("encoding the node's configuration: %w", err)
	}
	return writeFile(path, string(data))
}

func (k *realKubelet) kubeletArgv() []string {
	n := k.node
	argv := []string{n.binaries.Kubelet,
		"--config=" + n.KubeletConfigFile,
		"--kubeconfig=" + n.kubeconfig,
		"--root-dir=" + k.rootDir,
		// Its serving certificate, which Configz trusts; the default is
		// under /var/lib, a tmpfs of the kubelet's own namespace.
		"--cert-dir=" + filepath.Join(k.rootDir, "pki"),
		"--hostname-override=" + n.Name,
		"--v=1",
	}
	if len(k.labels) > 0 {
		var labels []string
		for key, value := range k.labels {
			labels = append(labels, key+"="+value)
		}
		sort.Strings(labels)
		argv = append(argv, "--node-labels="+strings.Join(labels, ","))
	}
	return append(argv, k.args...)
}

func (k *realKubelet) start(ctx context.Context) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.unit != nil {
		return fmt.Errorf("the kubelet is already running")
	}
	n := k.node
	if k.containerd == nil && (k.cri == nil || !k.cri.running()) {
		cri, err := startChild("fakecri", k.criLog, n.binaries.FakeCRI,
			"--endpoint="+k.criEndpoint, "--image-fs-dir="+filepath.Join(n.Dir, "image-fs"))
		if err != nil {
			return err
		}
		k.cri = cri
		socket := strings.TrimPrefix(k.criEndpoint, "unix://")
		if err := Eventually(ctx, startTimeout, "the container runtime of "+n.Name, func(context.Context) (bool, string, error) {
			if !cri.running() {
				return false, "", fmt.Errorf("fakecri of %s exited; log:\n%s", n.Name, tail(k.criLog, 20))
			}
			_, err := os.Stat(socket)
			return err == nil, fmt.Sprint(err), nil
		}); err != nil {
			return err
		}
	}
	layout, err := k.writeNodeLayout()
	if err != nil {
		return err
	}
	unitArgs := []string{n.binaries.KubeletUnit, "serve",
		"--control=" + k.control, "--journal=" + k.journal,
		"--restart-sec=" + KubeletRestartSec.String(),
		"--config-file=" + n.KubeletConfigFile,
		"--private-mounts"}
	for _, dir := range nodeLayoutDirs {
		unitArgs = append(unitArgs, "--overlay="+dir+"="+filepath.Join(layout, dir))
	}
	if k.configDir != "" {
		unitArgs = append(unitArgs, "--config-dir="+k.configDir)
	}
	child := childOptions{dir: filepath.Join(n.Dir, "kubelet-cwd")}
	if k.containerd != nil {
		config, err := k.containerd.writeConfig()
		if err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
		unitArgs = append(unitArgs, k.containerd.unitArgs(config, k.criLog)...)
		child.env, child.ownMountNamespace = k.containerd.env(), true
	}
	keys := make([]string, 0, len(HostSysctls))
	for key := range HostSysctls {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	for _, key := range keys {
		unitArgs = append(unitArgs, "--sysctl="+key+"="+HostSysctls[key])
	}
	unitArgs = append(append(unitArgs, "--"), k.kubeletArgv()...)
	// The kubelet works in an empty directory of its own, never in ours (a
	// test's package directory, or the repository root under make run): on
	// the fake runtime a container's log path is empty, and when the
	// kubelet removes a container it deletes every file matching "<log
	// path>*" (the container log manager's Clean), which is then every
	// file in its working directory.
	if err := os.MkdirAll(child.dir, 0o755); err != nil {
		return fmt.Errorf("node %s: the kubelet's working directory: %w", n.Name, err)
	}
	unit, err := startChildWith(child, "kubelet unit", k.log, unitArgs...)
	if err != nil {
		return err
	}
	k.unit = unit
	return Eventually(ctx, startTimeout, "the kubelet unit of "+n.Name+" to answer", func(ctx context.Context) (bool, string, error) {
		if !unit.running() {
			return false, "", fmt.Errorf("the kubelet unit of %s exited; log:\n%s", n.Name, tail(k.log, 20))
		}
		out, err := k.ctl(ctx, "status")
		return err == nil, out, nil
	})
}

// nodeLayoutDirs are the host directories the kubelet's namespace overlays
// with the node's own (writeNodeLayout): the hostPath volumes of the pods it
// runs, the agent DaemonSet's above all, find a node's files there, and
// what the kubelet creates for them (a DirectoryOrCreate volume such as
// /etc/nodeguard) lands in the node's directory instead of on the host.
var nodeLayoutDirs = []string{"/etc", "/run"}

// writeNodeLayout fills the node's own layers over nodeLayoutDirs with what
// a kubeadm node on systemd has and the agent DaemonSet of manifests/base
// mounts: the kubelet's kubeconfig at /etc/kubernetes/kubelet.conf and the
// system bus's directory, /run/dbus (empty: nothing in a pod runs on the
// fake runtime). It returns the directory holding the layers.
func (k *realKubelet) writeNodeLayout() (string, error) {
	layout := filepath.Join(k.node.Dir, "layout")
	kubeconfig, err := os.ReadFile(k.node.kubeconfig)
	if err != nil {
		return "", fmt.Errorf("the node's kubeconfig: %w", err)
	}
	if err := writeFile(filepath.Join(layout, "etc", "kubernetes", "kubelet.conf"), string(kubeconfig)); err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Join(layout, "run", "dbus"), 0o755); err != nil {
		return "", fmt.Errorf("the node's layout: %w", err)
	}
	return layout, nil
}

// ctl runs `kubeletunit COMMAND`, as systemctl would be run.
func (k *realKubelet) ctl(ctx context.Context, command string) (string, error) {
	out, err := exec.CommandContext(ctx, k.node.binaries.KubeletUnit, command, "--control="+k.control).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("kubeletunit %s: %w: %s", command, err, strings.TrimSpace(string(out)))
	}
	return strings.TrimSpace(string(out)), nil
}

func (k *realKubelet) stop() {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.unit != nil {
		k.unit.stop()
		k.unit = nil
	}
	if k.cri != nil {
		k.cri.stop()
		k.cri = nil
	}
	_ = os.RemoveAll(k.socketDir)
}

func (k *realKubelet) running() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.unit != nil && k.unit.running()
}

func (k *realKubelet) controlArgs() []string {
	command := func(verb string) string {
		return fmt.Sprintf("%s %s --control=%s", k.node.binaries.KubeletUnit, verb, k.control)
	}
	return []string{
		"--kubelet-restart-command=" + command("restart"),
		"--kubelet-stop-command=" + command("stop"),
		"--kubelet-start-command=" + command("start"),
		"--kubelet-root-dir=" + k.rootDir,
		// Its HTTPS API, where the agent reads /configz and /flagz as the
		// node, as the shipped DaemonSet does on 127.0.0.1:10250.
		fmt.Sprintf("--kubelet-server-url=https://127.0.0.1:%d", k.node.KubeletPort),
	}
}

func (k *realKubelet) restartAsAdmin(ctx context.Context) error {
	_, err := k.ctl(ctx, "restart")
	return err
}

// journalEntry is a line of test/kubeletunit's journal.
type journalEntry struct {
	Time         time.Time `json:"time"`
	Event        string    `json:"event"`
	PID          int       `json:"pid"`
	Cause        string    `json:"cause"`
	ConfigSHA256 string    `json:"configSHA256"`
	Asked        time.Time `json:"asked"`
	ExitCode     *int      `json:"exitCode"`
	Requested    bool      `json:"requested"`
}

func (k *realKubelet) restarts() ([]KubeletRestart, error) {
	f, err := os.Open(k.journal)
	if err != nil {
		return nil, fmt.Errorf("the kubelet unit's journal: %w", err)
	}
	defer f.Close()
	var restarts []KubeletRestart
	byPID := map[int]int{}
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		var e journalEntry
		if err := json.Unmarshal(scanner.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("the kubelet unit's journal: %w", err)
		}
		switch e.Event {
		case "start":
			byPID[e.PID] = len(restarts)
			restarts = append(restarts, KubeletRestart{Time: e.Time, Asked: e.Asked, SHA256: e.ConfigSHA256, Cause: e.Cause, Behavior: KubeletRunning, PID: e.PID})
		case "exit":
			i, ok := byPID[e.PID]
			if !ok {
				continue
			}
			restarts[i].Behavior = KubeletCrashed
			if e.Requested {
				restarts[i].Behavior = KubeletStopped
			}
			if e.ExitCode != nil {
				restarts[i].ExitCode = *e.ExitCode
			}
		}
	}
	if err := scanner.Err(); err != nil {
		return nil, fmt.Errorf("the kubelet unit's journal: %w", err)
	}
	return restarts, nil
}

func (k *realKubelet) localFields() []string {
	fields := append(append([]string(nil), kubelet.DefaultLocalFields...), hostFields...)
	if k.containerd != nil {
		fields = append(fields, "cgroupRoot")
	}
	return fields
}

func (k *realKubelet) logPath() string { return k.log }

// waitRegistered waits until the kubelet has registered its Node and
// answers /healthz.
func (k *realKubelet) waitRegistered(ctx context.Context) error {
	n := k.node
	client := &http.Client{Timeout: 2 * time.Second}
	err := Eventually(ctx, startTimeout, "the kubelet of "+n.Name+" to register and be healthy", func(ctx context.Context) (bool, string, error) {
		if !k.running() {
			return false, "", fmt.Errorf("the kubelet unit of %s exited; log:\n%s", n.Name, tail(k.log, 30))
		}
		if _, err := n.env.Admin.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{}); err != nil {
			if apierrors.IsNotFound(err) {
				return false, "not registered yet", nil
			}
			return false, err.Error(), nil
		}
		resp, err := client.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", n.KubeletHealthzPort))
		if err != nil {
			return false, err.Error(), nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status, nil
	})
	if err != nil {
		return fmt.Errorf("%w; kubelet log:\n%s", err, tail(k.log, 30))
	}
	return nil
}

// KubeletRootDir is the real kubelet's --root-dir, where it keeps its
// managers' state files (cpu_manager_state, ...).
func (n *Node) KubeletRootDir() (string, error) {
	k, ok := n.kubelet.(*realKubelet)
	if !ok {
		return "", fmt.Errorf("node %s runs the stub, which keeps no state", n.Name)
	}
	return k.rootDir, nil
}

// Configz returns what a real kubelet's /configz serves: the configuration
// it runs, as {"kubeletconfig": {...}}. It asks with the control plane's
// admin certificate, which the kubelet authenticates against its client CA
// and authorizes through the apiserver, as it would the apiserver's own.
func (n *Node) Configz(ctx context.Context) (map[string]any, error) {
	k, ok := n.kubelet.(*realKubelet)
	if !ok {
		return nil, fmt.Errorf("node %s runs the stub, which has no /configz", n.Name)
	}
	tlsConfig, err := rest.TLSConfigFor(n.env.CP.AdminConfig())
	if err != nil {
		return nil, fmt.Errorf("node %s: admin TLS configuration: %w", n.Name, err)
	}
	// The kubelet serves a self-signed certificate for its hostname,
	// written under its root directory.
	servingCert, err := os.ReadFile(filepath.Join(k.rootDir, "pki", "kubelet.crt"))
	if err != nil {
		return nil, fmt.Errorf("node %s: the kubelet's serving certificate: %w", n.Name, err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(servingCert) {
		return nil, fmt.Errorf("node %s: the kubelet's serving certificate does not parse", n.Name)
	}
	tlsConfig.RootCAs, tlsConfig.ServerName = roots, n.Name
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig}}
	defer client.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d/configz", n.KubeletPort), nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("node %s: /configz: %w", n.Name, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("node %s: /configz: %w", n.Name, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("node %s: /configz: %s: %s", n.Name, resp.Status, body)
	}
	var configz map[string]any
	if err := json.Unmarshal(body, &configz); err != nil {
		return nil, fmt.Errorf("node %s: /configz: %w", n.Name, err)
	}
	return configz, nil
}

// SignalKubelet sends sig to the running real kubelet's process group:
// SIGSTOP freezes it (its socket still accepts connections and nothing
// answers, as a deadlocked kubelet), SIGCONT thaws it, SIGKILL crashes it
// and its unit restarts it as Restart=always does.
func (n *Node) SignalKubelet(sig syscall.Signal) error {
	k, ok := n.kubelet.(*realKubelet)
	if !ok {
		return fmt.Errorf("node %s runs the stub", n.Name)
	}
	restarts, err := k.restarts()
	if err != nil {
		return err
	}
	pid := 0
	if len(restarts) > 0 && restarts[len(restarts)-1].Behavior == KubeletRunning {
		pid = restarts[len(restarts)-1].PID
	}
	if pid == 0 {
		return fmt.Errorf("node %s: no kubelet runs", n.Name)
	}
	if err := syscall.Kill(-pid, sig); err != nil {
		return fmt.Errorf("node %s: signalling the kubelet (pid %d): %w", n.Name, pid, err)
	}
	return nil
}
