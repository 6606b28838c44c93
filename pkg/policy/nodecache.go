package policy

import (
	"runtime"
	"sync"
	"weak"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/nodeguard/nodeguard/pkg/graph"
)

// nodeValueCache keeps the AST rendering of each NodeInfo the graph hands
// out, so that nodeguard.node does not rebuild a node's labels on every
// call. It relies on NodeInfo being immutable: the graph replaces the whole
// value when a Node changes, so a pointer names one rendering for as long
// as it lives. Entries hold their NodeInfo weakly and go when it is
// collected, so the cache never outgrows the graph. The cached values are
// shared by concurrent evaluations, which only read them.
type nodeValueCache struct {
	entries sync.Map // weak.Pointer[graph.NodeInfo] -> ast.Value
}

func (c *nodeValueCache) value(info *graph.NodeInfo) ast.Value {
	if c == nil {
		return NodeValue(info)
	}
	key := weak.Make(info)
	if v, ok := c.entries.Load(key); ok {
		return v.(ast.Value)
	}
	v, loaded := c.entries.LoadOrStore(key, NodeValue(info))
	if !loaded {
		runtime.AddCleanup(info, func(k weak.Pointer[graph.NodeInfo]) { c.entries.Delete(k) }, key)
	}
	return v.(ast.Value)
}

// len counts the entries, for tests.
func (c *nodeValueCache) len() int {
	n := 0
	c.entries.Range(func(any, any) bool { n++; return true })
	return n
}
