package manifests

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apiserver/pkg/admission"

	"github.com/nodeguard/nodeguard/pkg/contract"
)

// bookkeepingWrite is an entry of nodeWrites: a write, and whether the
// standalone overlay must send it to the webhook.
type bookkeepingWrite = struct {
	nodeWrite
	standalone bool
}

// bookkeepingWrites are, for every annotation admission keeps nodes from
// writing (contract.BookkeepingAnnotations: the rollout's bookkeeping and
// nodeguard.dev/drain), a node adding, changing and removing it: each must
// reach the webhook, or rule 3 never judges it and the node writes it
// unseen. A node's routine write beside it, and an administrator's (the
// controller's) write of it, need not. Derived from the list, so an
// annotation added to it without its matchCondition fails here.
func bookkeepingWrites() []bookkeepingWrite {
	var out []bookkeepingWrite
	for _, key := range contract.BookkeepingAnnotations {
		with := func(value string) *corev1.Node { return annotated(nodeWith("cfg/a"), key, value) }
		out = append(out,
			bookkeepingWrite{nodeWrite{name: "a node adds " + key, user: kubelet, operation: admission.Update, subresource: "status",
				oldObject: nodeWith("cfg/a"), object: with("x"), wantMatch: true}, true},
			bookkeepingWrite{nodeWrite{name: "a node changes " + key, user: kubelet, operation: admission.Update,
				oldObject: with("x"), object: with("y"), wantMatch: true}, true},
			bookkeepingWrite{nodeWrite{name: "a node empties " + key, user: kubelet, operation: admission.Update,
				oldObject: with("x"), object: with(""), wantMatch: true}, true},
			bookkeepingWrite{nodeWrite{name: "a node removes " + key, user: kubelet, operation: admission.Update, subresource: "status",
				oldObject: with("x"), object: nodeWith("cfg/a"), wantMatch: true}, true},
			bookkeepingWrite{nodeWrite{name: "a node's routine write beside " + key, user: kubelet, operation: admission.Update, subresource: "status",
				oldObject: with("x"), object: heartbeat(with("x"))}, true},
			bookkeepingWrite{nodeWrite{name: "an administrator writes " + key, user: admin, operation: admission.Update,
				oldObject: nodeWith("cfg/a"), object: with("x")}, false},
		)
	}
	return out
}

// quoted are the single-quoted strings of a CEL expression.
var quoted = regexp.MustCompile(`'([^']*)'`)

// checkControllerWritable: the annotations the rollout controller's policy
// lets its token change (its variable writable) are exactly those the
// controller writes, the assignment and contract.BookkeepingAnnotations,
// and a validation confines annotation changes to them. One missing would
// refuse the controller's own patches (a new bookkeeping annotation, the
// drain mode); one more would let a stolen token forge what the agent
// alone writes (its status, its cordon mark).
func checkControllerWritable(policy *admissionregistrationv1.ValidatingAdmissionPolicy) error {
	want := append([]string{contract.ConfigSourceAnnotation}, contract.BookkeepingAnnotations...)
	slices.Sort(want)
	i := slices.IndexFunc(policy.Spec.Variables, func(v admissionregistrationv1.Variable) bool { return v.Name == "writable" })
	if i < 0 {
		return fmt.Errorf("no variable writable: want the list %v", want)
	}
	var got []string
	for _, m := range quoted.FindAllStringSubmatch(policy.Spec.Variables[i].Expression, -1) {
		got = append(got, m[1])
	}
	slices.Sort(got)
	var errs []error
	if !slices.Equal(got, want) {
		errs = append(errs, fmt.Errorf("variable writable lists %v, want the controller's annotations %v", got, want))
	}
	if !slices.ContainsFunc(policy.Spec.Validations, func(v admissionregistrationv1.Validation) bool {
		return strings.Contains(v.Expression, "variables.annotations") && strings.Contains(v.Expression, "k in variables.writable")
	}) {
		errs = append(errs, errors.New("no validation confines the annotations the controller changes to variables.writable"))
	}
	return errors.Join(errs...)
}

// editWritable rewrites the expression of the controller policy's variable
// writable.
func editWritable(t *testing.T, o objects, rewrite func(string) string) {
	t.Helper()
	edit(t, o, "ValidatingAdmissionPolicy", rolloutControllerPolicy, func(p *admissionregistrationv1.ValidatingAdmissionPolicy) {
		for i := range p.Spec.Variables {
			if p.Spec.Variables[i].Name == "writable" {
				before := p.Spec.Variables[i].Expression
				if p.Spec.Variables[i].Expression = rewrite(before); p.Spec.Variables[i].Expression == before {
					t.Fatalf("the edit left variable writable as it was: %s", before)
				}
			}
		}
	})
}
