package policy

import (
	"fmt"
	"slices"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/types"

	"github.com/nodeguard/nodeguard/pkg/graph"
)

// GraphReader is what the built-in functions read. *graph.Graph satisfies
// it. Implementations must be safe for concurrent use and must not block.
type GraphReader interface {
	CanReadConfigMap(node, namespace, name string) bool
	Node(name string) (*graph.NodeInfo, bool)
}

// Names of the built-in functions policies can call.
const (
	BuiltinReachable = "nodeguard.reachable"
	BuiltinNode      = "nodeguard.node"
)

// KindConfigMap is the only kind nodeguard.reachable answers for today.
const KindConfigMap = "configmap"

// deniedBuiltins are left out of the capabilities policies compile against.
// Policies run inside the apiserver's admission and authorization path, where
// a network call would add its latency, and its outages, to every request.
var deniedBuiltins = []string{"http.send", "net.lookup_ip_addr"}

var nodeObjectType = types.NewObject([]*types.StaticProperty{
	types.NewStaticProperty("name", types.S),
	types.NewStaticProperty("labels", types.NewObject(nil, types.NewDynamicProperty(types.S, types.S))),
	types.NewStaticProperty("kubeletVersion", types.S),
	types.NewStaticProperty("assignment", types.NewAny(types.S, types.Nl)),
}, nil)

// The results are memoised for the length of one evaluation (Memoize),
// so a policy that calls a function twice sees one answer even if the graph
// changes in between; they are non-deterministic across evaluations, which
// keeps them out of partial evaluation and marks them for decision logs.
var (
	reachableDecl = &rego.Function{
		Name: BuiltinReachable,
		Description: `Reports whether the graph has a path from an object to a node: ` +
			`nodeguard.reachable(node, "configmap", namespace, name). Only "configmap" is supported.`,
		Decl: types.NewFunction(
			types.Args(
				types.Named("node", types.S).Description("node name"),
				types.Named("kind", types.S).Description(`object kind, "configmap"`),
				types.Named("namespace", types.S).Description("object namespace"),
				types.Named("name", types.S).Description("object name"),
			),
			types.Named("result", types.B).Description("true when a path leads from the object to the node"),
		),
		Nondeterministic: true,
		Memoize:          true,
	}
	nodeDecl = &rego.Function{
		Name: BuiltinNode,
		Description: `Returns what the graph knows of a Node: {"name", "labels", "kubeletVersion", ` +
			`"assignment"} with assignment "namespace/name" or null; undefined for an unknown node.`,
		Decl: types.NewFunction(
			types.Args(types.Named("name", types.S).Description("node name")),
			types.Named("node", nodeObjectType).Description("the node, as the graph knows it"),
		),
		Nondeterministic: true,
		Memoize:          true,
	}
)

// builtinDecls returns the declarations of the custom built-ins, as the
// compiler and capabilities files take them.
func builtinDecls() []*ast.Builtin {
	decls := make([]*ast.Builtin, 0, 2)
	for _, f := range []*rego.Function{reachableDecl, nodeDecl} {
		decls = append(decls, &ast.Builtin{
			Name:             f.Name,
			Description:      f.Description,
			Decl:             f.Decl,
			Nondeterministic: f.Nondeterministic,
		})
	}
	return decls
}

// Capabilities returns what policies may use: this OPA version's built-ins
// without the network ones, plus nodeguard's. policies/capabilities.json is
// this, for `opa test --capabilities` (see WriteCapabilities).
func Capabilities() *ast.Capabilities {
	caps := ast.CapabilitiesForThisVersion()
	caps.Builtins = slices.DeleteFunc(caps.Builtins, func(b *ast.Builtin) bool {
		return slices.Contains(deniedBuiltins, b.Name)
	})
	caps.Builtins = append(caps.Builtins, builtinDecls()...)
	slices.SortFunc(caps.Builtins, func(a, b *ast.Builtin) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return caps
}

// builtinOptions binds the custom built-ins to g, which may be nil (then
// nothing is reachable and no node is known).
func builtinOptions(g GraphReader) []func(*rego.Rego) {
	b := builtins{graph: g}
	return []func(*rego.Rego){
		rego.Function4(reachableDecl, b.reachable),
		rego.Function1(nodeDecl, b.node),
	}
}

type builtins struct{ graph GraphReader }

func (b builtins) reachable(_ rego.BuiltinContext, nodeTerm, kindTerm, namespaceTerm, nameTerm *ast.Term) (result *ast.Term, err error) {
	defer recoverBuiltin(BuiltinReachable, &result, &err)
	var args [4]string
	for i, t := range []*ast.Term{nodeTerm, kindTerm, namespaceTerm, nameTerm} {
		if args[i], err = stringOperand(t, i+1); err != nil {
			return nil, err
		}
	}
	node, kind, namespace, name := args[0], args[1], args[2], args[3]
	if kind != KindConfigMap {
		return nil, fmt.Errorf("kind %q is not supported, only %q", kind, KindConfigMap)
	}
	if b.graph == nil {
		return ast.InternedTerm(false), nil
	}
	return ast.InternedTerm(b.graph.CanReadConfigMap(node, namespace, name)), nil
}

func (b builtins) node(_ rego.BuiltinContext, nameTerm *ast.Term) (result *ast.Term, err error) {
	defer recoverBuiltin(BuiltinNode, &result, &err)
	name, err := stringOperand(nameTerm, 1)
	if err != nil {
		return nil, err
	}
	if b.graph == nil {
		return nil, nil
	}
	info, ok := b.graph.Node(name)
	if !ok || info == nil {
		// A nil term makes the call undefined, which is how Rego says
		// "no such node".
		return nil, nil
	}
	return ast.NewTerm(NodeValue(info)), nil
}

// NodeValue renders NodeInfo as nodeguard.node returns it. Tests and tools
// use it to build mocks that match the real function.
func NodeValue(info *graph.NodeInfo) ast.Value {
	var assignment ast.Value = ast.NullValue
	if info.Assignment != nil {
		assignment = ast.String(info.Assignment.ConfigMap.String())
	}
	labels := make([][2]*ast.Term, 0, len(info.Labels))
	for k, v := range info.Labels {
		labels = append(labels, [2]*ast.Term{ast.StringTerm(k), ast.StringTerm(v)})
	}
	return ast.NewObject(
		[2]*ast.Term{ast.StringTerm("name"), ast.StringTerm(info.Name)},
		[2]*ast.Term{ast.StringTerm("labels"), ast.NewTerm(ast.NewObject(labels...))},
		[2]*ast.Term{ast.StringTerm("kubeletVersion"), ast.StringTerm(info.KubeletVersion)},
		[2]*ast.Term{ast.StringTerm("assignment"), ast.NewTerm(assignment)},
	)
}

func stringOperand(t *ast.Term, pos int) (string, error) {
	s, ok := t.Value.(ast.String)
	if !ok {
		return "", fmt.Errorf("operand %d must be a string, got %s", pos, ast.ValueName(t.Value))
	}
	return string(s), nil
}

// recoverBuiltin turns a panic in a graph reader into a built-in error: a
// policy then sees an undefined call, and the webhook keeps serving.
func recoverBuiltin(name string, result **ast.Term, err *error) {
	if r := recover(); r != nil {
		*result = nil
		*err = fmt.Errorf("%s: internal error: %v", name, r)
	}
}
