// Package scale measures what kubelets' routine traffic costs with nodeguard
// installed, as shipped and with the opt-in minimum-version authorization,
// and what happens to it, and to the writes nodeguard judges, while the
// webhook is down.
//
// Run (cmd/scale, `make scale`) starts, for each mode, a real etcd and
// kube-apiserver on loopback, configured from manifests/ as they are at run
// time (never a copy): in modes shipped, min-version and webhook-down through
// test/e2e/framework.Start (the authorization chain of manifests/control-plane,
// in min-version its opt-in authorization-config-min-kubelet-version.yaml,
// the ValidatingWebhookConfiguration of manifests/base pointed at a local
// webhook process, the webhook with the shipped NodeguardPolicy, Rego policies
// and the Deployment's tuning flags); in mode none with the shipped
// authorization chain minus nodeguard's entry and no ValidatingWebhookConfiguration,
// so that nodeguard is in neither chain. It then runs N simulated kubelets in
// this process, each with its own node client certificate from the control
// plane's CA, which, like a real kubelet:
//
//   - registers its Node (a CREATE with its node credentials, with
//     status.nodeInfo.kubeletVersion set) and creates its Lease in
//     kube-node-lease, owned by the Node;
//   - renews the Lease every period (an UPDATE of renewTime, from the last
//     Lease it wrote, re-read on a conflict);
//   - patches its Node's status every period (or every --status-period): a
//     strategic-merge patch of the conditions' lastHeartbeatTime, with
//     $setElementOrder, as the kubelet sends it;
//   - keeps a watch on its own Node (fieldSelector metadata.name=NAME).
//
// A tenth of the nodes (--config-fraction) are assigned a kubelet
// configuration by the admin (an eligible ConfigMap in kubelet-configs, the
// nodeguard.dev/config-source annotation on their Node) and read it with their
// node credentials: a get by name, then a named watch, as the agent does.
//
// Each node's lease and status timers start at its own offset in the period
// (lease at i/N of it, status half a period later), so the load is steady
// rather than in bursts. After --warmup, a --window is measured: the latency
// and errors of every lease renewal and status patch started in it; webhook
// calls per second per endpoint from the webhook's own
// nodeguard_http_requests_total (scraped before and after the window), and
// the calls the apiserver made to it from the apiserver's metrics; CPU
// (utime+stime of /proc/PID/stat) and RSS of the webhook, kube-apiserver,
// etcd and this process. In mode webhook-down the webhook is killed after the
// warm-up, --down-settle before the window, and stays down for all of it;
// after the window an assignment and an edit of the eligible ConfigMap are
// tried (Outage: both must be refused naming nodeguard), then the webhook is
// started again and both, and a new reader, must go through.
//
// How the simulation differs from real kubelets:
//
//   - One process, one HTTP/2 connection per simulated kubelet carrying all of
//     its requests and watches (a real kubelet has one or a few connections
//     too, but its own process, its own CPU, and a real network between it
//     and the apiserver). Everything runs on one machine, loopback only, so
//     the harness's own CPU competes with the apiserver's and the webhook's:
//     read the figures as ratios between modes of the same run.
//   - The status patch is sent every period, whatever changed, unless
//     --status-period says otherwise. A real kubelet with leases computes its
//     status every nodeStatusUpdateFrequency (10s) but patches it only when
//     something changed or nodeStatusReportFrequency (5 min by default) has
//     passed, so every period is the worst case of a cluster whose nodes'
//     status keeps changing, and --status-period=5m a quiet one. The patch
//     is small: no images, no volumes, four conditions.
//   - No GET of the Node before each status patch (the kubelet reads it from
//     the apiserver's cache first), no pods, no pod status, no event
//     recording, no certificate rotation, no CSINode, no node informer's
//     list: only the routine writes and watches named above.
//   - The webhook runs without the Deployment's GOGC (test/e2e/framework
//     starts it with this process's environment), on one replica, and with
//     framework's shutdown flags, so that killing it is immediate.
//   - In mode none the assigned nodes do not read their configuration: with
//     no nodeguard there is no assignment to read (the Node authorizer
//     refuses it), so only lease, status and Node watch traffic are compared.
//
// # Rollouts
//
// RunRollout (cmd/scale --rollout, `make rollout-scale`; issue 13, "Speed
// and scale") measures a KubeletConfigRollout instead. On one cluster with
// nodeguard as shipped it runs the fleet above (heartbeats and Node watches
// as background) and beside every kubelet a simulated agent: it watches its
// own Node and, on a change of nodeguard.dev/config-source, reads the
// ConfigMap by name with the node's credentials and reports it through
// pkg/nodeagent/status's own Reporter (the annotation and the
// KubeletConfigReady condition in one patch of nodes/status), assigned and active with
// TrialInProgress, then after its trial last-known-good with ConfigActive.
// cmd/rollout-controller runs as its own process (test/e2e/framework) with
// its ServiceAccount's token, which a loopback proxy in front of it (HTTPS and HTTP/2, as the
// apiserver serves) adds, so
// that the proxy counts the controller's requests alone: the apiserver's
// apiserver_request_total has no user label, and the controller's own
// rest_client_requests_total counts by method and code, not by resource.
// Its rest_client_rate_limiter_duration_seconds, read at the end, gives
// the requests its own client-side rate limit held back, its Events'
// creates (POST, paced by --event-qps on purpose) apart. The harness judges every Node itself from one watch
// of all Nodes, by pkg/rollout's rules, never from the controller's status:
// when it was assigned and when it reached Updated, how often it was
// assigned, and how many Nodes were unavailable at once. A reaction is the
// gap from a Node reaching Updated to the next assignment, paired first in,
// first out. Its peer in the same run is the apiserver's share: from an
// agent sending the write that makes its Node Updated to the harness's
// watch showing it, one write and one watch delivery, where a reaction
// holds a write and two deliveries besides the controller's own work. The
// proxy also times each Node patch on the wire, which splits a reaction in
// three (reactions.go): the update seen until the controller sent the patch
// (its own watch delivery, its queue, the sync in progress, and the patch's
// wait for its window and the client's rate limit), the patch's round trip
// (admission, the nodeguard
// webhook's review among it, and the write), and its answer until the
// harness's watch showed it. The first part mixes the controller's work
// with how much later (or sooner) its own watch was given the update than
// the harness's, so the report gives the controller's own share apart: the
// proxy taps the controller's Node watches (watchtap.go: protobuf, as
// client-go's typed clients ask for them, gzipped by the apiserver when
// they start with a list), decoding every event as it passes with
// client-go's own watch decoder, and records each Node's name and
// resourceVersion with when the proxy passed the event on. The controller's own share of
// a reaction is from the proxy passing it the watch event of an update
// (the resourceVersion at which the harness judged the Node Updated)
// until its patch of the next Node was on the wire: its queue, its sync,
// its wait for its caches, all on the proxy's clock and free of either
// watch's delivery; the report gives it also to the controller's first
// patch of the Node, before a write that moved what its decision read
// had it patched again, and as the controller times it itself
// (nodeguard_rollout_reaction_seconds: from its Node informer handing
// over the pass to its sending the next assignment, so without either
// leg through the proxy). The proxy runs in a process of its own
// (test/scale/cmd/countproxy), apart from the harness's simulated fleet,
// and the harness reads what it recorded over a control endpoint. These
// pairs are made on the controller's own
// timeline, first in, first out by when the proxy passed it each update
// and received each patch: the two watches deliver the same updates in
// different orders, and a pairing in the harness's order can charge a
// patch to an update the controller had not been given yet. When the controller was never given that resourceVersion (its
// watch skipped past it, or it relisted) the first later one it was given
// counts, and the report says how many pairs matched exactly, later, or
// not at all (left out). Beside it, its watch delivery against the
// harness's: when the proxy passed the update minus when the harness's
// watch showed it, negative when the controller's came first. The
// decoding runs in the proxy's process, off the stream's path: the
// proxy hands a copy of each chunk to a decoder goroutine and forwards the
// chunk at once, waiting only if the decoder falls thousands of chunks
// behind. The apiserver's and the webhook's own
// histograms, read before and after, give the mean validating-webhook call
// as each side timed it. The simulated agents never fail a trial, download
// nothing but the ConfigMap's identity and restart no kubelet; their trial
// report carries the phase TrialInProgress, as the real agent's does.
//
// Under a rollout the simulated kubelets renew their Lease every 10 s and
// patch their status as often up to 1,000 Nodes; above, the status every
// 5 minutes (the kubelet's default nodeStatusReportFrequency, a quiet
// cluster), and the lease period grows with the pool (10 s x Nodes /
// 1,000: 50 s at 5,000) so that the fleet renews no more Leases a second
// than 1,000 kubelets do at the default, 100 (RolloutPeriods; --period
// and --status-period set them instead). The controller runs with the
// shipped Lease timings (15 s, renewed within 10 s, retried every 2 s),
// not test/e2e/framework's short ones. A simulated agent whose read of
// the target is refused (nodeguard's graph has not seen the assignment
// yet) retries after client-go's reflector backoff (0.8 s doubling), as
// the agent's informer does; the report counts those retries. Every Node keeps two named watches of itself, its
// kubelet's and its agent's, as on a real node; the agents start a hundred
// at a time, each hundred once the one before has reported, so that the
// rollout starts from the steady state and not from a start-up storm. Each
// simulated kubelet has its own ECDSA P-256 client certificate, issued by
// the control plane's CA at start. The report prints the periods and
// watches of the run.
//
// --api-priority installs manifests/components/api-priority with
// nodeguard, as an operator adds it to an overlay: the controller's own
// priority level at the apiserver. The proxy tallies the controller's
// requests by the priority level that served them (the apiserver's
// X-Kubernetes-PF-PriorityLevel-UID on every answer), and counts those
// answered 429. --controller-nice sets the nice value of every thread of
// the controller and the proxy once they run: on this machine they share
// two cores with the control plane and the simulated fleet, which a
// controller in a cluster does not, and the time they wait for a CPU
// behind those would otherwise count as the controller's own share. The
// report says which of the two a run had.
//
// --drain makes the rollout drain-class (spec.drain: Always, written on
// each assignment as nodeguard.dev/drain). A simulated agent given such an
// assignment drains as the real agent's reconciler does (drain.go), with
// pkg/nodeagent/drain's own Drainer and the node's credentials: it cordons
// (spec.unschedulable and nodeguard.dev/cordoned in one merge patch
// conditioned on the Node's resourceVersion), lists the pods bound to its
// Node (none: the harness runs no pods, so --drain-time stands for their
// evictions), reports the phase Draining (reason Draining, the target
// assigned, the previous configuration still active) for --drain-time,
// then reports the trial; when the trial passes it lifts the cordon and
// then reports ConfigActive. The real agent's Restarting report between
// the drain and the trial is left out. The harness's judge counts a Node
// unavailable while its agent reports any phase, as pkg/rollout does, and
// checks that every Node was seen cordoned and Draining, never judged
// available while cordoned, and released by the end; the report prints
// those counts. A wave on the critical path is then the drain time plus
// the trial.
//
// The report gives, beside the figures above, the rollout's total over the
// waves on its critical path (1 is a controller and an apiserver that cost
// nothing), a floor the apiserver puts under it (each wave's trial, and
// drain, plus one write seen through a watch at the run's write-to-watch
// p99: a wave ends with its slowest Node, and each Node's path holds two
// such writes, its assignment reaching its agent and its agent's report
// of the passed trial reaching the controller), the total over that
// floor, whether the floor allows a total within 1.10x of the trials, and the controller's CPU-seconds per 1,000 Nodes moved.
// --controller-binary runs a cmd/rollout-controller built elsewhere (the
// tree before a change) in place of this tree's, with the same flags, so
// that two builds are measured by one harness in one window.
package scale
