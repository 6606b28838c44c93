package scale

import (
	"errors"
	"fmt"
	"time"
)

// The simulated kubelets' periods under a rollout, unless the run sets
// them (RolloutPeriods).
const (
	// kubeletLeasePeriod is the kubelet's default lease renewal interval
	// (a tenth of nodeLeaseDurationSeconds, 40s) and nodeStatusUpdateFrequency.
	kubeletLeasePeriod = 10 * time.Second
	// kubeletStatusReport is the kubelet's default
	// nodeStatusReportFrequency: a quiet Node patches its status this often.
	kubeletStatusReport = 5 * time.Minute
	// quietAbove is the pool above which the status patches come at
	// kubeletStatusReport rather than every lease period: a status that
	// changes every 10 s on every Node is a worst case the apiserver of
	// this two-core machine, which also serves the rollout, cannot carry
	// past a thousand Nodes.
	quietAbove = 1000
	// maxLeaseRate bounds the fleet's lease renewals per second to a
	// thousand kubelets' at their default: above a thousand Nodes the
	// period grows with the pool, because the apiserver of a two-core
	// machine that also runs etcd, the webhook, the controller and every
	// simulated node cannot carry thousands of Nodes renewing every 10 s
	// beside the rollout.
	maxLeaseRate = 100
)

// RolloutPeriods are the lease renewal and status patch periods of nodes
// simulated kubelets under a rollout when the run does not set them: the
// kubelet's defaults (a lease every 10 s, the status every lease period,
// the worst case) up to a thousand Nodes; above it the status every 5
// minutes, a quiet cluster's, and the lease period stretched so that the
// fleet renews at most maxLeaseRate Leases a second.
func RolloutPeriods(nodes int) (lease, status time.Duration) {
	lease, status = kubeletLeasePeriod, kubeletLeasePeriod
	if nodes > quietAbove {
		status = kubeletStatusReport
	}
	lease = max(lease, time.Second*time.Duration(nodes)/maxLeaseRate)
	return lease, status
}

// describeNodes says what each simulated kubelet and agent does in the run.
func (o RolloutOptions) describeNodes() string {
	lease, status := o.Period, o.fleetOptions().statusPeriod()
	agent := "a named watch of its Node; a named list of the assigned ConfigMap, then its reports through pkg/nodeagent/status's Reporter (the status annotation and the KubeletConfigReady condition in one strategic-merge patch of nodes/status): TrialInProgress, then ConfigActive"
	if o.Drain {
		agent = "a named watch of its Node; a named list of the assigned ConfigMap; the drain: its cordon (spec.unschedulable and nodeguard.dev/cordoned in one merge patch, pkg/nodeagent/drain's Cordon), a named list of its pods, Draining reported for the drain time; its reports through pkg/nodeagent/status's Reporter (TrialInProgress, then, once the cordon is lifted, ConfigActive)"
	}
	return fmt.Sprintf("each registers its Node and Lease, renews the Lease every %s (%.0f renewals/s over the fleet), patches its Node's status every %s (%.1f/s), and keeps one named watch of its Node; beside it a simulated agent with %s; %d named Node watches in all",
		lease, float64(o.Nodes)/lease.Seconds(), status, float64(o.Nodes)/status.Seconds(), agent, 2*o.Nodes)
}

// waveWords says what one wave on the critical path holds.
func (o RolloutOptions) waveWords() string {
	if o.Drain {
		return fmt.Sprintf("the drain time %s + the trial %s", o.DrainTime, o.Trial)
	}
	return "the trial"
}

// DrainOutcomes is an error unless a drain-class rollout went as the
// real agent drains: every Node seen cordoned by its agent and reporting
// Draining, never judged available while cordoned, and every cordon
// lifted by the end.
func DrainOutcomes(o RolloutOptions, r RolloutResult) error {
	d := r.Drain
	if d == nil {
		return errors.New("no drain was observed")
	}
	var errs []error
	if d.Cordoned != o.Nodes || d.Draining != o.Nodes {
		errs = append(errs, fmt.Errorf("%d Nodes seen cordoned by their agent and %d reporting Draining, want all %d", d.Cordoned, d.Draining, o.Nodes))
	}
	if d.Released != o.Nodes || d.StillCordoned != 0 {
		errs = append(errs, fmt.Errorf("%d cordons released and %d Nodes still cordoned, want all %d released", d.Released, d.StillCordoned, o.Nodes))
	}
	if d.CordonedAvailable != 0 {
		errs = append(errs, fmt.Errorf("a cordoned Node was judged available %d times", d.CordonedAvailable))
	}
	return errors.Join(errs...)
}
