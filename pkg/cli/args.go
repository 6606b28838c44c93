package cli

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"github.com/nodeguard/nodeguard/pkg/contract"
)

// nodeSelection is the nodes a command acts on: names, or a label selector.
type nodeSelection struct {
	names    []string
	selector string
}

// validate checks the selection; allowAll lets an empty one mean every node.
func (s nodeSelection) validate(allowAll bool) error {
	switch {
	case len(s.names) > 0 && s.selector != "":
		return usagef("give node names or a selector (-l), not both")
	case len(s.names) == 0 && s.selector == "" && !allowAll:
		return usagef("give at least one node name, or a selector (-l)")
	}
	if s.selector != "" {
		if _, err := labels.Parse(s.selector); err != nil {
			return usagef("invalid selector %q: %w", s.selector, err)
		}
	}
	for _, name := range s.names {
		if name == "" || strings.Contains(name, "/") {
			return usagef("invalid node name %q", name)
		}
	}
	return nil
}

// errNodesMissing reports named nodes that do not exist; what was found is
// still returned alongside it.
type errNodesMissing struct{ names []string }

func (e errNodesMissing) Error() string {
	quoted := make([]string, len(e.names))
	for i, n := range e.names {
		quoted[i] = fmt.Sprintf("%q", n)
	}
	return "node " + strings.Join(quoted, ", ") + " not found"
}

// fetch returns the selected Nodes, sorted by name and without repeats. Named
// nodes that do not exist are reported in an errNodesMissing together with
// the nodes that do; any other error returns no nodes.
func (s nodeSelection) fetch(ctx context.Context, client kubernetes.Interface) ([]*corev1.Node, error) {
	var nodes []*corev1.Node
	if len(s.names) == 0 {
		list, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: s.selector})
		if err != nil {
			return nil, fmt.Errorf("listing nodes: %w", err)
		}
		for i := range list.Items {
			nodes = append(nodes, &list.Items[i])
		}
	} else {
		var missing []string
		names := slices.Clone(s.names)
		slices.Sort(names)
		for _, name := range slices.Compact(names) {
			node, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				missing = append(missing, name)
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("getting node %q: %w", name, err)
			}
			nodes = append(nodes, node)
		}
		if len(missing) > 0 {
			sortNodes(nodes)
			return nodes, errNodesMissing{names: missing}
		}
	}
	sortNodes(nodes)
	return nodes, nil
}

func sortNodes(nodes []*corev1.Node) {
	slices.SortFunc(nodes, func(a, b *corev1.Node) int { return strings.Compare(a.Name, b.Name) })
}

// noNodesError says that a selection matched nothing, in terms of the
// selection.
func (s nodeSelection) noNodesError() error {
	if s.selector == "" {
		return errors.New("no nodes found")
	}
	return fmt.Errorf("no nodes match the selector %q", s.selector)
}

// resolveConfigMap reads a CONFIGMAP argument: "namespace/name", or "name"
// in the namespace of -n or of the kubeconfig context. The result is checked
// as the assignment annotation would be.
func (e *env) resolveConfigMap(arg string) (contract.ConfigMapRef, error) {
	namespace, explicit, err := e.namespace()
	if err != nil {
		return contract.ConfigMapRef{}, fmt.Errorf("reading the namespace from the kubeconfig: %w", err)
	}
	value := arg
	if ns, _, qualified := strings.Cut(arg, "/"); qualified {
		if explicit && ns != namespace {
			return contract.ConfigMapRef{}, usagef("ConfigMap %q names namespace %q but -n says %q", arg, ns, namespace)
		}
	} else {
		value = namespace + "/" + arg
	}
	ref, ok, err := contract.ParseConfigSource(value)
	if err == nil && !ok {
		err = errors.New("empty")
	}
	if err != nil {
		return contract.ConfigMapRef{}, usagef("invalid ConfigMap %q (want NAMESPACE/NAME, or NAME with -n): %w", arg, err)
	}
	return ref, nil
}
