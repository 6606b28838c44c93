package opacompare

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/util/version"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"

	"github.com/nodeguard/nodeguard/pkg/admission"
	"github.com/nodeguard/nodeguard/pkg/authz"
	"github.com/nodeguard/nodeguard/pkg/graph"
	"github.com/nodeguard/nodeguard/pkg/policy"
	"github.com/nodeguard/nodeguard/pkg/server"
	"github.com/nodeguard/nodeguard/pkg/settings"
	"github.com/nodeguard/nodeguard/test/loadtest"
	"github.com/nodeguard/nodeguard/test/loadtest/cluster"
)

// Endpoints are where the nodeguard process serves, written by Serve as
// one JSON line on its standard output.
type Endpoints struct {
	// Authorize and Validate are /authorize and /validate with the shipped
	// policies, as cmd/webhook serves them.
	Authorize string `json:"authorize"`
	Validate  string `json:"validate"`
	// PolicyAuthz and PolicyAdmission take the stock server's request and
	// answer as it does, from nodeguard's engine alone: the policy part.
	PolicyAuthz     string `json:"policyAuthz"`
	PolicyAdmission string `json:"policyAdmission"`
	// FloorAuthorize and FloorValidate read the body and answer a fixed
	// review, on the same kind of server in the same process: what
	// loopback TLS and HTTP allow at most, whatever the decision costs.
	FloorAuthorize string `json:"floorAuthorize"`
	FloorValidate  string `json:"floorValidate"`
	// CertFile and KeyFile are the serving certificate, which the stock
	// server uses too.
	CertFile string `json:"certFile"`
	KeyFile  string `json:"keyFile"`
	// PID is the serving process, filled in by the parent.
	PID int `json:"-"`
}

// world is the graph and policy engine both processes build alike.
type world struct {
	cluster *cluster.Cluster
	graph   *graph.Graph
	engine  *policy.Engine
}

func buildWorld(ctx context.Context, shape cluster.Shape) (*world, error) {
	c, err := cluster.Generate(shape)
	if err != nil {
		return nil, err
	}
	g := graph.New(nil)
	for _, n := range c.Nodes {
		g.UpsertNode(n)
	}
	for _, cm := range c.ConfigMaps {
		g.UpsertConfigMap(cm)
	}
	for _, p := range c.Pods {
		g.UpsertPod(p)
	}
	eligible := cluster.PoolConfigMap(validateNamespace, validateName, "maxPods: 110\n")
	g.UpsertConfigMap(&eligible.ObjectMeta)
	g.MarkSynced()
	engine, err := policy.New(ctx, policy.Options{Graph: g})
	if err != nil {
		return nil, fmt.Errorf("policy engine: %w", err)
	}
	if err := engine.Ready(); err != nil {
		return nil, fmt.Errorf("shipped policies: %w", err)
	}
	return &world{cluster: c, graph: g, engine: engine}, nil
}

// Serve runs nodeguard's side in this process, so that it gets a process
// of its own as the stock server does (a server sharing the load
// generator's process and Go runtime would be at a disadvantage): it
// serves until ctx ends, after writing its Endpoints to out.
func Serve(ctx context.Context, shape cluster.Shape, dir string, out io.Writer) error {
	w, err := buildWorld(ctx, shape)
	if err != nil {
		return err
	}
	certDir := filepath.Join(dir, "certs")
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", certDir, err)
	}
	authorizer := authz.New(w.graph, version.MustParseGeneric("1.35.0"))
	servers, err := loadtest.Start(ctx, certDir, authorizer, &policy.AuthzPolicies{Engine: w.engine, Graph: w.graph, FailurePolicy: policy.AuthzFailurePolicy})
	if err != nil {
		return err
	}
	defer func() { _ = servers.Close() }()
	ep := Endpoints{Authorize: servers.PoliciesURL, CertFile: filepath.Join(certDir, "tls.crt"), KeyFile: filepath.Join(certDir, "tls.key")}

	tlsConfig, err := server.NewDynamicTLS(server.TLSFiles{CertFile: ep.CertFile, KeyFile: ep.KeyFile})
	if err != nil {
		return fmt.Errorf("loading serving certificate: %w", err)
	}
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	if err := indexer.Add(cluster.PoolConfigMap(validateNamespace, validateName, "maxPods: 110\n")); err != nil {
		return fmt.Errorf("filling the ConfigMap lister: %w", err)
	}
	s := settings.Default()
	admitter := admission.New(func() *settings.Settings { return s }, corelisters.NewConfigMapLister(indexer), w.graph)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("listening on loopback: %w", err)
	}
	srv, err := server.New(server.Config{Listener: l, TLS: tlsConfig, Registry: prometheus.NewRegistry(), ShutdownTimeout: 5 * time.Second})
	if err != nil {
		_ = l.Close()
		return fmt.Errorf("building the /validate server: %w", err)
	}
	// Wired as cmd/webhook wires it.
	srv.HandleReview("/validate", server.Validate(admitter,
		&policy.AdmissionPolicies{Engine: w.engine, Graph: w.graph, FailurePolicy: policy.AdmissionFailurePolicy}, 7<<20))
	srv.Handle(opaAuthzPath, policyAuthzHandler(w.engine))
	srv.Handle(opaAdmissionPath, policyAdmissionHandler(w.engine))
	srv.Handle(floorAuthorizePath, loadtest.FloorHandler(loadtest.FloorResponse))
	srv.Handle(floorValidatePath, loadtest.FloorHandler(loadtest.AdmissionFloorResponse))
	base := "https://" + l.Addr().String()
	ep.FloorAuthorize, ep.FloorValidate = base+floorAuthorizePath, base+floorValidatePath
	ep.Validate = base + "/validate?timeout=10s"
	ep.PolicyAuthz, ep.PolicyAdmission = base+opaAuthzPath, base+opaAdmissionPath

	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	if err := json.NewEncoder(out).Encode(ep); err != nil {
		return fmt.Errorf("writing endpoints: %w", err)
	}
	return <-done
}

// The floors' paths; they answer loadtest's floor responses.
const (
	floorAuthorizePath = "/floor/authorize"
	floorValidatePath  = "/floor/validate"
)

// policyAnswer is the stock server's answer shape.
type policyAnswer struct {
	Result any `json:"result"`
}

func violationsJSON(vs []policy.Violation) []policyMessage {
	out := make([]policyMessage, 0, len(vs))
	for _, v := range vs {
		out = append(out, policyMessage{Rule: v.Rule, Msg: v.Message})
	}
	return out
}

func writeAnswer(w http.ResponseWriter, result any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(policyAnswer{Result: result})
}

// policyAuthzHandler answers the stock server's authorization query from
// nodeguard's engine: the input document in, deny and allow out.
func policyAuthzHandler(engine *policy.Engine) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Input struct {
				Spec      authorizationv1.SubjectAccessReviewSpec `json:"spec"`
				Nodeguard struct {
					Node           string `json:"node"`
					KubeletVersion string `json:"kubeletVersion"`
				} `json:"nodeguard"`
			} `json:"input"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		in := &policy.AuthzInput{Spec: &body.Input.Spec, Node: body.Input.Nodeguard.Node, KubeletVersion: body.Input.Nodeguard.KubeletVersion}
		res, err := engine.EvalAuthz(r.Context(), in)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		writeAnswer(w, map[string]any{"deny": violationsJSON(res.Deny), "allow": res.Allow})
	})
}

// policyAdmissionHandler answers the stock server's admission query from
// nodeguard's engine: the input document in, deny and warn out.
func policyAdmissionHandler(engine *policy.Engine) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body struct {
			Input struct {
				Request   admissionv1.AdmissionRequest `json:"request"`
				Nodeguard struct {
					Node             string                                     `json:"node"`
					KubeletVersion   string                                     `json:"kubeletVersion"`
					KubeletConfig    *kubeletconfigv1beta1.KubeletConfiguration `json:"kubeletConfig"`
					OldKubeletConfig *kubeletconfigv1beta1.KubeletConfiguration `json:"oldKubeletConfig"`
				} `json:"nodeguard"`
			} `json:"input"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		ng := body.Input.Nodeguard
		in := &policy.AdmissionInput{Request: &body.Input.Request, Node: ng.Node, KubeletVersion: ng.KubeletVersion,
			KubeletConfig: ng.KubeletConfig, OldKubeletConfig: ng.OldKubeletConfig}
		res, err := engine.EvalAdmission(r.Context(), in)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		writeAnswer(w, map[string]any{"deny": violationsJSON(res.Deny), "warn": violationsJSON(res.Warn)})
	})
}
