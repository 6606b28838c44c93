package policy

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/open-policy-agent/opa/v1/ast"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/nodeguard/nodeguard/pkg/contract"
)

// AdmissionInput is what an admission policy sees as input:
//
//	{"request": <AdmissionRequest>, "nodeguard": {"node", "kubeletVersion", "kubeletConfig", "oldKubeletConfig"}}
//
// request is rendered exactly as encoding/json renders an
// admissionv1.AdmissionRequest (the form the apiserver sends, omitempty
// fields absent), with object, oldObject and options decoded into JSON
// values. policies/README.md documents every field.
type AdmissionInput struct {
	Request *admissionv1.AdmissionRequest
	// Node is the requesting node's name, "" when the user is not a node.
	Node string
	// KubeletVersion is the requesting node's kubelet version as the graph
	// knows it, "" when unknown or when the user is not a node.
	KubeletVersion string
	// KubeletConfig and OldKubeletConfig are the decoded configurations of
	// an eligible ConfigMap being written (object and oldObject); nil
	// renders as null. They are rendered as encoding/json renders the type:
	// fields the author left out are absent, or zero where the type has no
	// way to tell (durations render as "0s").
	KubeletConfig    *kubeletconfigv1beta1.KubeletConfiguration
	OldKubeletConfig *kubeletconfigv1beta1.KubeletConfiguration
	// ObjectKeysUnique says that the request's object and oldObject repeat
	// no key in their top two levels (the object's members, and theirs:
	// metadata, spec, status, data), as pkg/admission makes sure of every
	// review it answers. Those levels are then read only as far as the
	// policies look; otherwise the rest of each is searched for a repeat
	// of what was kept, which encoding/json would let override it.
	ObjectKeysUnique bool
}

// uniqueKeyLevels is how many levels of an object ObjectKeysUnique covers.
const uniqueKeyLevels = 2

// AuthzInput is what an authorization policy sees as input:
//
//	{"spec": <SubjectAccessReviewSpec>, "nodeguard": {"node", "kubeletVersion"}}
//
// spec is rendered exactly as encoding/json renders an
// authorizationv1.SubjectAccessReviewSpec.
type AuthzInput struct {
	Spec           *authorizationv1.SubjectAccessReviewSpec
	Node           string
	KubeletVersion string
}

// NodeOf names the node a request comes from, following CONTRACT.md's
// identity rules, and looks its kubelet version up in g (which may be nil).
// Both are "" for a user that is not a node or does not name one.
func NodeOf(user string, groups []string, g GraphReader) (node, kubeletVersion string) {
	node, _ = contract.NodeIdentity(user, groups)
	if node == "" || g == nil {
		return node, ""
	}
	if info, ok := g.Node(node); ok && info != nil {
		return node, info.KubeletVersion
	}
	return node, ""
}

// Value renders the input as the single ast.Value the evaluation takes.
// Only embedded raw JSON (object, oldObject, options) and the kubelet
// configurations are decoded; the rest is built directly, so no part of the
// request goes through JSON twice.
//
// The result is lazy: a member is converted to AST only when a policy reads
// it. Policies read a few fields of objects that can be large (a Node's
// images and managed fields), and converting all of it would cost as much
// again as decoding it. A lazy value must not be shared between
// evaluations; each call returns a fresh one.
func (in *AdmissionInput) Value() (ast.Value, error) { return in.value(everything, nil) }

// value renders the parts of the input that p keeps; the envelope is always
// whole, being small. configs, when not nil, caches the configurations'
// renderings.
func (in *AdmissionInput) value(p *projection, configs *configDocCache) (ast.Value, error) {
	doc, err := in.doc(p, configs)
	if err != nil {
		return nil, err
	}
	return ast.LazyObject(doc.input), nil
}

// renderedAdmission is an admission input rendered as the Go values
// ast.LazyObject converts, with what identifies its configurations.
type renderedAdmission struct {
	input map[string]any
	// request is input's request member.
	request map[string]any
	// config and oldConfig identify the configurations' renderings when
	// they came from the cache.
	config, oldConfig *configDoc
}

// doc renders the input.
func (in *AdmissionInput) doc(p *projection, configs *configDocCache) (*renderedAdmission, error) {
	if in == nil || in.Request == nil {
		return nil, fmt.Errorf("admission input has no request")
	}
	trusted := 0
	if in.ObjectKeysUnique {
		trusted = uniqueKeyLevels
	}
	request, err := admissionRequestDoc(in.Request, p.child("request"), trusted)
	if err != nil {
		return nil, err
	}
	nodeguard := p.child("nodeguard")
	config, configEntry, err := configs.doc(in.KubeletConfig, nodeguard.child("kubeletConfig"))
	if err != nil {
		return nil, fmt.Errorf("rendering kubeletConfig: %w", err)
	}
	oldConfig, oldConfigEntry, err := configs.doc(in.OldKubeletConfig, nodeguard.child("oldKubeletConfig"))
	if err != nil {
		return nil, fmt.Errorf("rendering oldKubeletConfig: %w", err)
	}
	return &renderedAdmission{
		input: map[string]any{
			"request": request,
			"nodeguard": map[string]any{
				"node":             in.Node,
				"kubeletVersion":   in.KubeletVersion,
				"kubeletConfig":    config,
				"oldKubeletConfig": oldConfig,
			},
		},
		request: request, config: configEntry, oldConfig: oldConfigEntry,
	}, nil
}

// memoKey is what verdictMemo encodes: the input, with each cached
// configuration standing for itself by identity rather than content.
func (r *renderedAdmission) memoKey(in *AdmissionInput) any {
	nodeguard := r.input["nodeguard"].(map[string]any)
	config, oldConfig := nodeguard["kubeletConfig"], nodeguard["oldKubeletConfig"]
	if r.config != nil {
		config = r.config
	}
	if r.oldConfig != nil {
		oldConfig = r.oldConfig
	}
	return []any{r.request, in.Node, in.KubeletVersion, config, oldConfig}
}

// errNoSpec is an authorization input without its review.
var errNoSpec = errors.New("authorization input has no spec")

// Value renders the input as the single ast.Value the evaluation takes.
func (in *AuthzInput) Value() (ast.Value, error) { return in.value(everything) }

// value renders the members of the input that p keeps. A review is small,
// but it is built for every request a node makes, and most of it (user,
// groups, extra, selectors) is usually read by no policy.
func (in *AuthzInput) value(p *projection) (ast.Value, error) {
	if in == nil || in.Spec == nil {
		return nil, errNoSpec
	}
	top := make(fields, 0, 2)
	if spec := p.child("spec"); spec != nil {
		top.add("spec", sarSpecValue(in.Spec, spec))
	}
	if ng := p.child("nodeguard"); ng != nil {
		f := make(fields, 0, 2)
		f.keepStr(ng, "node", in.Node)
		f.keepStr(ng, "kubeletVersion", in.KubeletVersion)
		top.add("nodeguard", f.object())
	}
	return top.object(), nil
}

// fields collects an object's key/value pairs; the add methods mirror
// encoding/json's handling of omitempty so that the result equals the
// JSON encoding of the Kubernetes type.
type fields [][2]*ast.Term

func item(key string, v ast.Value) [2]*ast.Term {
	return [2]*ast.Term{stringTerm(key), ast.NewTerm(v)}
}

func (f *fields) add(key string, v ast.Value) { *f = append(*f, item(key, v)) }

func (f *fields) str(key, v string) { *f = append(*f, [2]*ast.Term{stringTerm(key), stringTerm(v)}) }

// commonStrings are terms built once for the keys of the input documents
// and the values most reviews carry, so that rendering a review allocates
// only for what varies. Terms are immutable once built, and OPA shares
// such terms between evaluations itself.
var commonStrings = func() map[string]*ast.Term {
	m := make(map[string]*ast.Term)
	for _, s := range []string{
		// Document keys.
		"spec", "nodeguard", "node", "kubeletVersion", "resourceAttributes", "nonResourceAttributes",
		"user", "groups", "extra", "uid", "namespace", "verb", "group", "version", "resource",
		"subresource", "name", "fieldSelector", "labelSelector", "rawSelector", "requirements",
		"key", "operator", "values", "path", "kind",
		// Values.
		"", "v1", "get", "list", "watch", "create", "update", "patch", "delete", "deletecollection",
		"configmaps", "nodes", "pods", "secrets", "services", "endpoints", "leases", "events",
		"persistentvolumes", "persistentvolumeclaims", "serviceaccounts", "status", "token",
		"coordination.k8s.io", "storage.k8s.io", "resource.k8s.io", "certificates.k8s.io",
		"system:nodes", "system:authenticated",
	} {
		m[s] = ast.StringTerm(s)
	}
	return m
}()

func stringTerm(s string) *ast.Term {
	if t, ok := commonStrings[s]; ok {
		return t
	}
	return ast.StringTerm(s)
}

func (f *fields) strOmitEmpty(key, v string) {
	if v != "" {
		f.str(key, v)
	}
}

func (f *fields) stringsOmitEmpty(key string, vs []string) {
	if len(vs) > 0 {
		f.add(key, stringsValue(vs))
	}
}

// keepStr adds a string member when p keeps it.
func (f *fields) keepStr(p *projection, key, v string) {
	if p.child(key) != nil {
		f.str(key, v)
	}
}

// keepStrOmitEmpty adds a non-empty string member when p keeps it.
func (f *fields) keepStrOmitEmpty(p *projection, key, v string) {
	if v != "" && p.child(key) != nil {
		f.str(key, v)
	}
}

func (f fields) object() ast.Value { return ast.NewObject(f...) }

func stringsValue(vs []string) ast.Value {
	terms := make([]*ast.Term, len(vs))
	for i, v := range vs {
		terms[i] = stringTerm(v)
	}
	return ast.NewArray(terms...)
}

// extraValue renders map[string][]string the way encoding/json does, with
// a nil value as null.
func extraValue[V ~[]string](extra map[string]V) ast.Value {
	kvs := make([][2]*ast.Term, 0, len(extra))
	for k, v := range extra {
		var value ast.Value = ast.NullValue
		if v != nil {
			value = stringsValue(v)
		}
		kvs = append(kvs, item(k, value))
	}
	return ast.NewObject(kvs...)
}

// admissionRequestDoc renders the request as encoding/json would, as the
// Go values ast.LazyObject converts on demand.
// trusted is how many levels of object and oldObject hold no repeated key
// (AdmissionInput.ObjectKeysUnique).
func admissionRequestDoc(r *admissionv1.AdmissionRequest, p *projection, trusted int) (map[string]any, error) {
	// Members no policy can read are left out, so that reviews that differ
	// only there (the uid of every review) render alike for verdictMemo,
	// and nothing is built for them. With no projection nothing reads the
	// request, and nothing of it is rendered.
	if p == nil {
		return map[string]any{}, nil
	}
	keep := func(key string) bool { return p.child(key) != nil }
	doc := make(map[string]any, 8)
	set := func(key string, v func() any) {
		if keep(key) {
			doc[key] = v()
		}
	}
	setString := func(key, v string) {
		if v != "" && keep(key) {
			doc[key] = v
		}
	}
	set("uid", func() any { return string(r.UID) })
	set("kind", func() any { return gvkDoc(r.Kind) })
	set("resource", func() any { return gvrDoc(r.Resource) })
	setString("subResource", r.SubResource)
	if r.RequestKind != nil {
		set("requestKind", func() any { return gvkDoc(*r.RequestKind) })
	}
	if r.RequestResource != nil {
		set("requestResource", func() any { return gvrDoc(*r.RequestResource) })
	}
	setString("requestSubResource", r.RequestSubResource)
	setString("name", r.Name)
	setString("namespace", r.Namespace)
	set("operation", func() any { return string(r.Operation) })
	set("userInfo", func() any { return userInfoDoc(&r.UserInfo) })
	// encoding/json ignores omitempty on struct fields, so RawExtension
	// fields are always present, null when empty.
	for _, raw := range []struct {
		key     string
		ext     *runtime.RawExtension
		trusted int
	}{{"object", &r.Object, trusted}, {"oldObject", &r.OldObject, trusted}, {"options", &r.Options, 0}} {
		if !keep(raw.key) {
			continue
		}
		v, err := rawExtensionDoc(raw.ext, p.child(raw.key), raw.trusted)
		if err != nil {
			return nil, fmt.Errorf("decoding request.%s: %w", raw.key, err)
		}
		doc[raw.key] = v
	}
	if r.DryRun != nil {
		set("dryRun", func() any { return *r.DryRun })
	}
	return doc, nil
}

func setNonEmpty(doc map[string]any, key, v string) {
	if v != "" {
		doc[key] = v
	}
}

func gvkDoc(gvk metav1.GroupVersionKind) map[string]any {
	return map[string]any{"group": gvk.Group, "version": gvk.Version, "kind": gvk.Kind}
}

func gvrDoc(gvr metav1.GroupVersionResource) map[string]any {
	return map[string]any{"group": gvr.Group, "version": gvr.Version, "resource": gvr.Resource}
}

func userInfoDoc(u *authenticationv1.UserInfo) map[string]any {
	doc := make(map[string]any, 4)
	setNonEmpty(doc, "username", u.Username)
	setNonEmpty(doc, "uid", u.UID)
	if len(u.Groups) > 0 {
		doc["groups"] = u.Groups
	}
	if len(u.Extra) > 0 {
		extra := make(map[string]any, len(u.Extra))
		for k, v := range u.Extra {
			if v == nil {
				extra[k] = nil
			} else {
				extra[k] = []string(v)
			}
		}
		doc["extra"] = extra
	}
	return doc
}

// rawExtensionDoc decodes the parts of embedded JSON that p keeps, once,
// straight from the bytes the webhook received.
func rawExtensionDoc(ext *runtime.RawExtension, p *projection, trusted int) (any, error) {
	if p == nil {
		return nil, nil
	}
	raw := ext.Raw
	if raw == nil {
		if ext.Object == nil {
			return nil, nil
		}
		// Only a caller that built the request by hand gets here.
		encoded, err := json.Marshal(ext.Object)
		if err != nil {
			return nil, fmt.Errorf("encoding embedded object: %w", err)
		}
		raw = encoded
	}
	return projectJSON(raw, p, trusted)
}

func kubeletConfigDoc(cfg *kubeletconfigv1beta1.KubeletConfiguration, p *projection) (any, error) {
	if cfg == nil || p == nil {
		return nil, nil
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		return nil, fmt.Errorf("encoding KubeletConfiguration: %w", err)
	}
	return projectJSON(raw, p, 0)
}

func sarSpecValue(s *authorizationv1.SubjectAccessReviewSpec, p *projection) ast.Value {
	f := make(fields, 0, 6)
	if ra := s.ResourceAttributes; ra != nil {
		if rp := p.child("resourceAttributes"); rp != nil {
			f.add("resourceAttributes", resourceAttributesValue(ra, rp))
		}
	}
	if nra := s.NonResourceAttributes; nra != nil {
		if np := p.child("nonResourceAttributes"); np != nil {
			n := make(fields, 0, 2)
			n.keepStrOmitEmpty(np, "path", nra.Path)
			n.keepStrOmitEmpty(np, "verb", nra.Verb)
			f.add("nonResourceAttributes", n.object())
		}
	}
	f.keepStrOmitEmpty(p, "user", s.User)
	if len(s.Groups) > 0 && p.child("groups") != nil {
		f.add("groups", stringsValue(s.Groups))
	}
	if len(s.Extra) > 0 && p.child("extra") != nil {
		f.add("extra", extraValue(s.Extra))
	}
	f.keepStrOmitEmpty(p, "uid", s.UID)
	return f.object()
}

func resourceAttributesValue(ra *authorizationv1.ResourceAttributes, p *projection) ast.Value {
	f := make(fields, 0, 9)
	for _, attr := range resourceAttributeStrings {
		f.keepStrOmitEmpty(p, attr.name, attr.get(ra))
	}
	if fs := ra.FieldSelector; fs != nil && p.child("fieldSelector") != nil {
		f.add("fieldSelector", selectorValue(fs.RawSelector, len(fs.Requirements), func(i int) ast.Value {
			r := fs.Requirements[i]
			return requirementValue(r.Key, string(r.Operator), r.Values)
		}))
	}
	if ls := ra.LabelSelector; ls != nil && p.child("labelSelector") != nil {
		f.add("labelSelector", selectorValue(ls.RawSelector, len(ls.Requirements), func(i int) ast.Value {
			r := ls.Requirements[i]
			return requirementValue(r.Key, string(r.Operator), r.Values)
		}))
	}
	return f.object()
}

// resourceAttributeStrings are the string members of ResourceAttributes,
// in the order encoding/json writes them, under their JSON names: the
// rendering and the prefilter's direct answers read them from here.
var resourceAttributeStrings = []struct {
	name string
	get  func(*authorizationv1.ResourceAttributes) string
}{
	{"namespace", func(ra *authorizationv1.ResourceAttributes) string { return ra.Namespace }},
	{"verb", func(ra *authorizationv1.ResourceAttributes) string { return ra.Verb }},
	{"group", func(ra *authorizationv1.ResourceAttributes) string { return ra.Group }},
	{"version", func(ra *authorizationv1.ResourceAttributes) string { return ra.Version }},
	{"resource", func(ra *authorizationv1.ResourceAttributes) string { return ra.Resource }},
	{"subresource", func(ra *authorizationv1.ResourceAttributes) string { return ra.Subresource }},
	{"name", func(ra *authorizationv1.ResourceAttributes) string { return ra.Name }},
}

// resourceAttributeString reads the string member of ra named name.
func resourceAttributeString(ra *authorizationv1.ResourceAttributes, name string) (string, bool) {
	for _, attr := range resourceAttributeStrings {
		if attr.name == name {
			return attr.get(ra), true
		}
	}
	return "", false
}

// selectorValue renders field and label selector attributes, which share
// their shape. Selectors are rare and small, so they are kept whole.
func selectorValue(raw string, n int, requirement func(int) ast.Value) ast.Value {
	s := make(fields, 0, 2)
	s.strOmitEmpty("rawSelector", raw)
	if n > 0 {
		reqs := make([]*ast.Term, n)
		for i := range n {
			reqs[i] = ast.NewTerm(requirement(i))
		}
		s.add("requirements", ast.NewArray(reqs...))
	}
	return s.object()
}

func requirementValue(key, operator string, values []string) ast.Value {
	f := make(fields, 0, 3)
	f.str("key", key)
	f.str("operator", operator)
	f.stringsOmitEmpty("values", values)
	return f.object()
}
