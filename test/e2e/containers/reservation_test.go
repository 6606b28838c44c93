package containers_test

import (
	"context"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nodeguard/nodeguard/test/e2e/framework"
)

// TestReservationResizesKubepods: a configuration that reserves memory and
// CPU for the system (systemReserved) is assigned to a real-container node.
// With enforceNodeAllocatable: [pods], the kubelet limits the cgroup every
// pod runs under, kubepods, to what is allocatable: its memory limit drops
// by the reservation, its CPU shares with the reserved CPU, and both agree
// with the allocatable the kubelet reports on its Node.
func TestReservationResizesKubepods(t *testing.T) {
	n := startPool(t, "reserve", 1)[0]
	kubepods, err := n.Kubepods()
	if err != nil {
		t.Fatal(err)
	}
	memBefore, sharesBefore := limits(t, kubepods)
	node, err := env.Admin.CoreV1().Nodes().Get(t.Context(), n.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if capacity := node.Status.Capacity.Memory().Value(); memBefore != capacity {
		t.Errorf("kubepods' memory limit %d before any reservation, want the node's capacity %d", memBefore, capacity)
	}

	cm := configMap(t, "reserve-system", "systemReserved:\n  cpu: 500m\n  memory: 1Gi\n")
	assign(t, n, cm)
	wantMem, wantShares := memBefore-1<<30, sharesBefore-512
	err = framework.Eventually(t.Context(), waitTimeout, "kubepods' limits to shrink by the reservation", func(ctx context.Context) (bool, string, error) {
		mem, shares := limits(t, kubepods)
		node, err := env.Admin.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		alloc := node.Status.Allocatable
		return mem == wantMem && shares == wantShares && alloc.Memory().Value() == mem && alloc.Cpu().MilliValue() == shares*1000/1024,
			fmt.Sprintf("memory.limit_in_bytes %d (want %d), cpu.shares %d (want %d); the Node's allocatable memory %s, cpu %s", mem, wantMem, shares, wantShares, alloc.Memory(), alloc.Cpu()), nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// limits reads kubepods' memory.limit_in_bytes and cpu.shares.
func limits(t *testing.T, kubepods framework.Cgroup) (memory, shares int64) {
	t.Helper()
	memory, err := kubepods.MemoryLimit()
	if err != nil {
		t.Fatal(err)
	}
	if shares, err = kubepods.CPUShares(); err != nil {
		t.Fatal(err)
	}
	return memory, shares
}
