package nodeagent

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/kubeclient"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/kubeclient/kubeclienttest"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/kubelet"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/statelock"
	"github.com/nodeguard/nodeguard/pkg/nodeagent/trial"
)

const localConfig = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nproviderID: node-1\n"

func testConfig(t *testing.T, healthzURL string) Config {
	t.Helper()
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	return Config{
		NodeName:          "node-1",
		Kubeconfig:        filepath.Join(dir, "unused-kubeconfig"),
		KubeAPIQPS:        50,
		KubeAPIBurst:      100,
		StateDir:          filepath.Join(dir, "state"),
		BootIDPath:        write("boot_id", "boot-1\n"),
		Renderer:          kubelet.Renderer{Mode: kubelet.ModeConfig, LocalConfigFile: write("local.yaml", localConfig), LocalFields: kubelet.DefaultLocalFields},
		KubeletConfigFile: filepath.Join(dir, "kubelet.yaml"),
		Restarter:         kubelet.NewCommandRestarter([]string{"true"}, 10*time.Second),
		RestartTimeout:    10 * time.Second,
		HealthzURL:        healthzURL,
		ProbePeriod:       20 * time.Millisecond,
		ProbeTimeout:      time.Second,
		Trial:             trial.Terms{Period: 300 * time.Millisecond, Grace: 10 * time.Second, FailureThreshold: 3},
		ResyncPeriod:      time.Minute,
		DrainTimeout:      time.Minute,
		DrainPollPeriod:   20 * time.Millisecond,
		KubeletRootDir:    filepath.Join(dir, "kubelet-root"),
		// The stand-in kubelet of fakeKubelet, without TLS.
		KubeletServerURL:   strings.TrimSuffix(healthzURL, "/healthz"),
		KubeletReadTimeout: time.Second,
	}
}

// fakeKubelet answers /healthz, and /configz with its file as the kubelet
// would run it: the file the agent writes, as it is (its restart command
// does nothing).
func fakeKubelet(t *testing.T, configFile func() string) *httptest.Server {
	t.Helper()
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/configz" {
			_, _ = w.Write([]byte("ok"))
			return
		}
		data, _ := os.ReadFile(configFile())
		fields := map[string]any{}
		_ = yaml.Unmarshal(data, &fields)
		_ = json.NewEncoder(w).Encode(map[string]any{"kubeletconfig": fields})
	}))
	t.Cleanup(server.Close)
	return server
}

// TestAgentWithFakeAPI runs the whole agent against a fake clientset: it
// applies the assigned ConfigMap, passes the trial and reports on the Node.
func TestAgentWithFakeAPI(t *testing.T) {
	var cfg Config
	kubeletHealth := fakeKubelet(t, func() string { return cfg.KubeletConfigFile })
	cfg = testConfig(t, kubeletHealth.URL+"/healthz")

	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kubelet-a", UID: "uid-a", ResourceVersion: "5",
			Labels: map[string]string{contract.EligibleLabel: contract.EligibleLabelValue}},
		Data: map[string]string{contract.ConfigMapKey: "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 42\n"},
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-1", Annotations: map[string]string{contract.ConfigSourceAnnotation: "kube-system/kubelet-a"}},
		Status:     corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{KubeletVersion: "v1.37.2"}},
	}
	client := fake.NewClientset(node, cm)

	// A temporary file of a write a killed agent never finished, beside a
	// file the agent does not own.
	staleTemp := filepath.Join(filepath.Dir(cfg.KubeletConfigFile), "."+filepath.Base(cfg.KubeletConfigFile)+"4242")
	for _, path := range []string{staleTemp, cfg.Renderer.LocalConfigFile + ".1"} {
		if err := os.WriteFile(path, []byte("partial"), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logr.Discard()))
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, cfg, func(context.Context) (kubeclient.Interface, error) { return kubeclienttest.Wrap(client), nil })
	}()

	deadline := time.Now().Add(30 * time.Second)
	var last string
	for {
		n, err := client.CoreV1().Nodes().Get(ctx, "node-1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var st contract.ConfigStatus
		last = n.Annotations[contract.ConfigStatusAnnotation]
		_ = json.Unmarshal([]byte(last), &st)
		var ready *corev1.NodeCondition
		for i := range n.Status.Conditions {
			if n.Status.Conditions[i].Type == contract.ConditionKubeletConfigReady {
				ready = &n.Status.Conditions[i]
			}
		}
		if st.LastKnownGood != nil && st.LastKnownGood.UID == "uid-a" && ready != nil && ready.Reason == contract.ReasonConfigActive {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the agent never reported A as last-known-good; status %s, condition %+v", last, ready)
		}
		time.Sleep(20 * time.Millisecond)
	}
	data, err := os.ReadFile(cfg.KubeletConfigFile)
	if err != nil || !strings.Contains(string(data), "maxPods: 42") || !strings.Contains(string(data), "providerID: node-1") {
		t.Fatalf("kubelet file: %q, %v", data, err)
	}
	if _, err := os.Stat(staleTemp); !os.IsNotExist(err) {
		t.Errorf("the stale temporary file %s is still there (%v)", staleTemp, err)
	}
	if _, err := os.Stat(cfg.Renderer.LocalConfigFile + ".1"); err != nil {
		t.Errorf("a file the agent does not own was touched: %v", err)
	}
	// Events go out through the recorder's broadcaster, after the status
	// that the loop above waited for: they may arrive a moment later.
	reasons := map[string]bool{}
	err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, time.Until(deadline), true, func(ctx context.Context) (bool, error) {
		events, err := client.CoreV1().Events("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, ev := range events.Items {
			reasons[ev.Reason] = true
		}
		return reasons[contract.EventConfigApplied] && reasons[contract.EventTrialPassed], nil
	})
	if err != nil {
		t.Errorf("events: %v, want %s and %s: %v", reasons, contract.EventConfigApplied, contract.EventTrialPassed, err)
	}

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
}

func TestRunRefusesBadSettings(t *testing.T) {
	cfg := testConfig(t, "http://127.0.0.1:1/healthz")
	cfg.Restarter = nil
	cfg.Trial.FailureThreshold = 0
	err := Run(context.Background(), cfg)
	if err == nil || !strings.Contains(err.Error(), "restart the kubelet") || !strings.Contains(err.Error(), "failure threshold") {
		t.Fatalf("Run = %v", err)
	}
}

func TestRunFailsOnABrokenKubeconfig(t *testing.T) {
	cfg := testConfig(t, "http://127.0.0.1:1/healthz")
	if err := os.WriteFile(cfg.Kubeconfig, []byte("{broken"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(klog.NewContext(context.Background(), logr.Discard()), 30*time.Second)
	defer cancel()
	err := Run(ctx, cfg)
	if err == nil || ctx.Err() != nil || !strings.Contains(err.Error(), "kubeconfig") {
		t.Fatalf("Run = %v (ctx %v)", err, ctx.Err())
	}
}

// TestSecondAgentWaitsForTheFirst: an agent started on a node where another
// still runs (a force-deleted pod, a surge) touches nothing until the first
// exits: not the kubelet's directory, where it would remove the first's
// in-flight temporary file as a crash's leftover, nor the API.
func TestSecondAgentWaitsForTheFirst(t *testing.T) {
	cfg := testConfig(t, "http://127.0.0.1:1/healthz")
	// The first agent's write in flight.
	inFlight := filepath.Join(filepath.Dir(cfg.KubeletConfigFile), "."+filepath.Base(cfg.KubeletConfigFile)+"4242")
	if err := os.WriteFile(inFlight, []byte("partial"), 0o600); err != nil {
		t.Fatal(err)
	}
	first, err := statelock.Acquire(context.Background(), cfg.StateDir, time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{}, 2)
	newClient := func(context.Context) (kubeclient.Interface, error) {
		started <- struct{}{}
		return kubeclienttest.Wrap(fake.NewClientset()), nil
	}
	ctx, cancel := context.WithTimeout(klog.NewContext(context.Background(), logr.Discard()), 500*time.Millisecond)
	defer cancel()
	if err := run(ctx, cfg, newClient); err != nil {
		t.Fatalf("a waiting agent stopped with %v, want a clean stop", err)
	}
	if len(started) != 0 {
		t.Fatal("the second agent reached the API while the first held the lock")
	}
	if _, err := os.Stat(inFlight); err != nil {
		t.Fatalf("the second agent removed the first's in-flight file: %v", err)
	}

	// Once the first is gone, the next one starts (and cleans up).
	if err := first.Release(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel = context.WithCancel(klog.NewContext(context.Background(), logr.Discard()))
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- run(ctx, cfg, newClient) }()
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("the agent did not start after the lock was released")
	}
	if _, err := os.Stat(inFlight); !os.IsNotExist(err) {
		t.Errorf("the leftover temporary file %s is still there (%v)", inFlight, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// TestRunSeedsTheLocalConfiguration: in config mode an agent whose local
// file is missing copies the kubelet's file to it before it renders
// anything, and refuses to start when the kubelet's file is one it wrote.
func TestRunSeedsTheLocalConfiguration(t *testing.T) {
	offline := errors.New("offline")
	newClient := func(context.Context) (kubeclient.Interface, error) { return nil, offline }
	ctx := klog.NewContext(context.Background(), logr.Discard())

	cfg := testConfig(t, "http://127.0.0.1:1/healthz")
	if err := os.Remove(cfg.Renderer.LocalConfigFile); err != nil {
		t.Fatal(err)
	}
	kubeadm := localConfig + "# the node's own\n"
	if err := os.WriteFile(cfg.KubeletConfigFile, []byte(kubeadm), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run(ctx, cfg, newClient); !errors.Is(err, offline) {
		t.Fatalf("run = %v, want it to get as far as the API", err)
	}
	if got, err := os.ReadFile(cfg.Renderer.LocalConfigFile); err != nil || string(got) != kubeadm {
		t.Fatalf("local file %q, %v; want the kubelet's %q", got, err, kubeadm)
	}

	cfg = testConfig(t, "http://127.0.0.1:1/healthz")
	if err := os.Remove(cfg.Renderer.LocalConfigFile); err != nil {
		t.Fatal(err)
	}
	owned := "# Written by the nodeguard agent; changes are overwritten.\n" + localConfig + "maxPods: 42\n"
	if err := os.WriteFile(cfg.KubeletConfigFile, []byte(owned), 0o644); err != nil {
		t.Fatal(err)
	}
	err := run(ctx, cfg, newClient)
	if err == nil || errors.Is(err, offline) || !strings.Contains(err.Error(), "restore") {
		t.Fatalf("run = %v, want a refusal to start", err)
	}
	if _, err := os.Stat(cfg.Renderer.LocalConfigFile); !os.IsNotExist(err) {
		t.Errorf("the local file was created from the agent's own file (%v)", err)
	}
	if got, err := os.ReadFile(cfg.KubeletConfigFile); err != nil || string(got) != owned {
		t.Errorf("the kubelet's file changed: %q, %v", got, err)
	}
}
