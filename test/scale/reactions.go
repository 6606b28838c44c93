package scale

import (
	"slices"
	"time"
)

// reactions pairs each assignment with the oldest Node update seen before
// it and not yet paired, and returns the gaps. Each update frees one slot
// under maxUnavailable and the controller fills it with one assignment, so
// first-in first-out pairing charges every assignment to the update that
// has waited longest: it never understates the reaction. Assignments with
// no update waiting (the canary's, the rest of the first batch after it)
// and updates with nothing left to assign are not reactions.
func reactions(events []nodeEvent) []time.Duration {
	pairs := reactionPairs(events)
	out := make([]time.Duration, len(pairs))
	for i, p := range pairs {
		out[i] = p.assigned.at.Sub(p.updated.at)
	}
	return out
}

// reaction is an update and the assignment paired with it.
type reaction struct{ updated, assigned nodeEvent }

func reactionPairs(events []nodeEvent) []reaction {
	var waiting []nodeEvent
	var out []reaction
	for _, e := range events {
		if e.updated {
			waiting = append(waiting, e)
			continue
		}
		if len(waiting) > 0 {
			out = append(out, reaction{updated: waiting[0], assigned: e})
			waiting = waiting[1:]
		}
	}
	return out
}

// splitReactions divides each reaction at the controller's patch of the
// assigned Node, as the counting proxy timed it: the update seen until the
// patch was sent (the controller's own watch delivery, its queue, its wait
// for its caches and its sync), the patch's round trip, and its answer until
// the harness's watch showed the assignment (which can come first: the
// watch and the answer race). Reactions whose Node has no timed patch are
// left out.
func splitReactions(pairs []reaction, patches map[string]wireTiming) (toSend, write, toWatch []time.Duration) {
	for _, p := range pairs {
		t, ok := patches[p.assigned.node]
		if !ok {
			continue
		}
		toSend = append(toSend, t.Sent.Sub(p.updated.at))
		write = append(write, t.Answered.Sub(t.Sent))
		toWatch = append(toWatch, p.assigned.at.Sub(t.Answered))
	}
	return toSend, write, toWatch
}

// ownShares times the controller's own part of the reactions, on its own
// timeline: each update at the moment the proxy passed its watch event to
// the controller (found by the resourceVersion the harness saw it at),
// each assignment at the moment its patch went out, and each assignment
// paired with the oldest update the controller had been given before it
// and not yet paired. This is the pairing of reactions (reactionPairs)
// with the harness's clock replaced by the controller's: the harness's
// watch and the controller's deliver the same updates in different
// orders and at different delays, and a pairing on the harness's order can
// charge an assignment to an update the controller was given after
// sending it. Paired on the controller's order no patch precedes its
// update, and first-in first-out still charges each assignment to the
// update that waited longest. Each update's delivery is also measured
// against the harness's watch: when the proxy passed it minus when the
// harness's watch showed it (negative when the controller's came first).
// An update the controller was not given is counted unmatched and left
// out, as is an assignment with no timed patch.
func ownShares(events []nodeEvent, patches map[string]wireTiming, given *deliveries) (own, toFirst, vsHarness []time.Duration, found OwnShareMatches) {
	type moment struct {
		at     time.Time
		update bool
		// first is the Node's first patch, when this is the one that
		// applied after a conflict.
		first time.Time
	}
	var timeline []moment
	for _, e := range events {
		if !e.updated {
			if t, ok := patches[e.node]; ok {
				timeline = append(timeline, moment{at: t.Sent, first: t.First})
			}
			continue
		}
		at, m := given.lookup(e.node, e.rv)
		switch m {
		case matchNone:
			found.Unmatched++
			continue
		case matchExact:
			found.Exact++
		case matchLater:
			found.Later++
		}
		vsHarness = append(vsHarness, at.Sub(e.at))
		timeline = append(timeline, moment{at: at, update: true})
	}
	// An update given at the very moment a patch went out is taken to
	// precede it.
	slices.SortStableFunc(timeline, func(a, b moment) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		switch {
		case a.update == b.update:
			return 0
		case a.update:
			return -1
		}
		return 1
	})
	var waiting []time.Time
	for _, m := range timeline {
		if m.update {
			waiting = append(waiting, m.at)
			continue
		}
		if len(waiting) > 0 {
			own = append(own, m.at.Sub(waiting[0]))
			first := m.first
			if first.IsZero() {
				first = m.at
			}
			toFirst = append(toFirst, first.Sub(waiting[0]))
			waiting = waiting[1:]
		}
	}
	return own, toFirst, vsHarness, found
}

// OwnShareMatches counts how the controller's delivery of each reaction's
// update was found: the same resourceVersion, the first later one it was
// given, or none.
type OwnShareMatches struct {
	Exact     int `json:"exact_rv"`
	Later     int `json:"later_rv"`
	Unmatched int `json:"unmatched"`
}

// ReactionSplit is where the reactions' time went: each part over all
// reactions, and the mean of each part over the slowest 1%.
type ReactionSplit struct {
	ToSend  OpStats `json:"update_seen_to_patch_sent"`
	Write   OpStats `json:"patch_round_trip"`
	ToWatch OpStats `json:"patch_answered_to_seen"`
	// SlowestMs are the parts' means over the reactions at or above the
	// p99, in the order above.
	SlowestMs [3]float64 `json:"slowest_1pct_mean_ms"`
	// ControllerOwn is the controller's own share (ownShares): its watch
	// delivered the update until its patch was on the wire, paired on the
	// controller's own timeline.
	ControllerOwn OpStats `json:"controller_own_share"`
	// ControllerToFirst is the same to the controller's first patch of
	// the Node: apart from it, the own share holds the round trips of the
	// patches whose Node moved in what the decision read (or, where a
	// patch carries the Node's resourceVersion, met any write) and were
	// sent again.
	ControllerToFirst OpStats `json:"controller_own_share_to_first_patch"`
	// DeliveryVsHarness is the controller's watch delivery of the update
	// minus the harness's; it can be negative.
	DeliveryVsHarness OpStats         `json:"controller_watch_vs_harness"`
	OwnMatches        OwnShareMatches `json:"controller_own_share_matches"`
}

func newReactionSplit(events []nodeEvent, patches map[string]wireTiming, given *deliveries) ReactionSplit {
	toSend, write, toWatch := splitReactions(reactionPairs(events), patches)
	var split ReactionSplit
	own, toFirst, vsHarness, found := ownShares(events, patches, given)
	split.ControllerOwn, split.ControllerToFirst = latencyStats(own), latencyStats(toFirst)
	split.DeliveryVsHarness, split.OwnMatches = latencyStats(vsHarness), found
	if len(toSend) > 0 {
		total := make([]time.Duration, len(toSend))
		for i := range toSend {
			total[i] = toSend[i] + write[i] + toWatch[i]
		}
		p99 := quantile(slices.Sorted(slices.Values(total)), 0.99)
		var sums [3]time.Duration
		n := 0
		for i, d := range total {
			if d >= p99 {
				sums[0], sums[1], sums[2] = sums[0]+toSend[i], sums[1]+write[i], sums[2]+toWatch[i]
				n++
			}
		}
		for i := range sums {
			split.SlowestMs[i] = ms(sums[i] / time.Duration(n))
		}
	}
	split.ToSend, split.Write, split.ToWatch = latencyStats(toSend), latencyStats(write), latencyStats(toWatch)
	return split
}
