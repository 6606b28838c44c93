package policy

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestAbsentPackagesAnswerNothing(t *testing.T) {
	admissionOnly := map[string]string{"a.rego": denyAll}
	authzOnly := map[string]string{"a.rego": "package nodeguard.authz\n\nallow if input.nodeguard.node == \"n\"\n"}
	helperOnly := map[string]string{"a.rego": "package nodeguard.admission\n\nhelper := 1\n"}

	e, _ := newEngine(t, admissionOnly, Options{})
	az, err := e.EvalAuthz(context.Background(), &AuthzInput{Spec: configMapRead("u", nil, "ns", "n")})
	if err != nil || az.Denied() || az.Allowed() {
		t.Errorf("authz without an authz package = %+v, %v; want nothing", az, err)
	}

	e, _ = newEngine(t, authzOnly, Options{})
	// The input is never rendered when no admission rule exists, so even a
	// malformed object costs nothing.
	adm, err := e.EvalAdmission(context.Background(), &AdmissionInput{Request: configMapRequest("CREATE", "ns", "n", `{not json`)})
	if err != nil || adm.Denied() || len(adm.Warn) > 0 {
		t.Errorf("admission without an admission package = %+v, %v; want nothing", adm, err)
	}
	az, err = e.EvalAuthz(context.Background(), &AuthzInput{Spec: configMapRead("system:node:n", nil, "ns", "n"), Node: "n"})
	if err != nil || !az.Allowed() {
		t.Errorf("authz allow = %+v, %v; want allowed", az, err)
	}
	az, err = e.EvalAuthz(context.Background(), &AuthzInput{Spec: configMapRead("u", nil, "ns", "n")})
	if err != nil || az.Allowed() || az.Denied() {
		t.Errorf("authz with allow undefined = %+v, %v; want nothing", az, err)
	}

	e, _ = newEngine(t, helperOnly, Options{})
	if set := e.active.Load(); set == nil || set.hasAdmission {
		t.Errorf("a package with no deny or warn counts as admission rules")
	}
}

func TestMessageForms(t *testing.T) {
	policy := `package nodeguard.admission

deny contains "plain string"

deny contains {"msg": "with rule", "rule": "r1", "extra": [1]}

deny contains {"msg": "without rule"}

deny contains {"no": "msg"}

deny contains 42

deny contains {"msg": "about the node", "rule": "r3", "scope": "node"}

deny contains {"msg": "another scope", "rule": "r4", "scope": "cluster"}

warn contains {"msg": "careful", "rule": "r2"}
`
	e, _ := newEngine(t, map[string]string{"p.rego": policy}, Options{})
	res, err := e.EvalAdmission(context.Background(), &AdmissionInput{Request: configMapRequest("CREATE", "ns", "n", `{}`)})
	if err != nil {
		t.Fatal(err)
	}
	wantDeny := []Violation{
		{Package: PackageAdmission, Message: "42"},
		{Package: PackageAdmission, Message: "plain string"},
		{Package: PackageAdmission, Message: "without rule"},
		{Package: PackageAdmission, Message: `{"no":"msg"}`},
		{Package: PackageAdmission, Rule: "r1", Message: "with rule"},
		{Package: PackageAdmission, Rule: "r3", Message: "about the node", NodeScoped: true},
		{Package: PackageAdmission, Rule: "r4", Message: "another scope"},
	}
	if !reflect.DeepEqual(res.Deny, wantDeny) {
		t.Errorf("deny =\n%+v\nwant\n%+v", res.Deny, wantDeny)
	}
	wantWarn := []Violation{{Package: PackageAdmission, Rule: "r2", Message: "careful"}}
	if !reflect.DeepEqual(res.Warn, wantWarn) {
		t.Errorf("warn = %+v, want %+v", res.Warn, wantWarn)
	}
	if got, want := policyName(res.Deny[4]), "policy nodeguard.admission/r1"; got != want {
		t.Errorf("policyName = %q, want %q", got, want)
	}
	if got, want := policyName(res.Deny[1]), "policy nodeguard.admission"; got != want {
		t.Errorf("policyName = %q, want %q", got, want)
	}
}

func TestEvalErrors(t *testing.T) {
	tests := []struct {
		name   string
		policy string
		want   string
	}{
		{
			name:   "allow not boolean",
			policy: "package nodeguard.authz\n\nallow := \"yes\"\n",
			want:   "allow must be a boolean",
		},
		{
			name: "conflicting allow",
			policy: `package nodeguard.authz

allow := true if input.spec.user == "u"

allow := false if input.spec.user == "u"
`,
			want: "eval_conflict_error",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, _ := newEngine(t, map[string]string{"p.rego": tt.policy}, Options{})
			_, err := e.EvalAuthz(context.Background(), &AuthzInput{Spec: configMapRead("u", nil, "ns", "n")})
			var evalErr *EvalError
			if !errors.As(err, &evalErr) || evalErr.Timeout || evalErr.Package != PackageAuthz {
				t.Fatalf("err = %#v, want a non-timeout *EvalError for %s", err, PackageAuthz)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to mention %q", err, tt.want)
			}
		})
	}
}

func TestBadInputIsAnError(t *testing.T) {
	readsObject := "package nodeguard.admission\n\ndeny contains \"x\" if input.request.object.metadata.name == \"x\"\n"
	e, _ := newEngine(t, map[string]string{"p.rego": readsObject}, Options{})
	for _, in := range []*AdmissionInput{
		nil,
		{},
		{Request: configMapRequest("CREATE", "ns", "n", `{"unterminated": `)},
		{Request: configMapRequest("CREATE", "ns", "n", `{"metadata": {"name": tru}}`)},
	} {
		_, err := e.EvalAdmission(context.Background(), in)
		var evalErr *EvalError
		if !errors.As(err, &evalErr) || !strings.Contains(err.Error(), "building input") {
			t.Errorf("EvalAdmission(%+v) = %v, want an input error", in, err)
		}
	}
	if _, err := e.EvalAuthz(context.Background(), &AuthzInput{}); err != nil {
		t.Errorf("EvalAuthz with no authz rules = %v, want nothing to do", err)
	}
}

// slowPolicy iterates 10^10 times: no machine finishes it before a timeout.
const slowPolicy = `package nodeguard.authz

deny contains "never" if {
	some i in numbers.range(1, 100000)
	some j in numbers.range(1, 100000)
	i * j < 0
}
`

func TestTimeouts(t *testing.T) {
	e, _ := newEngine(t, map[string]string{"slow.rego": slowPolicy}, Options{Timeout: 20 * time.Millisecond})
	in := &AuthzInput{Spec: configMapRead("u", nil, "ns", "n")}

	_, err := e.EvalAuthz(context.Background(), in)
	var evalErr *EvalError
	if !errors.As(err, &evalErr) || !evalErr.Timeout {
		t.Fatalf("slow policy under the engine's timeout: %v, want a timeout", err)
	}

	// The caller's deadline counts as well.
	e, _ = newEngine(t, map[string]string{"slow.rego": slowPolicy}, Options{Timeout: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = e.EvalAuthz(ctx, in)
	if !errors.As(err, &evalErr) || !evalErr.Timeout {
		t.Fatalf("slow policy under a cancelled context: %v, want a timeout", err)
	}
}

func TestFailurePolicies(t *testing.T) {
	if AdmissionFailurePolicy != FailClosed || AuthzFailurePolicy != NoOpinion {
		t.Error("the documented failure policies changed")
	}
}

// TestConcurrentEvalAndReload is for -race: evaluations run while the set
// is swapped under them, and each sees one whole set or the other.
func TestConcurrentEvalAndReload(t *testing.T) {
	// A generous timeout: on a loaded machine a starved goroutine must not
	// turn into a failure this test is not about.
	e, dir := newEngine(t, map[string]string{"p.rego": denyAll}, Options{Graph: &fakeGraph{}, Timeout: time.Minute})
	ctx, cancel := context.WithCancel(testContext(t))
	defer cancel()

	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			in := &AdmissionInput{Request: configMapRequest("CREATE", "ns", fmt.Sprint(w), `{}`)}
			for ctx.Err() == nil {
				res, err := e.EvalAdmission(context.Background(), in)
				if err != nil {
					errs <- err
					return
				}
				if len(res.Deny) != 1 || (res.Deny[0].Message != "first" && res.Deny[0].Message != "second") {
					errs <- fmt.Errorf("mixed or missing result: %+v", res)
					return
				}
			}
		}()
	}
	for i := range 20 {
		content := denyAll
		if i%2 == 0 {
			content = denyAllV2
		}
		writeFiles(t, dir, map[string]string{"p.rego": content})
		if err := e.Reload(ctx); err != nil {
			t.Fatal(err)
		}
	}
	cancel()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
