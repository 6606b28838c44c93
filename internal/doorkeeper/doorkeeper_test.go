package doorkeeper

import (
	"sync"
	"testing"
)

func TestSeenBefore(t *testing.T) {
	d := New(4)
	if d.SeenBefore(7) {
		t.Fatal("first sighting of 7 admitted")
	}
	if !d.SeenBefore(7) {
		t.Fatal("second sighting of 7 not admitted")
	}
	// 11 shares 7's slot (11 % 4 == 7 % 4) and pushes it out: 7 waits for
	// another second sighting.
	if d.SeenBefore(11) {
		t.Fatal("first sighting of 11 admitted")
	}
	if d.SeenBefore(7) {
		t.Fatal("7 admitted after its slot was taken")
	}
	if !d.SeenBefore(7) {
		t.Fatal("7 not admitted on its next sighting")
	}
	// Digests in other slots do not disturb each other. (0 is left out:
	// empty slots hold it, so it passes at once, which callers comparing
	// inputs in full survive.)
	for _, sum := range []uint64{4, 1, 2} {
		if d.SeenBefore(sum) || !d.SeenBefore(sum) {
			t.Fatalf("digest %d not admitted on exactly its second sighting", sum)
		}
	}
}

func TestNewHasAtLeastOneSlot(t *testing.T) {
	d := New(0)
	if d.SeenBefore(3) || !d.SeenBefore(3) {
		t.Fatal("a doorkeeper of no slots must still work with one")
	}
}

// TestConcurrentUse is for the race detector: callers share a doorkeeper.
func TestConcurrentUse(t *testing.T) {
	d := New(64)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 1000 {
				d.SeenBefore(uint64(w*1000 + i))
			}
		})
	}
	wg.Wait()
}
