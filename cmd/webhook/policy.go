package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/nodeguard/nodeguard/pkg/policy"
	"github.com/nodeguard/nodeguard/pkg/server"
)

// Values of --admission-policy-failure and --authz-policy-failure.
const (
	admissionFailClosed = "fail-closed"
	admissionIgnore     = "ignore"
	authzNoOpinion      = "no-opinion"
	authzDeny           = "deny"
)

// maxPolicyEvalTimeout is above any webhook timeout the apiserver allows
// (30s): a longer evaluation could never be answered.
const maxPolicyEvalTimeout = 30 * time.Second

func admissionFailurePolicy(s string) (policy.FailurePolicy, error) {
	switch s {
	case admissionFailClosed:
		return policy.FailClosed, nil
	case admissionIgnore:
		return policy.NoOpinion, nil
	}
	return 0, fmt.Errorf("--admission-policy-failure %q: want %s or %s", s, admissionFailClosed, admissionIgnore)
}

func authzFailurePolicy(s string) (policy.FailurePolicy, error) {
	switch s {
	case authzNoOpinion:
		return policy.NoOpinion, nil
	case authzDeny:
		return policy.FailClosed, nil
	}
	return 0, fmt.Errorf("--authz-policy-failure %q: want %s or %s", s, authzNoOpinion, authzDeny)
}

func (o *Options) validatePolicyOptions() []error {
	var errs []error
	if o.PolicyEvalTimeout <= 0 || o.PolicyEvalTimeout > maxPolicyEvalTimeout {
		errs = append(errs, fmt.Errorf("--policy-eval-timeout %v: must be positive and at most %v", o.PolicyEvalTimeout, maxPolicyEvalTimeout))
	}
	if _, err := admissionFailurePolicy(o.AdmissionPolicyFailure); err != nil {
		errs = append(errs, err)
	}
	if _, err := authzFailurePolicy(o.AuthzPolicyFailure); err != nil {
		errs = append(errs, err)
	}
	if _, err := server.ParseDecisionLogMode(o.DecisionLog); err != nil {
		errs = append(errs, fmt.Errorf("--decision-log: %w", err))
	}
	// Written so that NaN fails too.
	if !(o.DecisionLogSample >= 0 && o.DecisionLogSample <= 1) {
		errs = append(errs, fmt.Errorf("--decision-log-sample %v: must be between 0 and 1", o.DecisionLogSample))
	}
	return errs
}

// decisionLog is the validated --decision-log and --decision-log-sample.
func (o *Options) decisionLog() server.DecisionLog {
	mode, _ := server.ParseDecisionLogMode(o.DecisionLog)
	return server.DecisionLog{Mode: mode, Sample: o.DecisionLogSample}
}

// loadPolicyData reads --policy-data: a JSON or YAML object that policies
// see as data.nodeguard.config. Nil when no file is given. An
// allowed_namespaces naming an exempt namespace is an error here, at start,
// since the file is never read again (the engine would refuse it too, but
// only by never becoming ready).
func loadPolicyData(path string, exempt []string) (map[string]any, error) {
	if path == "" {
		return nil, nil
	}
	content, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--policy-data: %w", err)
	}
	asJSON, err := utilyaml.ToJSON(content)
	if err != nil {
		return nil, fmt.Errorf("--policy-data %s: not JSON or YAML: %w", path, err)
	}
	var config map[string]any
	dec := json.NewDecoder(bytes.NewReader(asJSON))
	// Numbers stay exact (an int64 port or a large quantity), as OPA keeps
	// them.
	dec.UseNumber()
	if err := dec.Decode(&config); err != nil || config == nil {
		return nil, fmt.Errorf("--policy-data %s: must hold one object, such as 'allowed_namespaces: [kubelet-configs]'", path)
	}
	if namespaces, ok := config[policy.AllowedNamespacesKey]; ok {
		if err := policy.CheckAllowedNamespaces(namespaces, exempt); err != nil {
			return nil, fmt.Errorf("--policy-data %s: %w", path, err)
		}
	}
	return map[string]any{"nodeguard": map[string]any{"config": config}}, nil
}

// policies builds the policy engine and what the two endpoints need of it.
type policies struct {
	engine    *policy.Engine
	admission *policy.AdmissionPolicies
	authz     *policy.AuthzPolicies
}

func newPolicies(ctx context.Context, opts *Options, g policy.GraphReader, registry prometheus.Registerer) (*policies, error) {
	data, err := loadPolicyData(opts.PolicyData, opts.ExemptNamespaces)
	if err != nil {
		return nil, err
	}
	metrics, err := policy.NewMetrics(registry)
	if err != nil {
		return nil, err
	}
	engine, err := policy.New(ctx, policy.Options{
		Dir:   opts.PolicyDir,
		Graph: g,
		Data:  data,
		// Never nil: an empty flag turns the check off.
		ExemptNamespaces: append([]string{}, opts.ExemptNamespaces...),
		Timeout:          opts.PolicyEvalTimeout,
		PollInterval:     opts.PolicyReloadInterval,
		Metrics:          metrics,
	})
	if err != nil {
		return nil, err
	}
	admissionFailure, err := admissionFailurePolicy(opts.AdmissionPolicyFailure)
	if err != nil {
		return nil, err
	}
	authzFailure, err := authzFailurePolicy(opts.AuthzPolicyFailure)
	if err != nil {
		return nil, err
	}
	return &policies{
		engine:    engine,
		admission: &policy.AdmissionPolicies{Engine: engine, Graph: g, FailurePolicy: admissionFailure},
		authz:     &policy.AuthzPolicies{Engine: engine, Graph: g, FailurePolicy: authzFailure},
	}, nil
}

// policyLoadStatus shows in /readyz?verbose a policy set that failed to
// load. Readiness itself is the engine's HealthChecker, which fails only
// until a first set has loaded: after that the last good set keeps serving.
type policyLoadStatus struct{ engine *policy.Engine }

func (s policyLoadStatus) Name() string { return "policies" }

func (s policyLoadStatus) Degraded() string {
	err := s.engine.LoadError()
	if err == nil {
		return ""
	}
	if s.engine.Ready() != nil {
		return fmt.Sprintf("no policy set has loaded yet: %v", err)
	}
	return fmt.Sprintf("the last good policy set (%s) keeps serving: %v", s.engine.Hash(), err)
}
