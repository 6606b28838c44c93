package disruption

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
)

// reservationField is kubeReserved or systemReserved.
type reservationField struct {
	name string
	// raw is the map as written, effective as the kubelet uses it (after
	// reservedSystemCPUs has replaced the cpu entries).
	raw, effective func(*view) map[string]string
}

var reservationFields = []reservationField{
	{
		name:      "kubeReserved",
		raw:       func(v *view) map[string]string { return v.raw.KubeReserved },
		effective: func(v *view) map[string]string { return v.kubeReserved },
	},
	{
		name:      "systemReserved",
		raw:       func(v *view) map[string]string { return v.raw.SystemReserved },
		effective: func(v *view) map[string]string { return v.systemReserved },
	},
}

// reservationsRule: allocatable is capacity minus kubeReserved,
// systemReserved and the hard eviction thresholds, resource by resource
// (GetNodeAllocatableReservation in pkg/kubelet/cm). The kubelet admits the
// pods it finds at start-up again against the new allocatable and rejects
// those that no longer fit, so a larger reservation needs the node drained.
// The two maps are added up as the kubelet does: moving a reservation from
// one to the other is not growth. Every resource counts, pid included
// (it lowers the pods' cgroup pids limit, which running pods can hit).
// A value that does not parse and changed counts as growth.
func reservationsRule(c *change) {
	from, to := c.from, c.to
	resources := map[string]struct{}{}
	for _, field := range reservationFields {
		for name := range field.effective(from) {
			resources[name] = struct{}{}
		}
		for name := range field.effective(to) {
			resources[name] = struct{}{}
		}
	}
	clauses := map[string]map[string]string{} // field -> resource -> clause
	addClause := func(field, name, clause string) {
		if clauses[field] == nil {
			clauses[field] = map[string]string{}
		}
		clauses[field][name] = clause
	}
	for _, name := range slices.Sorted(maps.Keys(resources)) {
		before, beforeOK := sumQuantities(from.kubeReserved[name], from.systemReserved[name])
		after, afterOK := sumQuantities(to.kubeReserved[name], to.systemReserved[name])
		grows := after.Cmp(before) > 0
		if !beforeOK || !afterOK {
			grows = from.kubeReserved[name] != to.kubeReserved[name] || from.systemReserved[name] != to.systemReserved[name]
		}
		if !grows {
			continue
		}
		for _, field := range reservationFields {
			was, is := field.raw(from)[name], field.raw(to)[name]
			if !sameQuantity(was, is) {
				addClause(field.name, name, fmt.Sprintf("%s %s -> %s", name, showValue(was), showValue(is)))
			}
		}
		if name == cpuResource && !from.reservedCPUs.equal(to.reservedCPUs) {
			c.drain("reservedSystemCPUs", fmt.Sprintf("%s -> %s", from.reservedCPUs, to.reservedCPUs), shrinks)
		}
	}
	for field, byResource := range clauses {
		c.drain(field, joinSorted(byResource), shrinks)
	}
}

// allocatableSignals are the hard eviction signals the kubelet takes off
// allocatable (hardEvictionReservation in pkg/kubelet/cm/helpers.go):
// memory.available off memory, nodefs.available off ephemeral-storage. The
// other signals (imagefs, inodes, pids) only trigger evictions under
// pressure, which the trial watches.
var allocatableSignals = []string{"memory.available", "nodefs.available"}

// evictionHardRule: a larger hard eviction threshold on a signal that
// counts in allocatable lowers allocatable, as a larger reservation does.
// What counts is evictionHard as the kubelet resolves it, so
// mergeDefaultEvictionSettings can cause the growth too; the reason goes to
// whichever of the two changed.
func evictionHardRule(c *change) {
	from, to := c.from, c.to
	bySignal := map[string]string{}
	for _, signal := range allocatableSignals {
		was, is := from.evictionHard[signal], to.evictionHard[signal]
		if thresholdGrows(was, is) {
			bySignal[signal] = fmt.Sprintf("%s %s -> %s", signal, showValue(was), showValue(is))
		}
	}
	if len(bySignal) == 0 {
		return
	}
	thresholds := joinSorted(bySignal)
	rawFrom, rawTo := from.raw.EvictionHard, to.raw.EvictionHard
	// nil and empty differ here: unset means the defaults, empty means none.
	if (rawFrom == nil) != (rawTo == nil) || !maps.Equal(rawFrom, rawTo) {
		c.drain("evictionHard", thresholds, shrinks)
	}
	if from.mergeEviction != to.mergeEviction {
		c.drain("mergeDefaultEvictionSettings", fmt.Sprintf("%t -> %t", from.mergeEviction, to.mergeEviction), shrinks+" ("+thresholds+")")
	}
}

// threshold is a hard eviction threshold as the kubelet parses it
// (parseThresholdStatement in pkg/kubelet/eviction/helpers.go).
type threshold struct {
	none       bool // unset, "0%" or "100%": no threshold
	percentage float64
	quantity   *resource.Quantity
	ok         bool
}

func parseThreshold(value string) threshold {
	value = strings.TrimSpace(value)
	if value == "" || value == "0%" || value == "100%" {
		return threshold{none: true, ok: true}
	}
	if number, isPercentage := strings.CutSuffix(value, "%"); isPercentage {
		percentage, err := strconv.ParseFloat(number, 64)
		return threshold{percentage: percentage, ok: err == nil && percentage >= 0 && percentage <= 100}
	}
	q, err := resource.ParseQuantity(value)
	return threshold{quantity: &q, ok: err == nil}
}

// thresholdGrows reports whether a threshold holds back more than before. A
// percentage and a quantity cannot be ordered without the node's capacity,
// so a change from one to the other counts as growth, as does a change to
// or from a value that does not parse.
func thresholdGrows(was, is string) bool {
	if strings.TrimSpace(was) == strings.TrimSpace(is) {
		return false
	}
	before, after := parseThreshold(was), parseThreshold(is)
	switch {
	case !before.ok || !after.ok:
		return true
	case after.none:
		return false
	case before.none:
		return true
	case before.quantity != nil && after.quantity != nil:
		return after.quantity.Cmp(*before.quantity) > 0
	case before.quantity == nil && after.quantity == nil:
		return after.percentage > before.percentage
	default:
		return true
	}
}

// sameQuantity reports whether two reservations are the same amount ("1Gi"
// and "1024Mi" are); values that do not parse are compared as written.
func sameQuantity(a, b string) bool {
	if a == b {
		return true
	}
	qa, errA := resource.ParseQuantity(strings.TrimSpace(orDefault(a, "0")))
	qb, errB := resource.ParseQuantity(strings.TrimSpace(orDefault(b, "0")))
	return errA == nil && errB == nil && qa.Cmp(qb) == 0
}
