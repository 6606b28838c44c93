package policy

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/topdown"
)

// Package names as they appear in Violation.Package.
const (
	PackageAdmission = "nodeguard.admission"
	PackageAuthz     = "nodeguard.authz"
)

// Violation is one message from a policy. A policy returns either a string
// (Rule stays empty) or an object {"msg": string, "rule": string, "scope":
// "node"}; other keys are ignored. Anything else is kept, rendered as JSON,
// so that a malformed message still counts.
type Violation struct {
	// Package is PackageAdmission or PackageAuthz.
	Package string
	// Rule is the name the policy gave itself in "rule", if any.
	Rule    string
	Message string
	// NodeScoped is set by "scope": "node": the denial concerns the
	// target Node's own state (its labels, what it reports), not what is
	// assigned to it, so a rollout skips that Node instead of failing its
	// pool. Any other scope, or none, leaves it false: the denial then
	// counts against the configuration, the safe reading.
	NodeScoped bool
}

// ScopeNode is the "scope" of a node-scoped violation.
const ScopeNode = "node"

// AdmissionResult is what the admission policies said. Both lists are
// sorted by rule, then message.
type AdmissionResult struct {
	Deny []Violation
	Warn []Violation
}

// Denied reports whether any policy denied the request.
func (r AdmissionResult) Denied() bool { return len(r.Deny) > 0 }

// AuthzResult is what the authorization policies said. A deny wins over
// allow; with neither, the policies have no opinion.
type AuthzResult struct {
	Deny  []Violation
	Allow bool
}

// Denied reports whether any policy denied the request.
func (r AuthzResult) Denied() bool { return len(r.Deny) > 0 }

// Allowed reports whether the policies allow the request: allow is true and
// nothing denies it.
func (r AuthzResult) Allowed() bool { return r.Allow && len(r.Deny) == 0 }

// EvalError is a failed evaluation: a timeout, a cancelled context, a
// conflict or error inside a policy, or a result of the wrong type. Callers
// map it through a FailurePolicy.
type EvalError struct {
	Package string
	// Timeout is true when the engine's timeout or the caller's deadline
	// ended the evaluation.
	Timeout bool
	Err     error
}

func (e *EvalError) Error() string {
	if e.Timeout {
		return fmt.Sprintf("evaluating %s policies: timed out: %v", e.Package, e.Err)
	}
	return fmt.Sprintf("evaluating %s policies: %v", e.Package, e.Err)
}

func (e *EvalError) Unwrap() error { return e.Err }

// EvalAdmission evaluates data.nodeguard.admission.deny and .warn for one
// admission review. A set without admission rules answers at once.
func (e *Engine) EvalAdmission(ctx context.Context, in *AdmissionInput) (AdmissionResult, error) {
	set := e.active.Load()
	if set == nil {
		return AdmissionResult{}, &EvalError{Package: PackageAdmission, Err: ErrNotReady}
	}
	if !set.hasAdmission {
		return AdmissionResult{}, nil
	}
	input, err := in.Value()
	if err != nil {
		return AdmissionResult{}, &EvalError{Package: PackageAdmission, Err: fmt.Errorf("building input: %w", err)}
	}
	var result AdmissionResult
	err = e.eval(ctx, set.admission, input, PackageAdmission, func(bindings rego.Vars) (err error) {
		if result.Deny, err = violations(bindings["deny"], PackageAdmission, "deny"); err != nil {
			return err
		}
		result.Warn, err = violations(bindings["warn"], PackageAdmission, "warn")
		return err
	})
	if err != nil {
		return AdmissionResult{}, err
	}
	return result, nil
}

// EvalAuthz evaluates data.nodeguard.authz.deny and .allow for one
// SubjectAccessReview. A set without authorization rules answers at once.
func (e *Engine) EvalAuthz(ctx context.Context, in *AuthzInput) (AuthzResult, error) {
	set := e.active.Load()
	if set == nil {
		return AuthzResult{}, &EvalError{Package: PackageAuthz, Err: ErrNotReady}
	}
	if !set.hasAuthz {
		return AuthzResult{}, nil
	}
	input, err := in.Value()
	if err != nil {
		return AuthzResult{}, &EvalError{Package: PackageAuthz, Err: fmt.Errorf("building input: %w", err)}
	}
	var result AuthzResult
	err = e.eval(ctx, set.authz, input, PackageAuthz, func(bindings rego.Vars) (err error) {
		if result.Deny, err = violations(bindings["deny"], PackageAuthz, "deny"); err != nil {
			return err
		}
		allow, defined := bindings["allow"]
		if !defined {
			return nil
		}
		var ok bool
		if result.Allow, ok = allow.(bool); !ok {
			return fmt.Errorf("data.nodeguard.authz.allow must be a boolean, got %s", jsonString(allow))
		}
		return nil
	})
	if err != nil {
		return AuthzResult{}, err
	}
	return result, nil
}

// eval runs one prepared query under the engine's timeout and the caller's
// deadline, and hands its bindings to convert, which rejects a result of
// the wrong shape.
func (e *Engine) eval(ctx context.Context, q rego.PreparedEvalQuery, input ast.Value, pkg string, convert func(rego.Vars) error) (err error) {
	start := time.Now()
	defer func() { e.metrics.evaluated(pkg, start, outcomeOf(err)) }()
	if ctxErr := ctx.Err(); ctxErr != nil {
		return &EvalError{Package: pkg, Timeout: true, Err: ctxErr}
	}
	evalCtx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	rs, err := q.Eval(evalCtx, rego.EvalParsedInput(input))
	switch {
	case err != nil:
		timeout := evalCtx.Err() != nil || topdown.IsCancel(err) || errors.Is(err, context.DeadlineExceeded)
		if timeout && ctx.Err() == nil {
			err = fmt.Errorf("%w (after the engine's timeout of %s)", err, e.timeout)
		}
		return &EvalError{Package: pkg, Timeout: timeout, Err: err}
	case len(rs) != 1:
		// Sets are always defined and allow has a default, so only an
		// evaluation that produced several answers gets here.
		return &EvalError{Package: pkg, Err: fmt.Errorf("expected one result, got %d", len(rs))}
	}
	if convErr := convert(rs[0].Bindings); convErr != nil {
		return &EvalError{Package: pkg, Err: convErr}
	}
	return nil
}

func outcomeOf(err error) string {
	var evalErr *EvalError
	switch {
	case err == nil:
		return outcomeOK
	case errors.As(err, &evalErr) && evalErr.Timeout:
		return outcomeTimeout
	default:
		return outcomeError
	}
}

// violations converts a deny or warn set (a JSON array once out of Rego);
// nil is a rule the set does not define.
func violations(v any, pkg, rule string) ([]Violation, error) {
	if v == nil {
		return nil, nil
	}
	items, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("data.%s.%s must be a set, got %s", pkg, rule, jsonString(v))
	}
	if len(items) == 0 {
		return nil, nil
	}
	out := make([]Violation, 0, len(items))
	for _, item := range items {
		out = append(out, violationOf(item, pkg))
	}
	slices.SortFunc(out, func(a, b Violation) int {
		return cmp.Or(cmp.Compare(a.Rule, b.Rule), cmp.Compare(a.Message, b.Message))
	})
	return out, nil
}

func violationOf(item any, pkg string) Violation {
	switch x := item.(type) {
	case string:
		return Violation{Package: pkg, Message: x}
	case map[string]any:
		if msg, ok := x["msg"].(string); ok {
			rule, _ := x["rule"].(string)
			scope, _ := x["scope"].(string)
			return Violation{Package: pkg, Rule: rule, Message: msg, NodeScoped: scope == ScopeNode}
		}
	}
	return Violation{Package: pkg, Message: jsonString(item)}
}

func jsonString(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	return string(b)
}

// FailurePolicy says what an evaluation error means for a review.
type FailurePolicy int

const (
	// FailClosed turns an evaluation error into a denial.
	FailClosed FailurePolicy = iota
	// NoOpinion drops the policies' say: the built-in rules decide alone.
	NoOpinion
)

// The failure policies nodeguard applies. Admission fails closed, as a
// validating webhook with failurePolicy Fail does. Authorization has no
// opinion, as its webhook entry (failurePolicy NoOpinion) does: a broken
// policy must not lock every node out of the apiserver.
const (
	AdmissionFailurePolicy = FailClosed
	AuthzFailurePolicy     = NoOpinion
)

func (p FailurePolicy) String() string {
	switch p {
	case FailClosed:
		return "FailClosed"
	case NoOpinion:
		return "NoOpinion"
	default:
		return fmt.Sprintf("FailurePolicy(%d)", int(p))
	}
}
