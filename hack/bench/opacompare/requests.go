package opacompare

import (
	"encoding/json"
	"fmt"

	"github.com/open-policy-agent/opa/v1/ast"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/nodeguard/nodeguard/pkg/graph"
	"github.com/nodeguard/nodeguard/pkg/kubeletconfig"
	"github.com/nodeguard/nodeguard/pkg/policy"
	"github.com/nodeguard/nodeguard/test/loadtest/cluster"
)

// GraphFacts are what the graph built-ins answer from, as data for the
// stock server: every node as nodeguard.node renders it, and for every node
// the ConfigMaps (namespace, then name) it can reach.
type GraphFacts struct {
	Nodes     map[string]any                        `json:"nodes"`
	Reachable map[string]map[string]map[string]bool `json:"reachable"`
}

// graphFacts renders c's graph: nodes from g, reachability from the
// cluster's construction (each pod's two ConfigMaps and each assignment),
// checked against g for a sample of nodes so that the facts cannot drift
// from what nodeguard.reachable answers.
func graphFacts(c *cluster.Cluster, g *graph.Graph, extraNamespace, extraName string) (*GraphFacts, error) {
	s := c.Shape
	facts := &GraphFacts{
		Nodes:     make(map[string]any, s.Nodes),
		Reachable: make(map[string]map[string]map[string]bool, s.Nodes),
	}
	for i := range s.Nodes {
		name := cluster.NodeName(i)
		info, ok := g.Node(name)
		if !ok {
			return nil, fmt.Errorf("node %s is not in the graph", name)
		}
		rendered, err := ast.JSON(policy.NodeValue(info))
		if err != nil {
			return nil, fmt.Errorf("rendering node %s: %w", name, err)
		}
		facts.Nodes[name] = rendered
		reach := map[string]map[string]bool{}
		add := func(namespace, cm string) {
			if reach[namespace] == nil {
				reach[namespace] = map[string]bool{}
			}
			reach[namespace][cm] = true
		}
		for j := range s.PodsPerNode {
			for _, cm := range cluster.PodConfigMapNames(i, j) {
				add(s.PodNamespace(i, j), cm)
			}
		}
		if cm, ok := s.AssignedConfigMap(i); ok {
			add(cluster.ConfigNamespace, cm)
		}
		if i < 50 {
			for namespace, names := range reach {
				for cm := range names {
					if !g.CanReadConfigMap(name, namespace, cm) {
						return nil, fmt.Errorf("graph facts disagree with the graph: %s cannot read %s/%s", name, namespace, cm)
					}
				}
			}
			if g.CanReadConfigMap(name, extraNamespace, extraName) {
				return nil, fmt.Errorf("graph facts disagree with the graph: %s can read %s/%s", name, extraNamespace, extraName)
			}
		}
		facts.Reachable[name] = reach
	}
	return facts, nil
}

// opaBody wraps an input document as the stock server's data API takes it.
func opaBody(input ast.Value) ([]byte, error) {
	doc, err := ast.JSON(input)
	if err != nil {
		return nil, fmt.Errorf("rendering input: %w", err)
	}
	return json.Marshal(map[string]any{"input": doc})
}

// authzBodies returns, for each request, the SubjectAccessReview nodeguard
// receives and the data-API body with the input nodeguard builds for it.
func authzBodies(reqs []cluster.Request, g policy.GraphReader) (reviews, inputs [][]byte, specs []*policy.AuthzInput, err error) {
	for _, r := range reqs {
		review, err := json.Marshal(r.Review())
		if err != nil {
			return nil, nil, nil, fmt.Errorf("encoding review: %w", err)
		}
		spec := r.Spec()
		in := &policy.AuthzInput{Spec: spec}
		in.Node, in.KubeletVersion, in.NodeLabels = policy.NodeOf(spec.User, spec.Groups, g)
		value, err := in.Value()
		if err != nil {
			return nil, nil, nil, err
		}
		body, err := opaBody(value)
		if err != nil {
			return nil, nil, nil, err
		}
		reviews, inputs, specs = append(reviews, review), append(inputs, body), append(specs, in)
	}
	return reviews, inputs, specs, nil
}

// validateCase is one admission request of the load.
type validateCase struct {
	name   string
	review []byte
	input  []byte
	in     *policy.AdmissionInput
}

// Namespace and name of the eligible ConfigMap the admission load updates;
// kubelet-configs is the namespace the shipped config_namespaces policy
// allows by default.
const (
	validateNamespace = "kubelet-configs"
	validateName      = "pool"
)

// validateCases are the two requests docs/benchmarks.md measures /validate
// with: a kubelet's status update of its Node (40 images, conditions,
// managed fields), the most frequent admission request, and an
// administrator's update of an eligible ConfigMap with a 4 KiB
// configuration.
func validateCases(shape cluster.Shape, g policy.GraphReader) ([]validateCase, error) {
	nodeName := cluster.NodeName(1)
	assigned, ok := shape.AssignedConfigMap(1)
	if !ok {
		return nil, fmt.Errorf("the cluster shape assigns no configuration to %s", nodeName)
	}
	node := cluster.StatusUpdateNode(nodeName, cluster.ConfigNamespace+"/"+assigned)
	nodeJSON, err := json.Marshal(node)
	if err != nil {
		return nil, fmt.Errorf("encoding node: %w", err)
	}
	newCM, oldCM := cluster.PoolConfigMap(validateNamespace, validateName, "maxPods: 120\n"), cluster.PoolConfigMap(validateNamespace, validateName, "maxPods: 110\n")
	newJSON, err := json.Marshal(newCM)
	if err != nil {
		return nil, fmt.Errorf("encoding ConfigMap: %w", err)
	}
	oldJSON, err := json.Marshal(oldCM)
	if err != nil {
		return nil, fmt.Errorf("encoding ConfigMap: %w", err)
	}
	newCfg, err := kubeletconfig.DecodeConfigMap(newCM)
	if err != nil {
		return nil, fmt.Errorf("decoding the load's configuration: %w", err)
	}
	oldCfg, err := kubeletconfig.DecodeConfigMap(oldCM)
	if err != nil {
		return nil, fmt.Errorf("decoding the load's configuration: %w", err)
	}

	requests := []struct {
		name     string
		req      admissionv1.AdmissionRequest
		cfg, old any
	}{
		{name: "node status update", req: admissionv1.AdmissionRequest{
			Kind:     metav1.GroupVersionKind{Version: "v1", Kind: "Node"},
			Resource: metav1.GroupVersionResource{Version: "v1", Resource: "nodes"}, SubResource: "status", Name: nodeName, Operation: admissionv1.Update,
			UserInfo: authenticationv1.UserInfo{Username: "system:node:" + nodeName, Groups: []string{"system:nodes", "system:authenticated"}},
			Object:   runtime.RawExtension{Raw: nodeJSON}, OldObject: runtime.RawExtension{Raw: nodeJSON}}},
		{name: "ConfigMap update (4 KiB config)", req: admissionv1.AdmissionRequest{
			Kind:     metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"},
			Resource: metav1.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespace: validateNamespace, Name: validateName, Operation: admissionv1.Update,
			UserInfo: authenticationv1.UserInfo{Username: "admin", Groups: []string{"system:masters"}},
			Object:   runtime.RawExtension{Raw: newJSON}, OldObject: runtime.RawExtension{Raw: oldJSON}}, cfg: newCfg, old: oldCfg},
	}
	var cases []validateCase
	for _, r := range requests {
		req := r.req
		req.UID = "00000000-0000-0000-0000-000000000001"
		review, err := json.Marshal(admissionv1.AdmissionReview{
			TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}, Request: &req})
		if err != nil {
			return nil, fmt.Errorf("encoding review: %w", err)
		}
		in := &policy.AdmissionInput{Request: &req}
		in.Node, in.KubeletVersion, in.NodeLabels = policy.NodeOf(req.UserInfo.Username, req.UserInfo.Groups, g)
		if r.cfg != nil {
			in.KubeletConfig, in.OldKubeletConfig = newCfg, oldCfg
		}
		value, err := in.Value()
		if err != nil {
			return nil, err
		}
		body, err := opaBody(value)
		if err != nil {
			return nil, err
		}
		cases = append(cases, validateCase{name: r.name, review: review, input: body, in: in})
	}
	return cases, nil
}
