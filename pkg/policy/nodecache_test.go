package policy

import (
	"runtime"
	"testing"
)

func TestNodeValueCache(t *testing.T) {
	c := &nodeValueCache{}
	a := nodeInfo("node-a", map[string]string{"x": "1"}, "ns/cfg")
	first := c.value(a)
	if again := c.value(a); again != first {
		t.Error("the same NodeInfo was rendered twice")
	}
	if first.Compare(NodeValue(a)) != 0 {
		t.Errorf("cached %s, want %s", first, NodeValue(a))
	}
	// The graph replaces a NodeInfo when the Node changes: the new value
	// gets its own rendering.
	b := nodeInfo("node-a", map[string]string{"x": "2"}, "ns/cfg")
	if c.value(b).Compare(first) == 0 {
		t.Error("a replaced NodeInfo got the old rendering")
	}
	runtime.KeepAlive(a)
	runtime.KeepAlive(b)

	// Entries go with their NodeInfo.
	c = &nodeValueCache{}
	func() {
		for i := range 10 {
			c.value(nodeInfo("node", map[string]string{"i": string(rune('a' + i))}, ""))
		}
	}()
	eventually(t, "the cache to drop collected NodeInfos", func() bool {
		runtime.GC()
		return c.len() == 0
	})
}
