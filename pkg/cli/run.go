package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nodeguard/nodeguard/pkg/generated/clientset/versioned"
	nodeguardclient "github.com/nodeguard/nodeguard/pkg/generated/clientset/versioned/typed/nodeguard/v1alpha1"
)

// Exit codes. A script can tell "the cluster said no" (ExitRefused) from
// "the command could not do its job" (ExitError).
const (
	// ExitOK: the command did what it was asked; for explain, whatever the
	// answer was.
	ExitOK = 0
	// ExitError: bad usage, an object that does not exist, an API error.
	ExitError = 1
	// ExitRefused: assign or unassign refused at least one node, by the
	// client-side checks or by the server (admission or authorization);
	// create refused by the server; rollout undo refused a Node patch.
	ExitRefused = 2
	// ExitRolloutFailed: rollout status found the rollout failed (its
	// Failed condition is True).
	ExitRolloutFailed = 3
)

const exitCodesHelp = `Exit codes:
  0  success (for explain: the question was answered, whatever the answer)
  1  error: bad usage, an object that does not exist, an API error
  2  assign/unassign: at least one node was refused, by the client-side
     checks or by the server; see the output for each node's reason;
     create: the server refused the ConfigMap; rollout undo: the server
     refused a Node's patch
  3  rollout status: the rollout has failed (its Failed condition is True)`

// Client-side rate limits, well under what an apiserver's priority and
// fairness lets one client have.
const (
	clientQPS   = 50
	clientBurst = 100
)

// fieldManager names this plugin in the managedFields of the Nodes and
// rollouts it writes.
const fieldManager = "kubectl-nodeguard"

// env is what the commands need from outside: streams, API clients, the
// namespace in force and a clock. Tests substitute fake clients.
type env struct {
	streams genericiooptions.IOStreams
	client  func() (kubernetes.Interface, error)
	// rollouts reads and patches KubeletConfigRollouts, with the
	// generated clientset of nodeguard.dev (pkg/generated).
	rollouts func() (nodeguardclient.KubeletConfigRolloutInterface, error)
	// namespace returns the namespace of -n or of the kubeconfig context,
	// and whether -n set it.
	namespace func() (namespace string, explicit bool, err error)
	now       func() time.Time
	// poll is how often rollout status --watch and rollout undo read the
	// rollout while they wait on the controller.
	poll time.Duration
}

// Run runs the plugin with args (without the program name) and returns the
// exit code. Output goes to streams; nothing else of the process is touched.
func Run(ctx context.Context, args []string, streams genericiooptions.IOStreams) int {
	configFlags := genericclioptions.NewConfigFlags(true)
	restConfig := func() (*rest.Config, error) {
		cfg, err := configFlags.ToRESTConfig()
		if err != nil {
			return nil, fmt.Errorf("loading the kubeconfig: %w", err)
		}
		cfg.WarningHandlerWithContext = warningHandler{out: streams.ErrOut}
		// assign -l patches one node per request; client-go's default of
		// 5 per second would make a large pool wait on the client.
		cfg.QPS, cfg.Burst = clientQPS, clientBurst
		cfg.UserAgent = fieldManager
		return cfg, nil
	}
	e := &env{
		streams: streams,
		client: func() (kubernetes.Interface, error) {
			cfg, err := restConfig()
			if err != nil {
				return nil, err
			}
			client, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				return nil, fmt.Errorf("building the API client: %w", err)
			}
			return client, nil
		},
		rollouts: func() (nodeguardclient.KubeletConfigRolloutInterface, error) {
			cfg, err := restConfig()
			if err != nil {
				return nil, err
			}
			client, err := versioned.NewForConfig(cfg)
			if err != nil {
				return nil, fmt.Errorf("building the KubeletConfigRollout client: %w", err)
			}
			return client.NodeguardV1alpha1().KubeletConfigRollouts(), nil
		},
		namespace: func() (string, bool, error) {
			return configFlags.ToRawKubeConfigLoader().Namespace()
		},
		now:  time.Now,
		poll: rolloutPollInterval,
	}
	root := newRootCommand(e)
	configFlags.AddFlags(root.PersistentFlags())
	return execute(ctx, root, args, streams)
}

// execute runs a command tree and turns its error into an exit code.
func execute(ctx context.Context, root *cobra.Command, args []string, streams genericiooptions.IOStreams) int {
	root.SetArgs(args)
	root.SetIn(streams.In)
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return ExitOK
	}
	fmt.Fprintf(streams.ErrOut, "error: %v\n", err)
	var usage usageError
	if errors.As(err, &usage) && cmd != nil {
		fmt.Fprintf(streams.ErrOut, "See '%s --help' for usage.\n", cmd.CommandPath())
	}
	if errors.Is(err, errRefused) {
		return ExitRefused
	}
	if errors.Is(err, errRolloutFailed) {
		return ExitRolloutFailed
	}
	return ExitError
}

// usageError is a mistake in the command line, answered with a pointer to
// --help.
type usageError struct{ err error }

func (u usageError) Error() string { return u.err.Error() }
func (u usageError) Unwrap() error { return u.err }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

// errRefused marks an outcome where the cluster, or the checks that stand
// in for it, said no to at least one node.
var errRefused = errors.New("refused")

func newRootCommand(e *env) *cobra.Command {
	root := &cobra.Command{
		Use:   "kubectl-nodeguard",
		Short: "See and change which kubelet configuration each node runs (nodeguard)",
		Long: `kubectl nodeguard shows and changes nodeguard's kubelet configuration
assignments: a node runs the KubeletConfiguration held under the "kubelet" key
of the eligible ConfigMap (label nodeguard.dev/kubelet-config=true) named by
its nodeguard.dev/config-source annotation, and its agent reports what it runs
in the nodeguard.dev/config-status annotation and the KubeletConfigReady
condition.

The usual kubectl flags (--kubeconfig, --context, -n, --as, ...) select the
cluster, the user and the namespace.

` + exitCodesHelp,
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl nodeguard"},
		SilenceUsage:  true,
		SilenceErrors: true,
		// Without a subcommand there is nothing to do but explain.
		Args: func(cmd *cobra.Command, args []string) error {
			if err := cobra.NoArgs(cmd, args); err != nil {
				return usageError{err}
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	root.CompletionOptions.DisableDefaultCmd = true
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.AddCommand(newStatusCommand(e), newCreateCommand(e), newAssignCommand(e), newUnassignCommand(e), newExplainCommand(e), newRolloutCommand(e))
	return root
}
