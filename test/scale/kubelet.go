package scale

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	coreclient "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/nodeguard/nodeguard/test/controlplane"
)

const (
	leaseNamespace = "kube-node-lease"
	// leaseDuration is the kubelet's default nodeLeaseDurationSeconds.
	leaseDuration = 40
	// retryPause spaces a watch's restarts and a config read's retries.
	retryPause = time.Second
	// requestTimeout bounds one write, as the kubelet's heartbeat client does
	// with its own timeout, so that a stuck request is an error, not a hang.
	requestTimeout = 10 * time.Second
)

// conditionTypes are the conditions the simulated kubelet reports, in the
// order a real one keeps them.
var conditionTypes = []corev1.NodeConditionType{
	corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure, corev1.NodeReady,
}

// kubelet is one simulated node.
type kubelet struct {
	name  string
	index int
	http  *http.Client
	core  coreclient.CoreV1Interface
	coord coordinationclient.CoordinationV1Interface
	rec   *recorder
	// config is the ConfigMap assigned to the node, if any.
	config *types.NamespacedName

	lease  *coordinationv1.Lease
	nodeRV string
	// watchingConfig is set once the config's watch has started.
	watchingConfig atomic.Bool
}

// newKubelet makes the node's clients: one HTTP client, so one HTTP/2
// connection, for everything it sends. A Dial of its own keeps client-go
// from caching the transport for the life of the process (its cache is
// keyed on the TLS config; across modes that would hold thousands).
func newKubelet(cp *controlplane.ControlPlane, name string, index int, rec *recorder) (*kubelet, error) {
	cfg, err := cp.NodeConfig(name)
	if err != nil {
		return nil, err
	}
	dialer := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	cfg.Dial = dialer.DialContext
	// Heartbeats are never throttled by the kubelet's own limiter in
	// practice; keep client-go's out of the measurement.
	cfg.QPS, cfg.Burst = -1, 0
	cfg.RateLimiter = nil
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, fmt.Errorf("node %s: HTTP client: %w", name, err)
	}
	core, err := coreclient.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("node %s: client: %w", name, err)
	}
	coord, err := coordinationclient.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, fmt.Errorf("node %s: client: %w", name, err)
	}
	return &kubelet{name: name, index: index, http: httpClient, core: core, coord: coord, rec: rec}, nil
}

// register creates the Node and its Lease, as the kubelet does at start.
func (k *kubelet) register(ctx context.Context) error {
	now := metav1.Now()
	resources := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("2"),
		corev1.ResourceMemory: resource.MustParse("8Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: k.name, Labels: map[string]string{
			"kubernetes.io/hostname": k.name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
		}},
		Status: corev1.NodeStatus{
			Capacity: resources, Allocatable: resources,
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("10.%d.%d.%d", 1+k.index>>16&0xff, k.index>>8&0xff, k.index&0xff)},
				{Type: corev1.NodeHostName, Address: k.name},
			},
			NodeInfo: corev1.NodeSystemInfo{
				KubeletVersion: controlplane.KubernetesVersion, OperatingSystem: "linux", Architecture: "amd64",
				ContainerRuntimeVersion: "fake://0.1.0", OSImage: "nodeguard scale harness",
			},
		},
	}
	for _, t := range conditionTypes {
		status, reason := corev1.ConditionFalse, "KubeletHasSufficient"+string(t)
		if t == corev1.NodeReady {
			status, reason = corev1.ConditionTrue, "KubeletReady"
		}
		node.Status.Conditions = append(node.Status.Conditions, corev1.NodeCondition{
			Type: t, Status: status, Reason: reason, LastHeartbeatTime: now, LastTransitionTime: now,
		})
	}
	created, err := k.core.Nodes().Create(ctx, node, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("node %s: registering: %w", k.name, err)
	}
	k.nodeRV = created.ResourceVersion
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: k.name, Namespace: leaseNamespace, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "v1", Kind: "Node", Name: k.name, UID: created.UID,
		}}},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity: ptr.To(k.name), LeaseDurationSeconds: ptr.To[int32](leaseDuration),
			RenewTime: ptr.To(metav1.NewMicroTime(time.Now())),
		},
	}
	if k.lease, err = k.coord.Leases(leaseNamespace).Create(ctx, lease, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("node %s: creating its lease: %w", k.name, err)
	}
	return nil
}

// every runs f at offset into the period and then once per period until
// ctx ends. A call that outlasts the period delays the next, as the
// kubelet's wait.Until does.
func every(ctx context.Context, offset, period time.Duration, f func(context.Context)) {
	timer := time.NewTimer(offset)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		start := time.Now()
		f(ctx)
		timer.Reset(max(period-time.Since(start), 0))
	}
}

// renewLease updates the Lease's renewTime from the last Lease written,
// re-reading it on a conflict, as the kubelet's lease controller does.
func (k *kubelet) renewLease(ctx context.Context) {
	start := time.Now()
	err := k.tryRenew(ctx)
	if apierrors.IsConflict(err) {
		var fresh *coordinationv1.Lease
		if fresh, err = k.coord.Leases(leaseNamespace).Get(ctx, k.name, metav1.GetOptions{}); err == nil {
			k.lease = fresh
			err = k.tryRenew(ctx)
		}
	}
	k.observe(ctx, OpLease, start, err)
}

func (k *kubelet) tryRenew(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	lease := k.lease.DeepCopy()
	lease.Spec.RenewTime = ptr.To(metav1.NewMicroTime(time.Now()))
	updated, err := k.coord.Leases(leaseNamespace).Update(ctx, lease, metav1.UpdateOptions{})
	if err == nil {
		k.lease = updated
	}
	return err
}

// patchStatus sends the kubelet's heartbeat: a strategic-merge patch of the
// conditions' heartbeat times, keyed by type, with their order.
func (k *kubelet) patchStatus(ctx context.Context) {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	_, err := k.core.Nodes().Patch(ctx, k.name, types.StrategicMergePatchType, heartbeatPatch(start), metav1.PatchOptions{}, "status")
	k.observe(ctx, OpStatus, start, err)
}

func heartbeatPatch(now time.Time) []byte {
	stamp := now.UTC().Format(time.RFC3339)
	order, conditions := "", ""
	for i, t := range conditionTypes {
		sep := ","
		if i == 0 {
			sep = ""
		}
		order += fmt.Sprintf(`%s{"type":%q}`, sep, t)
		conditions += fmt.Sprintf(`%s{"lastHeartbeatTime":%q,"type":%q}`, sep, stamp, t)
	}
	return []byte(`{"status":{"$setElementOrder/conditions":[` + order + `],"conditions":[` + conditions + `]}}`)
}

// observe records an operation unless it ended because the run is over.
func (k *kubelet) observe(ctx context.Context, op string, start time.Time, err error) {
	if err != nil && errors.Is(ctx.Err(), context.Canceled) {
		return
	}
	k.rec.observe(op, start, time.Since(start), err)
}
