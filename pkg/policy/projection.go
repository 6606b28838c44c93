package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"unsafe"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/tidwall/gjson"
)

// projection is the part of the input document a policy set can read,
// worked out from the references in its modules. Rendering an admission
// input decodes only that part of the embedded objects: a kubelet's Node
// status update carries some 10 KiB of images, conditions and managed
// fields that the shipped policies never read, and decoding them would cost
// ten times the built-in decision.
//
// Policies cannot tell the difference: a member left out is one no
// reference in the set can reach. Any reference that is not a constant
// path (input.request.object[k], input.request.object passed whole to a
// function, `input` itself) keeps everything below the point where the
// path stops being constant.
type projection struct {
	// all keeps the whole subtree.
	all bool
	// children are the members kept, each with its own projection.
	children map[string]*projection
}

var errInvalidJSON = errors.New("invalid JSON")

// everything keeps the whole input.
var everything = &projection{all: true}

// child returns the projection of member key: nil when nothing below key
// is read.
func (p *projection) child(key string) *projection {
	switch {
	case p == nil:
		return nil
	case p.all:
		return p
	default:
		return p.children[key]
	}
}

// add keeps path and everything below it.
func (p *projection) add(path []string) {
	node := p
	for _, key := range path {
		if node.all {
			return
		}
		if node.children == nil {
			node.children = make(map[string]*projection)
		}
		next := node.children[key]
		if next == nil {
			next = &projection{}
			node.children[key] = next
		}
		node = next
	}
	node.all, node.children = true, nil
}

// inputProjection collects the input references of every module.
func inputProjection(modules map[string]*ast.Module) *projection {
	p := &projection{}
	for _, name := range sortedKeys(modules) {
		ast.NewGenericVisitor(func(x any) bool {
			switch x := x.(type) {
			case ast.Ref:
				if !x.HasPrefix(ast.InputRootRef) {
					return false
				}
				p.add(constantPath(x[1:]))
				// Terms inside the ref (input.a[input.b]) are refs of
				// their own; visit them, but not the head.
				for _, t := range x[1:] {
					for _, nested := range inputRefsIn(t) {
						p.add(constantPath(nested[1:]))
					}
				}
				return true
			case ast.Var:
				// A bare input that the compiler left as a variable.
				if x.Equal(ast.InputRootDocument.Value) {
					p.add(nil)
				}
			}
			return false
		}).Walk(modules[name])
	}
	return p
}

func inputRefsIn(t *ast.Term) []ast.Ref {
	var refs []ast.Ref
	ast.WalkRefs(t, func(r ast.Ref) bool {
		if r.HasPrefix(ast.InputRootRef) {
			refs = append(refs, r)
		}
		return false
	})
	return refs
}

// constantPath is the leading run of string keys of a ref's tail.
func constantPath(tail ast.Ref) []string {
	path := make([]string, 0, len(tail))
	for _, t := range tail {
		s, ok := t.Value.(ast.String)
		if !ok {
			break
		}
		path = append(path, string(s))
	}
	return path
}

// projectJSON decodes the parts of raw JSON that p keeps. gjson walks the
// bytes without building what it skips. A nil p means nothing is read, and
// nothing is decoded.
//
// The bytes are not validated as a whole, which would cost a sixth of an
// evaluation: they come from decoding an AdmissionReview, which validated
// them (encoding/json checks a whole document before it decodes any of
// it). Every part kept is validated before it is converted, and the closing
// brace check catches a truncated object, which would otherwise lose
// members silently. The top trusted levels are known to repeat no key.
func projectJSON(raw []byte, p *projection, trusted int) (any, error) {
	if p == nil {
		return nil, nil
	}
	// gjson only reads; viewing the bytes as a string spares copying them.
	root := gjson.Parse(unsafe.String(unsafe.SliceData(raw), len(raw)))
	if p.all || !root.IsObject() {
		return convertJSON(root)
	}
	if trimmed := bytes.TrimRight(raw, " \t\r\n"); trimmed[len(trimmed)-1] != '}' {
		return nil, errInvalidJSON
	}
	return projectResult(root, p, trusted)
}

func projectResult(value gjson.Result, p *projection, trusted int) (any, error) {
	if p.all || !value.IsObject() {
		return convertJSON(value)
	}
	doc := make(map[string]any, len(p.children))
	var err error
	// Once the rest of the object was found to possibly repeat a kept key,
	// it is walked to the end without asking again.
	restMayRepeat := false
	value.ForEach(func(key, member gjson.Result) bool {
		child := p.children[key.Str]
		if child == nil {
			return true
		}
		// A repeated key overwrites, as encoding/json decodes it.
		doc[key.Str], err = projectResult(member, child, trusted-1)
		if err != nil {
			return false
		}
		// Once every kept member is found, the walk may stop where the
		// rest cannot repeat one: a kubelet's Node keeps its large status
		// after the metadata policies read.
		if len(doc) < len(p.children) || restMayRepeat {
			return true
		}
		if trusted > 0 {
			return false
		}
		restMayRepeat = p.mayRepeat(value.Raw[end(value.Raw, member.Raw):])
		return restMayRepeat
	})
	if err != nil {
		return nil, err
	}
	return doc, nil
}

// end is the offset in outer just past inner, a substring of it (gjson
// hands out members as substrings of their object's text).
func end(outer, inner string) int {
	return int(uintptr(unsafe.Pointer(unsafe.StringData(inner)))-uintptr(unsafe.Pointer(unsafe.StringData(outer)))) + len(inner)
}

// mayRepeat reports whether JSON text could hold a key p keeps: it
// contains one of them as a quoted string, or an escape that could spell
// one. A key that would need escaping itself always may.
func (p *projection) mayRepeat(rest string) bool {
	if strings.Contains(rest, `\u`) {
		return true
	}
	for key := range p.children {
		if strings.ContainsAny(key, "\"\\") || strings.Contains(rest, `"`+key+`"`) {
			return true
		}
		for _, r := range key {
			if r < 0x20 || r >= 0x80 {
				return true
			}
		}
	}
	return false
}

// convertJSON validates a JSON value and converts it to the Go values OPA
// takes JSON input as: numbers stay json.Number, exactly as written.
func convertJSON(value gjson.Result) (any, error) {
	if !gjson.Valid(value.Raw) {
		return nil, errInvalidJSON
	}
	return convertValid(value), nil
}

func convertValid(value gjson.Result) any {
	switch value.Type {
	case gjson.Null:
		return nil
	case gjson.False:
		return false
	case gjson.True:
		return true
	case gjson.Number:
		return json.Number(value.Raw)
	case gjson.String:
		return value.Str
	}
	if value.IsArray() {
		var items []any
		value.ForEach(func(_, item gjson.Result) bool {
			items = append(items, convertValid(item))
			return true
		})
		if items == nil {
			items = []any{}
		}
		return items
	}
	doc := make(map[string]any)
	value.ForEach(func(key, member gjson.Result) bool {
		doc[key.Str] = convertValid(member)
		return true
	})
	return doc
}
