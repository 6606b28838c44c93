package doorkeeper

import "sync/atomic"

// Doorkeeper remembers digests of inputs seen once, direct-mapped: a slot
// holds the last digest that fell into it. A lost or colliding slot only
// delays admission; it never admits an input seen once, except when its
// digest equals the slot's (empty slots hold 0), which callers that compare
// inputs in full survive.
type Doorkeeper struct {
	slots []atomic.Uint64
}

// New returns a Doorkeeper of the given number of slots (at least one),
// 8 bytes each.
func New(slots int) *Doorkeeper {
	return &Doorkeeper{slots: make([]atomic.Uint64, max(slots, 1))}
}

// SeenBefore records sum and reports whether it is a second sighting: sum
// was the last digest recorded in its slot. Safe for concurrent use.
func (d *Doorkeeper) SeenBefore(sum uint64) bool {
	return d.slots[sum%uint64(len(d.slots))].Swap(sum) == sum
}
