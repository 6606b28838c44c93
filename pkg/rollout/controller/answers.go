package controller

import (
	"container/heap"
	"time"
)

// answers are the answered changes still unseen, oldest answer first, so
// that takeTouched drops the ones past the timeout without walking every
// change unseen on each sync: a large wave keeps as many unseen as it has
// Nodes until the watch delivers them, and every sync would otherwise pay
// for all of them.
//
// An entry stays when its Node's change is replaced or dropped before the
// timeout; takeTouched tells it apart by identity (unseen holds another
// change, or none) and discards it.
type answers []answered

type answered struct {
	node   string
	change *unseenChange
}

var _ heap.Interface = (*answers)(nil)

func (a answers) Len() int           { return len(a) }
func (a answers) Less(i, j int) bool { return a[i].change.answered.Before(a[j].change.answered) }
func (a answers) Swap(i, j int)      { a[i], a[j] = a[j], a[i] }
func (a *answers) Push(x any)        { *a = append(*a, x.(answered)) }
func (a *answers) Pop() any {
	old := *a
	last := old[len(old)-1]
	old[len(old)-1] = answered{}
	*a = old[:len(old)-1]
	return last
}

// add records an answered change.
func (a *answers) add(node string, change *unseenChange) {
	heap.Push(a, answered{node: node, change: change})
}

// due pops the answers given at or before cutoff.
func (a *answers) due(cutoff time.Time) []answered {
	var out []answered
	for a.Len() > 0 && !(*a)[0].change.answered.After(cutoff) {
		out = append(out, heap.Pop(a).(answered))
	}
	return out
}
