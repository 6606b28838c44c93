package noderestrictiondiff

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// shortWrites is what `make test` runs: enough for every resource to be
// seen allowed and refused many times over, in a few seconds.
const shortWrites = 4000

// longEnough is the run length from which every listed divergence must
// have been met: a list entry never met is stale.
const longEnough = 100000

func envUint(t *testing.T, name string, fallback uint64) uint64 {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return fallback
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, v, err)
	}
	return n
}

// tally counts the outcomes per resource.
type tally struct{ allowed, refused, stricter, equivalent int }

// TestDifferential feeds generated node writes to the in-tree
// NodeRestriction plugin and to nodeguard, and fails on every disagreement
// that is not a divergence the contract lists.
func TestDifferential(t *testing.T) {
	writes := envUint(t, "NODEGUARD_DIFF_WRITES", shortWrites)
	seed := envUint(t, "NODEGUARD_DIFF_SEED", rand.Uint64())
	t.Logf("seed %d (NODEGUARD_DIFF_SEED=%d reruns it), %d writes", seed, seed, writes)

	w := newWorld()
	o, err := newOracle(w)
	if err != nil {
		t.Fatal(err)
	}
	ng := newNodeguard(w)
	g := newGenerator(seed, w)
	ctx := context.Background()

	tallies := map[string]*tally{}
	met := map[string]int{}
	failures := 0
	for i := range writes {
		wr := g.next()
		key := wr.resource.Resource + suffix(wr.subresource)
		if tallies[key] == nil {
			tallies[key] = &tally{}
		}
		oracleErr := o.admit(ctx, wr)
		result, err := nodeguardAdmits(ctx, ng, wr)
		if err != nil {
			t.Fatalf("write %d (%s): %v", i, wr, err)
		}
		switch {
		case oracleErr == nil && result.Allowed:
			tallies[key].allowed++
		case oracleErr != nil && !result.Allowed:
			tallies[key].refused++
		case result.Allowed:
			// What the apiserver stores is what the webhook saw: when
			// NodeRestriction allows that too, the change it refused
			// never happens.
			if o.admit(ctx, wr.atTheWebhook()) == nil {
				tallies[key].equivalent++
				met[undone.name]++
				continue
			}
			if d := expectedEquivalent(wr); d != nil {
				tallies[key].equivalent++
				met[d.name]++
				continue
			}
			failures++
			t.Errorf("write %d, %s: nodeguard allows what NodeRestriction refuses (%v)\n%s", i, wr, oracleErr, dump(wr))
		default:
			if d := expectedDivergence(wr, result); d != nil {
				tallies[key].stricter++
				met[d.name]++
				continue
			}
			failures++
			t.Errorf("write %d, %s: nodeguard refuses what NodeRestriction allows, and no listed divergence says why: %s: %s\n%s",
				i, wr, result.Rule, result.Message, dump(wr))
		}
		if failures >= 20 {
			t.Fatalf("stopping after %d failures (seed %d)", failures, seed)
		}
	}

	keys := make([]string, 0, len(tallies))
	for k := range tallies {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var report strings.Builder
	fmt.Fprintf(&report, "%-34s %8s %8s %8s %10s\n", "resource", "allowed", "refused", "stricter", "equivalent")
	for _, k := range keys {
		c := tallies[k]
		fmt.Fprintf(&report, "%-34s %8d %8d %8d %10d\n", k, c.allowed, c.refused, c.stricter, c.equivalent)
		if c.allowed+c.refused == 0 {
			t.Errorf("%s: no write the deciders agreed on", k)
		}
	}
	// A rule only ever seen allowing, or only refusing, would show that
	// the generator misses half of it.
	if writes >= shortWrites {
		for _, k := range twoSided {
			if c := tallies[k]; c == nil || c.allowed == 0 || c.refused == 0 {
				t.Errorf("%s: %+v: the generator does not reach both sides of its rule", k, c)
			}
		}
	}
	for _, d := range append([]divergence{undone}, equivalents...) {
		fmt.Fprintf(&report, "equivalent: %-68s %6d\n", d.name, met[d.name])
		if writes >= longEnough && met[d.name] == 0 {
			t.Errorf("the listed equivalent %q never happened in %d writes: the list is stale, or the generator no longer reaches it", d.name, writes)
		}
	}
	for _, d := range divergences {
		fmt.Fprintf(&report, "stricter: %-70s %6d\n", d.name, met[d.name])
		if writes >= longEnough && met[d.name] == 0 {
			t.Errorf("the listed divergence %q never happened in %d writes: the list is stale, or the generator no longer reaches it", d.name, writes)
		}
	}
	t.Logf("\n%s", report.String())
}

// twoSided are the writes whose rule both allows and refuses; the others
// (pods/binding, a claim itself, ...) are refused, or allowed, outright.
var twoSided = []string{"pods", "pods/status", "pods/eviction", "nodes", "nodes/status", "leases", "csinodes",
	"certificatesigningrequests", "resourceslices", "serviceaccounts/token", "persistentvolumeclaims/status", "podcertificaterequests"}

func dump(wr *nodeWrite) string {
	req, err := wr.request()
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("  object: %s\n  oldObject: %s", req.Object.Raw, req.OldObject.Raw)
}
