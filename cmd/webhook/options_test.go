package main

import (
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/nodeguard/nodeguard/pkg/policy"
	"github.com/nodeguard/nodeguard/pkg/server"
)

func validOptions() *Options {
	o := NewOptions()
	o.TLSCertFile, o.TLSPrivateKeyFile = "tls.crt", "tls.key"
	return o
}

// TestValidate parses flags as the command line would and checks what
// Validate says of them.
func TestValidate(t *testing.T) {
	for _, tt := range []struct {
		name   string
		args   []string
		errors []string // each must appear in some error; none means valid
	}{
		{"defaults", nil, nil},

		// Policies.
		{"every policy value", []string{"--policy-dir=/p", "--policy-data=/d.yaml", "--policy-eval-timeout=250ms",
			"--admission-policy-failure=ignore", "--authz-policy-failure=deny", "--decision-log=all", "--decision-log-sample=0.01"}, nil},
		{"zero timeout", []string{"--policy-eval-timeout=0s"}, []string{"--policy-eval-timeout 0s"}},
		{"huge timeout", []string{"--policy-eval-timeout=1m"}, []string{"at most 30s"}},
		{"admission failure names the authorization value", []string{"--admission-policy-failure=no-opinion"}, []string{"--admission-policy-failure \"no-opinion\": want fail-closed or ignore"}},
		{"authorization failure names the admission value", []string{"--authz-policy-failure=fail-closed"}, []string{"--authz-policy-failure \"fail-closed\": want no-opinion or deny"}},
		{"decision log", []string{"--decision-log=verbose"}, []string{"--decision-log: unknown decision log mode \"verbose\""}},
		{"sample above one", []string{"--decision-log-sample=1.5"}, []string{"--decision-log-sample 1.5"}},
		{"negative sample", []string{"--decision-log-sample=-0.1"}, []string{"--decision-log-sample -0.1"}},
		{"JSON to the apiserver", []string{"--kube-api-content-type=application/json"}, nil},
		{"an unknown content type", []string{"--kube-api-content-type=application/cbor"}, []string{"--kube-api-content-type \"application/cbor\""}},
		{"exempt namespaces", []string{"--exempt-namespaces=kube-system,nodeguard-system"}, nil},
		{"nothing exempt", []string{"--exempt-namespaces="}, nil},
		{"an empty exempt namespace", []string{"--exempt-namespaces=a,,b"}, []string{"--exempt-namespaces[1]: empty namespace name"}},
		{"every policy problem at once", []string{"--policy-eval-timeout=-1s", "--admission-policy-failure=x", "--authz-policy-failure=y", "--decision-log=z"},
			[]string{"--policy-eval-timeout", "--admission-policy-failure", "--authz-policy-failure", "--decision-log"}},

		// Overload.
		{"every in-flight value", []string{"--max-authorize-in-flight=1", "--max-validate-in-flight=2", "--max-queued-reviews=0", "--max-queue-wait=0s"}, nil},
		{"longest wait", []string{"--max-queue-wait=30s"}, nil},
		{"no authorize slot", []string{"--max-authorize-in-flight=0"}, []string{"--max-authorize-in-flight 0: must be at least 1"}},
		{"no validate slot", []string{"--max-validate-in-flight=-1"}, []string{"--max-validate-in-flight -1: must be at least 1"}},
		{"negative queue", []string{"--max-queued-reviews=-1"}, []string{"--max-queued-reviews -1"}},
		{"negative wait", []string{"--max-queue-wait=-1s"}, []string{"--max-queue-wait -1s"}},
		{"wait past any apiserver timeout", []string{"--max-queue-wait=31s"}, []string{"--max-queue-wait 31s: must be between 0 and 30s"}},
		{"every overload problem at once", []string{"--max-authorize-in-flight=0", "--max-validate-in-flight=0", "--max-queued-reviews=-5", "--max-queue-wait=1m"},
			[]string{"--max-authorize-in-flight", "--max-validate-in-flight", "--max-queued-reviews", "--max-queue-wait"}},

		// Graph staleness.
		{"staleness off", []string{"--graph-stale-after=0s"}, nil},
		{"shortest staleness", []string{"--graph-stale-after=1s"}, nil},
		{"long staleness", []string{"--graph-stale-after=10m"}, nil},
		{"below a watch re-establishing", []string{"--graph-stale-after=500ms"}, []string{"--graph-stale-after 500ms: must be 0 (off) or at least 1s"}},
		{"negative staleness", []string{"--graph-stale-after=-1s"}, []string{"--graph-stale-after -1s"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := validOptions()
			fs := pflag.NewFlagSet("webhook", pflag.ContinueOnError)
			o.AddFlags(fs)
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			errs := o.Validate()
			if len(errs) != len(tt.errors) {
				t.Errorf("Validate() = %v, want %d errors", errs, len(tt.errors))
			}
			for _, want := range tt.errors {
				found := false
				for _, err := range errs {
					found = found || strings.Contains(err.Error(), want)
				}
				if !found {
					t.Errorf("Validate() = %v, want an error mentioning %q", errs, want)
				}
			}
		})
	}
}

func TestGraphStaleAfterDefault(t *testing.T) {
	if got := NewOptions().GraphStaleAfter; got != 30*time.Second {
		t.Fatalf("--graph-stale-after defaults to %v, the docs and manifests say 30s", got)
	}
}

func TestInFlightDefaultsAreUsable(t *testing.T) {
	o := NewOptions()
	for _, limit := range []server.InFlightLimit{
		o.inFlightLimit(o.MaxAuthorizeInFlight, server.ShedSubjectAccessReview),
		o.inFlightLimit(o.MaxValidateInFlight, server.ShedAdmissionReview),
	} {
		if err := limit.Validate(); err != nil || limit.MaxQueued == 0 || limit.MaxWait == 0 {
			t.Fatalf("default limit %+v: %v, want a usable limit that queues", limit, err)
		}
	}
}

func TestValidateRejectsNaNSample(t *testing.T) {
	o := validOptions()
	o.DecisionLogSample = math.NaN()
	if errs := o.Validate(); len(errs) != 1 {
		t.Fatalf("Validate() = %v, want the sample refused", errs)
	}
}

func TestDefaultsMatchTheEngine(t *testing.T) {
	o := NewOptions()
	if o.PolicyEvalTimeout != time.Second || o.AdmissionPolicyFailure != "fail-closed" || o.AuthzPolicyFailure != "no-opinion" || o.DecisionLog != "off" {
		t.Fatalf("defaults = %+v", o)
	}
	admissionFailure, _ := admissionFailurePolicy(o.AdmissionPolicyFailure)
	authzFailure, _ := authzFailurePolicy(o.AuthzPolicyFailure)
	if admissionFailure.String() != "FailClosed" || authzFailure.String() != "NoOpinion" {
		t.Fatalf("default failure policies = %v, %v", admissionFailure, authzFailure)
	}
}

func TestLoadPolicyData(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tt := range []struct {
		name    string
		path    string
		want    map[string]any
		wantErr string
	}{
		{"none", "", nil, ""},
		{"yaml", write("d.yaml", "allowed_namespaces: [kubelet-configs, infra]\n"),
			map[string]any{"allowed_namespaces": []any{"kubelet-configs", "infra"}}, ""},
		// The webhook never judges kube-system (namespaceSelector): allowing
		// kubelet configurations there would skip every content check.
		{"an exempt namespace allowed", write("exempt.yaml", "allowed_namespaces: [kube-system, infra]\n"), nil,
			"allowed_namespaces names kube-system, which the admission webhook does not judge"},
		{"allowed_namespaces not a list", write("str.yaml", "allowed_namespaces: infra\n"), nil, "must be a list of namespace names"},
		{"json", write("d.json", `{"allowed_namespaces": ["infra"], "limit": 3}`),
			map[string]any{"allowed_namespaces": []any{"infra"}, "limit": "3"}, ""},
		{"missing", filepath.Join(dir, "missing.yaml"), nil, "no such file"},
		{"a list", write("list.yaml", "- kube-system\n"), nil, "must hold one object"},
		{"empty", write("empty.yaml", ""), nil, "must hold one object"},
		{"not YAML", write("bad.yaml", "a: [b\n"), nil, "not JSON or YAML"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := loadPolicyData(tt.path, policy.DefaultExemptNamespaces())
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.want == nil {
				if got != nil {
					t.Fatalf("data = %v, want none", got)
				}
				return
			}
			config := got["nodeguard"].(map[string]any)["config"].(map[string]any)
			if limit, ok := config["limit"]; ok {
				config["limit"] = limit.(interface{ String() string }).String()
			}
			if !reflect.DeepEqual(config, tt.want) {
				t.Fatalf("data.nodeguard.config = %#v, want %#v", config, tt.want)
			}
		})
	}
}

// TestPolicyConfigIsSettings: the flag's old name still sets the settings
// file, and help shows only --settings.
func TestPolicyConfigIsSettings(t *testing.T) {
	for _, arg := range []string{"--settings=/etc/s.yaml", "--policy-config=/etc/s.yaml"} {
		o := validOptions()
		fs := pflag.NewFlagSet("webhook", pflag.ContinueOnError)
		o.AddFlags(fs)
		if err := fs.Parse([]string{arg}); err != nil {
			t.Fatal(err)
		}
		if o.Settings != "/etc/s.yaml" {
			t.Errorf("%s: Settings = %q", arg, o.Settings)
		}
		if usage := fs.FlagUsages(); strings.Contains(usage, "policy-config") || !strings.Contains(usage, "--settings") {
			t.Errorf("help shows --policy-config, or not --settings:\n%s", usage)
		}
	}
}
