package policy

import (
	"github.com/open-policy-agent/opa/v1/ast"
)

// authzResolver answers the prefilter's questions about an authorization
// input from the review itself, so that a request no rule can match is
// answered without rendering its input. What it answers equals what the
// rendered input holds (AuthzInput.value under the same projection); any
// other reference is looked up in the rendered input, built once on first
// need and kept for the evaluation.
type authzResolver struct {
	in *AuthzInput
	p  *projection
	// filter says which references only need to be defined.
	filter   *prefilter
	rendered ast.Value
	err      error
}

// value renders the input once.
func (r *authzResolver) value() (ast.Value, error) {
	if r.rendered == nil && r.err == nil {
		r.rendered, r.err = r.in.value(r.p)
	}
	return r.rendered, r.err
}

func (r *authzResolver) Resolve(ref ast.Ref) (ast.Value, error) {
	if !ref[0].Equal(ast.InputRootDocument) {
		return nil, ast.UnknownValueErr{}
	}
	if v, ok := r.direct(ref); ok {
		return v, nil
	}
	input, err := r.value()
	if err != nil {
		return nil, ast.UnknownValueErr{}
	}
	return inputResolver{input: input}.Resolve(ref)
}

// direct answers the string members policies compare, as value renders
// them: absent where the projection drops them, omitempty ones absent
// when empty. ok is false for anything else.
func (r *authzResolver) direct(ref ast.Ref) (v ast.Value, ok bool) {
	keys, ok := stringKeys(ref[1:])
	if !ok || r.in == nil || r.in.Spec == nil {
		return nil, false
	}
	p := r.p
	for _, k := range keys {
		if p = p.child(k); p == nil {
			return nil, true // never rendered: undefined
		}
	}
	switch {
	case len(keys) == 2 && keys[0] == "nodeguard":
		switch keys[1] {
		case "node":
			return stringTerm(r.in.Node).Value, true
		case "kubeletVersion":
			return stringTerm(r.in.KubeletVersion).Value, true
		}
	case len(keys) == 2 && keys[0] == "spec" && keys[1] == "resourceAttributes":
		// Rules that read several attributes bind the object first, and
		// the index asks for it whole; render that member alone.
		if r.in.Spec.ResourceAttributes == nil {
			return nil, true
		}
		if r.filter.onlyDefinedness(ref) {
			// What OPA's index itself answers for a reference it cannot
			// resolve: a defined placeholder.
			return ast.Boolean(true), true
		}
		return resourceAttributesValue(r.in.Spec.ResourceAttributes, p), true
	case len(keys) == 3 && keys[0] == "spec" && keys[1] == "resourceAttributes":
		ra := r.in.Spec.ResourceAttributes
		if ra == nil {
			return nil, true
		}
		s, known := resourceAttributeString(ra, keys[2])
		if !known {
			return nil, false
		}
		if s == "" {
			return nil, true
		}
		return stringTerm(s).Value, true
	}
	return nil, false
}

// stringKeys returns path's keys when they are all strings.
func stringKeys(path ast.Ref) ([]string, bool) {
	if len(path) > 3 {
		return nil, false
	}
	keys := make([]string, 0, 3)
	for _, t := range path {
		s, ok := t.Value.(ast.String)
		if !ok {
			return nil, false
		}
		keys = append(keys, string(s))
	}
	return keys, true
}
