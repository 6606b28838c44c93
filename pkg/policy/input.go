package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"

	"github.com/open-policy-agent/opa/v1/ast"
	admissionv1 "k8s.io/api/admission/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/kubeletconfig/hardening"
)

// AdmissionInput is what an admission policy sees as input:
//
//	{"request": <AdmissionRequest>,
//	 "nodeguard": {"node", "kubeletVersion", "nodeLabels", "kubeletConfig", "oldKubeletConfig",
//	               "dangerousFields", "riskyFields"}}
//
// dangerousFields and riskyFields are what pkg/kubeletconfig/hardening
// finds in kubeletConfig (against oldKubeletConfig), computed here once:
// {field: {"cis", "why"}} and {field: why}, {} without a configuration.
// They are the one implementation of those rules, which the node agent
// applies too; the shipped dangerous_fields policy turns them into
// denials and warnings.
//
// It is rendered by encoding/json, so request reads exactly as the
// apiserver sends an admissionv1.AdmissionRequest (object, oldObject and
// options as JSON values). policies/README.md documents every field.
type AdmissionInput struct {
	Request *admissionv1.AdmissionRequest
	// Node is the requesting node's name, "" when the user is not a node.
	Node string
	// KubeletVersion is the requesting node's kubelet version as the graph
	// knows it, "" when unknown or when the user is not a node.
	KubeletVersion string
	// NodeLabels are the requesting node's labels as the graph knows them;
	// nil renders as {}. They are in the input, rather than only behind
	// nodeguard.node, so that a rule conditioned on a label is one OPA's
	// rule index can rule out.
	NodeLabels map[string]string
	// KubeletConfig and OldKubeletConfig are the decoded configurations of
	// an eligible ConfigMap being written (object and oldObject); nil
	// renders as null. Fields the author left out are absent, or zero where
	// the type has no way to tell (durations render as "0s").
	KubeletConfig    *kubeletconfigv1beta1.KubeletConfiguration
	OldKubeletConfig *kubeletconfigv1beta1.KubeletConfiguration
}

// AuthzInput is what an authorization policy sees as input:
//
//	{"spec": <SubjectAccessReviewSpec>, "nodeguard": {"node", "kubeletVersion", "nodeLabels"}}
//
// spec is rendered by encoding/json, as the apiserver sends it.
type AuthzInput struct {
	Spec           *authorizationv1.SubjectAccessReviewSpec
	Node           string
	KubeletVersion string
	NodeLabels     map[string]string
}

// NodeOf names the node a request comes from, following the identity rules
// of docs/reference.md, and looks its kubelet version and labels up in g (which
// may be nil). All are empty for a user that is not a node or does not
// name one, or a node the graph does not know.
func NodeOf(user string, groups []string, g GraphReader) (node, kubeletVersion string, labels map[string]string) {
	node, _ = contract.NodeIdentity(user, groups)
	if node == "" || g == nil {
		return node, "", nil
	}
	if info, ok := g.Node(node); ok && info != nil {
		return node, info.KubeletVersion, maps.Clone(info.Labels)
	}
	return node, "", nil
}

// The documents as encoding/json renders them.
type (
	admissionDoc struct {
		Request   *admissionv1.AdmissionRequest `json:"request"`
		Nodeguard admissionFacts                `json:"nodeguard"`
	}
	admissionFacts struct {
		nodeFacts
		KubeletConfig    *kubeletconfigv1beta1.KubeletConfiguration `json:"kubeletConfig"`
		OldKubeletConfig *kubeletconfigv1beta1.KubeletConfiguration `json:"oldKubeletConfig"`
		DangerousFields  map[string]hardening.Finding               `json:"dangerousFields"`
		RiskyFields      map[string]string                          `json:"riskyFields"`
	}
	authzDoc struct {
		Spec      *authorizationv1.SubjectAccessReviewSpec `json:"spec"`
		Nodeguard nodeFacts                                `json:"nodeguard"`
	}
	nodeFacts struct {
		Node           string            `json:"node"`
		KubeletVersion string            `json:"kubeletVersion"`
		NodeLabels     map[string]string `json:"nodeLabels"`
	}
)

func newNodeFacts(node, kubeletVersion string, labels map[string]string) nodeFacts {
	if labels == nil {
		labels = map[string]string{}
	}
	return nodeFacts{Node: node, KubeletVersion: kubeletVersion, NodeLabels: labels}
}

// errNoSpec is an authorization input without its review.
var errNoSpec = errors.New("authorization input has no spec")

// Value renders the input as the ast.Value an evaluation takes.
func (in *AdmissionInput) Value() (ast.Value, error) {
	if in == nil || in.Request == nil {
		return nil, errors.New("admission input has no request")
	}
	return render(admissionDoc{
		Request: in.Request,
		Nodeguard: admissionFacts{
			nodeFacts:        newNodeFacts(in.Node, in.KubeletVersion, in.NodeLabels),
			KubeletConfig:    in.KubeletConfig,
			OldKubeletConfig: in.OldKubeletConfig,
			DangerousFields:  dangerousFields(in.KubeletConfig, in.OldKubeletConfig),
			RiskyFields:      riskyFields(in.KubeletConfig),
		},
	})
}

// dangerousFields renders hardening.Find for the input. The runtime socket
// rules are left to the policy, which reads its allow-list from
// data.nodeguard.config.
func dangerousFields(cfg, old *kubeletconfigv1beta1.KubeletConfiguration) map[string]hardening.Finding {
	found := map[string]hardening.Finding{}
	for _, f := range hardening.Find(cfg, old, hardening.Options{}) {
		found[f.Field] = f
	}
	return found
}

func riskyFields(cfg *kubeletconfigv1beta1.KubeletConfiguration) map[string]string {
	risky := map[string]string{}
	for _, f := range hardening.Risky(cfg) {
		risky[f.Field] = f.Why
	}
	return risky
}

// Value renders the input as the ast.Value an evaluation takes.
func (in *AuthzInput) Value() (ast.Value, error) {
	if in == nil || in.Spec == nil {
		return nil, errNoSpec
	}
	return render(authzDoc{Spec: in.Spec, Nodeguard: newNodeFacts(in.Node, in.KubeletVersion, in.NodeLabels)})
}

// render encodes doc and reads it back the way OPA reads JSON input
// (numbers kept exact).
func render(doc any) (ast.Value, error) {
	raw, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("encoding input: %w", err)
	}
	v, err := ast.ValueFromReader(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("reading input: %w", err)
	}
	return v, nil
}
