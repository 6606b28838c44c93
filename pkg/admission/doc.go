// Package admission decides AdmissionReviews for the /validate endpoint, as
// the admission rules of docs/reference.md say:
//
//  1. own-node: a node writes only its own Node (nodes and nodes/status);
//  2. node-restriction: no node-restriction.kubernetes.io labels, no
//     nodeguard.dev labels (pool membership is the administrator's word),
//     no kubernetes.io / k8s.io labels outside the kubelet's set
//     (contract.NodeMayWriteLabel), no change of taints, ownerReferences or
//     the legacy spec.configSource;
//  3. config-source: a node sets its config-source annotation only where the
//     settings allow self-assignment, and only to an eligible ConfigMap;
//     clearing it is always allowed;
//  4. min-kubelet-version: a node below the minimum may not register;
//  5. feature-gates: an assignment (by anyone) whose config names a gate the
//     node's kubelet does not know, or flips a locked one, is refused;
//  6. config-content: an eligible ConfigMap must hold a valid
//     KubeletConfiguration that sets no field the settings forbid to change
//     dynamically and breaks feature-gates for no node it is assigned to.
//
// Requests from non-nodes are judged by feature-gates and config-content
// only, and users the
// settings exempt skip those two. Beside the contract's rules, the rollout
// selector rule judges everyone who creates a KubeletConfigRollout or
// changes its nodeSelector: the selector must require a label no node can
// set on itself. A refusal is a value naming the rule; one that concerns the
// target Node's own reported state (feature-gates on its kubelet version, a
// node-scoped policy denial) says so in its status causes
// (contract.CauseNodeState), so that a rollout skips that Node rather than
// fail its pool.
//
// Where the in-tree NodeRestriction plugin is off, the standalone manifests
// send every node write NodeRestriction judges here too, and nodeguard holds
// each of its v1.37 rules for nodes (noderestricted.go lists them):
// pods.go (mirror pods and their ownership, deletes, status without label or
// claim changes, evictions), leases.go, csinodes.go, csrs.go,
// resourceslices.go, serviceaccounttokens.go (bound to a pod on the node,
// audiences it uses), pvcstatus.go, podcertificaterequests.go. The few that
// need state the request does not carry read it through a Cluster
// (cluster.go), live from the apiserver. hack/noderestriction-diff checks
// them against the in-tree plugin itself.
//
// DecodeRequest (request.go) decodes a request's objects once, into the API
// types the rules read, refusing a repeated key. Admitter.Admit
// (admitter.go) is the pure decision on that Request: it calls the one
// function of the request's resource, where the rules read in place, and
// returns a Result; it knows nothing of HTTP, of the Rego policies or of
// metrics, which pkg/server's /validate handler adds around it. The rules
// for Node writes are in nodes.go (admitNode), own-node to
// min-kubelet-version in order, and each other rule is in the file named
// after it: featuregates.go, configcontent.go, rollouts.go, and the
// NodeRestriction files above.
package admission
