package framework

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/nodeguard/nodeguard/pkg/contract"
)

// KubeletConfigHeader starts every KubeletConfiguration the helpers write.
const KubeletConfigHeader = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"

// CrashingKubelet returns a line that, added to a kubelet configuration,
// makes a real kubelet exit at start-up after passing validation: it
// reserves CPUs this machine does not have. Admission lets it through, as
// it must: nothing in the configuration alone says it is wrong.
func CrashingKubelet() string {
	return fmt.Sprintf("reservedSystemCPUs: \"0-%d\"\n", runtime.NumCPU()+7)
}

// Lines that, added to a kubelet configuration, make the stub kubelet
// misbehave once it runs it (see test/kubeletstub): no real field makes a
// healthy kubelet hang or fail its health checks on demand.
const (
	// StubCrashingKubelet never serves /healthz: a crash loop.
	StubCrashingKubelet = "staticPodURL: http://kubeletstub.invalid/crash\n"
	// HangingKubelet accepts connections and never answers.
	HangingKubelet = "staticPodURL: http://kubeletstub.invalid/hang\n"
	// UnhealthyKubelet answers /healthz with 500.
	UnhealthyKubelet = "staticPodURL: http://kubeletstub.invalid/unhealthy\n"
)

// PutKubeletConfigMap creates, or replaces the data of, an eligible
// ConfigMap holding KubeletConfigHeader followed by config, and returns it
// as stored.
func PutKubeletConfigMap(ctx context.Context, client kubernetes.Interface, namespace, name, config string) (*corev1.ConfigMap, error) {
	data := map[string]string{contract.ConfigMapKey: KubeletConfigHeader + config}
	cms := client.CoreV1().ConfigMaps(namespace)
	existing, err := cms.Get(ctx, name, metav1.GetOptions{})
	switch {
	case err == nil:
		existing.Data = data
		stored, err := cms.Update(ctx, existing, metav1.UpdateOptions{})
		if err != nil {
			return nil, fmt.Errorf("updating ConfigMap %s/%s: %w", namespace, name, err)
		}
		return stored, nil
	case !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("reading ConfigMap %s/%s: %w", namespace, name, err)
	}
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name,
			Labels: map[string]string{contract.EligibleLabel: contract.EligibleLabelValue}},
		Data: data,
	}
	stored, err := cms.Create(ctx, cm, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("creating ConfigMap %s/%s: %w", namespace, name, err)
	}
	return stored, nil
}

// Assign sets the Node's assignment, as an administrator, to source
// ("NAMESPACE/NAME"); "" removes it.
func (n *Node) Assign(ctx context.Context, source string) error {
	var value any
	if source != "" {
		value = source
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]any{contract.ConfigSourceAnnotation: value}}})
	if err != nil {
		return err
	}
	if _, err := n.env.Admin.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("assigning %q to node %s: %w", source, n.Name, err)
	}
	return nil
}

// Report is what the agent reported on its Node: the status annotation and
// the KubeletConfigReady condition (nil until reported).
type Report struct {
	Status    contract.ConfigStatus
	Condition *corev1.NodeCondition
}

func (r Report) String() string {
	data, _ := json.Marshal(r.Status)
	if r.Condition == nil {
		return string(data) + " (no condition)"
	}
	return fmt.Sprintf("%s %s/%s: %s", data, r.Condition.Status, r.Condition.Reason, r.Condition.Message)
}

// ConditionIs reports whether the condition has the given status and reason.
func (r Report) ConditionIs(status corev1.ConditionStatus, reason string) bool {
	return r.Condition != nil && r.Condition.Status == status && r.Condition.Reason == reason
}

// RefersTo reports whether ref pins cm's stored version; a nil cm stands for
// the local configuration, which the status writes as a nil ref.
func RefersTo(ref *contract.ConfigMapVersion, cm *corev1.ConfigMap) bool {
	if cm == nil {
		return ref == nil
	}
	return ref != nil && ref.UID == string(cm.UID) && ref.ResourceVersion == cm.ResourceVersion
}

// Report reads what the agent last reported. A status annotation that does
// not parse reads as an empty status.
func (n *Node) Report(ctx context.Context) (Report, error) {
	node, err := n.env.Admin.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
	if err != nil {
		return Report{}, fmt.Errorf("reading node %s: %w", n.Name, err)
	}
	var r Report
	_ = json.Unmarshal([]byte(node.Annotations[contract.ConfigStatusAnnotation]), &r.Status)
	for i := range node.Status.Conditions {
		if node.Status.Conditions[i].Type == contract.ConditionKubeletConfigReady {
			r.Condition = &node.Status.Conditions[i]
		}
	}
	return r, nil
}

// WaitReport waits until the agent's report satisfies want, and returns it.
// It gives up early when the agent has exited.
func (n *Node) WaitReport(ctx context.Context, timeout time.Duration, what string, want func(Report) bool) (Report, error) {
	var last Report
	err := Eventually(ctx, timeout, what, func(ctx context.Context) (bool, string, error) {
		if n.agentExited() {
			return false, "", fmt.Errorf("the agent of %s exited; log:\n%s", n.Name, n.AgentLogTail(40))
		}
		r, err := n.Report(ctx)
		if err != nil {
			// The apiserver may be away on purpose (an outage test).
			return false, err.Error(), nil
		}
		last = r
		return want(r), r.String(), nil
	})
	return last, err
}

// What a kubelet start became, in KubeletRestart.Behavior for a real
// kubelet. The stub's are what its configuration made it do: healthy,
// crash, hang, unhealthy or crashloop.
const (
	// KubeletRunning: this run has not ended.
	KubeletRunning = "running"
	// KubeletStopped: a stop or restart ended it.
	KubeletStopped = "stopped"
	// KubeletCrashed: it exited on its own (and Restart=always started
	// the kubelet again).
	KubeletCrashed = "crashed"
)

// KubeletRestart is one (re)start of the kubelet, from its unit's journal
// (or the stub's restart log).
type KubeletRestart struct {
	// Time is when the kubelet was started (the stub: when its restart
	// signal arrived).
	Time time.Time `json:"time"`
	// Asked, for a real kubelet started by a command (the agent's
	// restart), is when the command reached its unit: before the old
	// kubelet was stopped. Zero otherwise.
	Asked time.Time `json:"asked,omitzero"`
	// SHA256 is the hash of the configuration file it started with.
	SHA256 string `json:"sha256"`
	// Behavior is what became of the run (KubeletRunning and friends), or
	// what the stub's file made it do.
	Behavior string `json:"behavior"`
	// Cause, for a real kubelet, is why it started: "start", "restart"
	// (the agent's command, or an administrator's) or "auto-restart"
	// (Restart=always after it exited).
	Cause string `json:"cause,omitempty"`
	// ExitCode, for a real kubelet's run that ended, is its exit status.
	ExitCode int `json:"exitCode,omitempty"`
	// PID is a real kubelet's process ID (and process group).
	PID int `json:"pid,omitempty"`
}

// KubeletRestarts returns every start of the kubelet, oldest first.
func (n *Node) KubeletRestarts() ([]KubeletRestart, error) {
	restarts, err := n.kubelet.restarts()
	if err != nil {
		return nil, fmt.Errorf("node %s: %w", n.Name, err)
	}
	return restarts, nil
}

// KubeletConfig returns the kubelet's configuration file as it is now.
func (n *Node) KubeletConfig() (string, error) {
	data, err := os.ReadFile(n.KubeletConfigFile)
	if err != nil {
		return "", fmt.Errorf("node %s: %w", n.Name, err)
	}
	return string(data), nil
}

// AgentGet sends a GET for path to the agent's own HTTP server.
func (n *Node) AgentGet(path string) (int, string, error) {
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(fmt.Sprintf("http://127.0.0.1:%d%s", n.AgentPort, path))
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// Metric returns the value of the agent's first metric sample line that
// starts with prefix, and whether there was one.
func (n *Node) Metric(prefix string) (float64, bool, error) {
	_, body, err := n.AgentGet("/metrics")
	if err != nil {
		return 0, false, fmt.Errorf("node %s: scraping the agent: %w", n.Name, err)
	}
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, prefix) {
			fields := strings.Fields(line)
			v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
			return v, err == nil, nil
		}
	}
	return 0, false, nil
}
