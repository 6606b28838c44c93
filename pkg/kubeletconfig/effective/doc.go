// Package effective is about the configuration a kubelet runs, as opposed to
// the files it was given. The kubelet's own precedence decides what runs: its
// defaults, then its --config file, then the drop-ins of its --config-dir in
// lexical order (each a JSON merge patch over the result so far), then its
// command-line flags, which win over every file (cmd/kubelet/app/server.go of
// k8s.io/kubernetes). Its /configz shows the result, all of it merged, and
// its /flagz the command line.
//
// Compare says, field by field, whether a kubelet runs what a configuration
// set: every field the configuration sets (the node-local ones left out)
// against the running value, both normalised as the kubelet normalises them
// (durations and quantities as the typed configuration writes them, a field
// set to its zero value as the kubelet's default for it, from
// pkg/kubeletconfig/disruption's table, the cpu reservations that
// reservedSystemCPUs overrides left out). Each Difference names the field,
// both values and, where the agent can tell, what set the running value: a
// drop-in merged after the agent's file, the agent's own file changed behind
// its back, or a flag on the kubelet's command line (named from /flagz and
// the table flaggen reads from the kubelet's flag registration).
//
// Predict says what a kubelet will run once one of its files is replaced:
// the running configuration with the file's fields merged in as the kubelet
// merges them, what the files before it say for the fields it no longer
// sets, and untouched what a later drop-in or a flag decides. It is what
// a change is classified on (pkg/kubeletconfig/disruption), in config and
// drop-in mode alike.
//
//go:generate go run -C ../../../hack/tools/kube ./cmd/flaggen -o ../../../pkg/kubeletconfig/effective/flags_generated.go
package effective
