package policy

import (
	"github.com/open-policy-agent/opa/v1/ast"
)

// labelGuard is a condition a rule's body states on a node's labels
// through nodeguard.node, found by reading the compiled rule: for
//
//	node := nodeguard.node(input.nodeguard.node)
//	node.labels["nodeguard.dev/maintenance"] == "true"
//
// it is {nodeName: input.nodeguard.node, key: "nodeguard.dev/maintenance",
// value: "true"}. OPA's rule index only sees conditions on input; this one
// lets the prefilter rule out, from the graph, a rule the index keeps for
// every request of its kind (a maintenance-window policy matches every
// ConfigMap read, and applies to almost none). The rule can match only if
// the named node is in the graph with that label value, since otherwise
// nodeguard.node is undefined or the comparison fails, and the body with
// it.
type labelGuard struct {
	// nodeName is the input reference the node's name comes from.
	nodeName ast.Ref
	key      string
	value    string
}

// ruleGuards finds the label guards of each rule. A rule is read only where
// the reading is sound: top-level expressions of its body, which must all
// hold for the rule to match, that are neither negated nor under `with`;
// anything else (helper functions, comprehensions, computed keys) is simply
// not a guard, and the rule is evaluated as before.
func ruleGuards(c *ast.Compiler, rules []*ast.Rule) map[*ast.Rule][]labelGuard {
	out := make(map[*ast.Rule][]labelGuard)
	for _, r := range rules {
		if r.Else != nil || len(r.Head.Args) > 0 {
			continue
		}
		if guards := bodyGuards(c, r.Body); len(guards) > 0 {
			out[r] = guards
		}
	}
	return out
}

func bodyGuards(c *ast.Compiler, body ast.Body) []labelGuard {
	// equal holds, for every variable, the terms the body unifies it with:
	// each is equal to it whenever the body holds, whichever side got bound
	// first. nodeOf holds the argument of each nodeguard.node call by its
	// output variable.
	equal := map[ast.Var][]*ast.Term{}
	nodeOf := map[ast.Var]*ast.Term{}
	var comparisons [][2]*ast.Term
	for _, expr := range body {
		if expr.Negated || len(expr.With) > 0 || !expr.IsCall() {
			continue
		}
		op := expr.Operator()
		operands := expr.Operands()
		switch {
		case op.Equal(ast.Equality.Ref()) && len(operands) == 2:
			for i, t := range operands {
				if v, ok := t.Value.(ast.Var); ok {
					equal[v] = append(equal[v], operands[1-i])
				}
			}
			comparisons = append(comparisons, [2]*ast.Term{operands[0], operands[1]})
		case op.Equal(ast.Equal.Ref()) && len(operands) == 2:
			comparisons = append(comparisons, [2]*ast.Term{operands[0], operands[1]})
		case op.String() == BuiltinNode && len(operands) == 2:
			if v, ok := operands[1].Value.(ast.Var); ok {
				nodeOf[v] = operands[0]
			}
		}
	}
	a := guardAnalysis{compiler: c, equal: equal, nodeOf: nodeOf}
	var guards []labelGuard
	for _, cmp := range comparisons {
		for i := range 2 {
			if g, ok := a.labelGuard(cmp[i], cmp[1-i]); ok {
				guards = append(guards, g)
				break
			}
		}
	}
	return guards
}

type guardAnalysis struct {
	compiler *ast.Compiler
	equal    map[ast.Var][]*ast.Term
	nodeOf   map[ast.Var]*ast.Term
}

// labelGuard reads `<node>.labels[<key>] == <value>`.
func (a guardAnalysis) labelGuard(lhs, rhs *ast.Term) (labelGuard, bool) {
	ref, ok := lhs.Value.(ast.Ref)
	if !ok || len(ref) != 3 || !ref[1].Equal(ast.StringTerm("labels")) {
		return labelGuard{}, false
	}
	head, ok := ref[0].Value.(ast.Var)
	if !ok {
		return labelGuard{}, false
	}
	arg := a.nodeArg(head, map[ast.Var]bool{})
	if arg == nil {
		return labelGuard{}, false
	}
	nodeName := a.inputRef(arg, map[ast.Var]bool{})
	key, keyOK := a.constString(ref[2], map[ast.Var]bool{})
	value, valueOK := a.constString(rhs, map[ast.Var]bool{})
	if nodeName == nil || !keyOK || !valueOK {
		return labelGuard{}, false
	}
	return labelGuard{nodeName: nodeName, key: key, value: value}, true
}

// nodeArg is the argument of the nodeguard.node call whose result v is
// (directly or through variables it is unified with).
func (a guardAnalysis) nodeArg(v ast.Var, seen map[ast.Var]bool) *ast.Term {
	if seen[v] {
		return nil
	}
	seen[v] = true
	if arg, ok := a.nodeOf[v]; ok {
		return arg
	}
	for _, t := range a.equal[v] {
		if w, ok := t.Value.(ast.Var); ok {
			if arg := a.nodeArg(w, seen); arg != nil {
				return arg
			}
		}
	}
	return nil
}

// inputRef is the input reference with a constant path that t equals.
func (a guardAnalysis) inputRef(t *ast.Term, seen map[ast.Var]bool) ast.Ref {
	switch x := t.Value.(type) {
	case ast.Ref:
		if !x.HasPrefix(ast.InputRootRef) || len(constantPath(x[1:])) != len(x)-1 {
			return nil
		}
		return x
	case ast.Var:
		if seen[x] {
			return nil
		}
		seen[x] = true
		for _, u := range a.equal[x] {
			if ref := a.inputRef(u, seen); ref != nil {
				return ref
			}
		}
	}
	return nil
}

// constString is the string t always equals: a literal, or a rule that is
// a constant (`name := "literal"`, the only rule at its path).
func (a guardAnalysis) constString(t *ast.Term, seen map[ast.Var]bool) (string, bool) {
	switch x := t.Value.(type) {
	case ast.String:
		return string(x), true
	case ast.Var:
		if seen[x] {
			return "", false
		}
		seen[x] = true
		for _, u := range a.equal[x] {
			if s, ok := a.constString(u, seen); ok {
				return s, true
			}
		}
	case ast.Ref:
		if !x.HasPrefix(ast.DefaultRootRef) || !x.IsGround() {
			return "", false
		}
		rules := a.compiler.GetRules(x)
		if len(rules) != 1 {
			return "", false
		}
		r := rules[0]
		if !r.Ref().Equal(x) || r.Default || r.Else != nil || len(r.Head.Args) > 0 || r.Head.Value == nil ||
			len(r.Body) != 1 || !r.Body[0].Equal(ast.NewExpr(ast.BooleanTerm(true))) {
			return "", false
		}
		if s, ok := r.Head.Value.Value.(ast.String); ok {
			return string(s), true
		}
	}
	return "", false
}

// indexedOperators are the built-ins OPA's rule index reads expressions
// of (ast/index.go): only there can it compare an input value.
var indexedOperators = []ast.Ref{
	ast.Equality.Ref(), ast.Equal.Ref(), ast.GlobMatch.Ref(), ast.Member.Ref(),
	ast.StartsWith.Ref(), ast.EndsWith.Ref(), ast.AnyPrefixMatch.Ref(), ast.AnySuffixMatch.Ref(),
}

func isIndexedOperator(op ast.Ref) bool {
	for _, r := range indexedOperators {
		if op.Equal(r) {
			return true
		}
	}
	return false
}

// definednessOnly finds the input references the rule index can only ask
// about to learn whether they are defined, never to compare their value:
// those the rules use solely to bind a variable (`attrs :=
// input.spec.resourceAttributes`) whose every other use is as the head of
// a longer reference (attrs.verb, which is a reference of its own) or as
// the argument of a function the index does not read (object.get). The
// index asks for such a value only to drop rules whose binding would fail,
// so a resolver may answer "defined" without rendering it: rendering a
// whole object per request cost more than the lookup it served.
func definednessOnly(rules []*ast.Rule) []ast.Ref {
	bound := map[string]ast.Ref{}
	spoiled := map[string]bool{}
	for _, r := range rules {
		// Each input reference bound to a variable, by variable.
		refOf := map[ast.Var]ast.Ref{}
		for _, expr := range r.Body {
			if ref, v, ok := inputBinding(expr); ok {
				refOf[v] = ref
				bound[ref.String()] = ref
			}
		}
		for _, expr := range r.Body {
			if _, _, ok := inputBinding(expr); ok {
				continue
			}
			// Any other appearance of a whole input reference counts.
			ast.WalkRefs(expr, func(ref ast.Ref) bool {
				if ref.HasPrefix(ast.InputRootRef) {
					spoiled[ref.String()] = true
				}
				return false
			})
			indexed := expr.IsCall() && isIndexedOperator(expr.Operator())
			ast.WalkTerms(expr, func(t *ast.Term) bool {
				switch x := t.Value.(type) {
				case ast.Ref:
					// A variable at the head of a reference is not a use
					// of its whole value; its keys are visited below.
					for _, k := range x[1:] {
						spoilVars(k, refOf, spoiled)
					}
					return true
				case ast.Var:
					if ref, ok := refOf[x]; ok && (indexed || !isOperandOfCall(expr, t)) {
						spoiled[ref.String()] = true
					}
				}
				return false
			})
		}
	}
	var out []ast.Ref
	for _, key := range sortedKeys(bound) {
		if !spoiled[key] {
			out = append(out, bound[key])
		}
	}
	return out
}

// inputBinding reads `v = input.path`, either way round, with a constant
// path, outside negation and `with`.
func inputBinding(expr *ast.Expr) (ast.Ref, ast.Var, bool) {
	if expr.Negated || len(expr.With) > 0 || !expr.IsEquality() {
		return nil, "", false
	}
	ops := expr.Operands()
	for i := range 2 {
		v, isVar := ops[i].Value.(ast.Var)
		ref, isRef := ops[1-i].Value.(ast.Ref)
		if isVar && isRef && ref.HasPrefix(ast.InputRootRef) && len(constantPath(ref[1:])) == len(ref)-1 {
			return ref, v, true
		}
	}
	return nil, "", false
}

// spoilVars marks the references bound to variables used inside t.
func spoilVars(t *ast.Term, refOf map[ast.Var]ast.Ref, spoiled map[string]bool) {
	ast.WalkVars(t, func(v ast.Var) bool {
		if ref, ok := refOf[v]; ok {
			spoiled[ref.String()] = true
		}
		return false
	})
}

// isOperandOfCall reports whether t is a direct operand of expr's call.
func isOperandOfCall(expr *ast.Expr, t *ast.Term) bool {
	if !expr.IsCall() {
		return false
	}
	for _, op := range expr.Operands() {
		if op == t {
			return true
		}
	}
	return false
}
