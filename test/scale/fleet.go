package scale

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/nodeguard/nodeguard/pkg/contract"
)

const (
	// registerParallelism bounds concurrent registrations: a thousand
	// kubelets coming up at the same instant is not the steady state
	// measured here.
	registerParallelism = 16
	configNamespace     = "kubelet-configs"
	configName          = "scale-kubelet-config"
	// configDeadline bounds waiting for the graph to let the assigned
	// nodes read their config (graph sync, plus client-go's backoff between
	// refused lists).
	configDeadline = 60 * time.Second
	// The contract's names (docs/reference.md, "Objects and keys").
	eligibleLabel    = "nodeguard.dev/kubelet-config"
	assignAnnotation = "nodeguard.dev/config-source"
	configKey        = "kubelet"
	kubeletConfig    = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nmaxPods: 110\n"
)

// fleet is the simulated kubelets of one cluster, running until stop.
type fleet struct {
	kubelets []*kubelet
	readers  int
	// runCtx ends the kubelets' loops; cancel ends it.
	runCtx context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func nodeName(i int) string { return fmt.Sprintf("scale-node-%04d", i) }

// assigned spreads the config readers evenly over the indices.
func assigned(i int, fraction float64) bool {
	return int(float64(i+1)*fraction) > int(float64(i)*fraction)
}

// startFleet registers the kubelets, assigns the config (with nodeguard
// installed), and starts every kubelet's loops. On error nothing is left
// running.
func startFleet(ctx context.Context, c *cluster, o Options, rec *recorder) (*fleet, error) {
	f := &fleet{}
	for i := range o.Nodes {
		k, err := newKubelet(c.cp, nodeName(i), i, rec)
		if err != nil {
			return nil, err
		}
		f.kubelets = append(f.kubelets, k)
	}
	if err := f.registerAll(ctx); err != nil {
		f.closeConnections()
		return nil, err
	}
	if c.env != nil && o.ConfigFraction > 0 {
		if err := f.assign(ctx, c.admin, o.ConfigFraction); err != nil {
			f.closeConnections()
			return nil, err
		}
	}
	runCtx, cancel := context.WithCancel(context.Background())
	f.runCtx, f.cancel = runCtx, cancel
	statusPeriod := o.statusPeriod()
	for i, k := range f.kubelets {
		leaseAt := o.Period * time.Duration(i) / time.Duration(o.Nodes)
		statusAt := (statusPeriod*time.Duration(i)/time.Duration(o.Nodes) + statusPeriod/2) % statusPeriod
		f.goRun(func() { every(runCtx, leaseAt, o.Period, k.renewLease) })
		f.goRun(func() { every(runCtx, statusAt, statusPeriod, k.patchStatus) })
		f.goRun(func() { k.watchOwnNode(runCtx) })
		if k.config != nil {
			f.goRun(func() { k.readConfig(runCtx) })
		}
	}
	if f.readers > 0 {
		if err := f.waitConfigRead(ctx); err != nil {
			f.stop()
			return nil, err
		}
	}
	return f, nil
}

func (f *fleet) goRun(fn func()) {
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		fn()
	}()
}

func (f *fleet) registerAll(ctx context.Context) error {
	return f.each(ctx, func(k *kubelet) error { return k.register(ctx) })
}

// each calls fn for every kubelet, registerParallelism at a time, and
// joins the errors.
func (f *fleet) each(ctx context.Context, fn func(*kubelet) error) error {
	sem := make(chan struct{}, registerParallelism)
	errs := make([]error, len(f.kubelets))
	var wg sync.WaitGroup
	for i, k := range f.kubelets {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			wg.Wait()
			return ctx.Err()
		}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			errs[i] = fn(k)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// assign creates the eligible ConfigMap and points a fraction of the
// nodes at it, as an administrator would.
func (f *fleet) assign(ctx context.Context, admin kubernetes.Interface, fraction float64) error {
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: configName, Namespace: configNamespace, Labels: map[string]string{eligibleLabel: "true"}},
		Data:       map[string]string{configKey: kubeletConfig},
	}
	if _, err := admin.CoreV1().ConfigMaps(configNamespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the kubelet configuration: %w", err)
	}
	patch := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:%q}}}`, assignAnnotation, configNamespace+"/"+configName)
	for i, k := range f.kubelets {
		if !assigned(i, fraction) {
			continue
		}
		if _, err := admin.CoreV1().Nodes().Patch(ctx, k.name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("assigning the configuration to %s: %w", k.name, err)
		}
		k.config = &types.NamespacedName{Namespace: configNamespace, Name: configName}
		f.readers++
	}
	return nil
}

// pool puts every node in the pool name (contract.PoolLabel), as an
// administrator does: a label no node may write itself, which is what a
// rollout must select on.
func (f *fleet) pool(ctx context.Context, admin kubernetes.Interface, name string) error {
	patch := fmt.Appendf(nil, `{"metadata":{"labels":{%q:%q}}}`, contract.PoolLabel, name)
	return f.each(ctx, func(k *kubelet) error {
		if _, err := admin.CoreV1().Nodes().Patch(ctx, k.name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("putting %s in pool %s: %w", k.name, name, err)
		}
		return nil
	})
}

// waitConfigRead waits until every config reader has its watch open, so
// that the warm-up starts from the steady state.
func (f *fleet) waitConfigRead(ctx context.Context) error {
	deadline := time.Now().Add(configDeadline)
	for {
		n := 0
		for _, k := range f.kubelets {
			if k.config != nil && k.watchingConfig.Load() {
				n++
			}
		}
		if n == f.readers {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %s only %d of %d assigned nodes could read their configuration", configDeadline, n, f.readers)
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
}

// unassigned returns a kubelet without a configuration, or nil.
func (f *fleet) unassigned() *kubelet {
	for _, k := range f.kubelets {
		if k.config == nil {
			return k
		}
	}
	return nil
}

// stop ends every kubelet's loops and closes their connections.
func (f *fleet) stop() {
	if f.cancel != nil {
		f.cancel()
	}
	f.wg.Wait()
	f.closeConnections()
}

func (f *fleet) closeConnections() {
	for _, k := range f.kubelets {
		k.http.CloseIdleConnections()
	}
}
