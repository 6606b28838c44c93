package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/kustomize/api/hasher"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/nodeguard/nodeguard/pkg/contract"
	"github.com/nodeguard/nodeguard/pkg/kubeletconfig"
)

// maxConfigBytes is the apiserver's limit on a ConfigMap's data.
const maxConfigBytes = 1 << 20

type createOptions struct {
	file   string
	dryRun string
	output string
}

func newCreateCommand(e *env) *cobra.Command {
	o := &createOptions{}
	cmd := &cobra.Command{
		Use:   "create NAME --from-file=FILE",
		Short: "Create a kubelet configuration as an immutable ConfigMap named after its content",
		Long: `Create an eligible ConfigMap holding the KubeletConfiguration in FILE ("-" for
standard input) under the "kubelet" key, in the namespace of -n or of the
kubeconfig context. It is immutable (immutable: true) and named NAME-HASH,
HASH being a hash of its name and content as kustomize's configMapGenerator
computes it, so that every revision is a ConfigMap of its own: assign the new
name to roll a change out, and the previous one to roll it back.

Why: nodeguard revokes a node's access to a ConfigMap when its assignment or
label goes away, but a watch the node already has open keeps delivering the
ConfigMap's edits (the apiserver authorizes a watch when it starts), and a
single write that removes the label and changes the data is readable until
the apiserver's cached answer expires. A ConfigMap that can never change has
nothing more to deliver. See docs/security.md.

FILE is decoded strictly and validated first, as the admission webhook will.
Creating the same content under the same NAME again changes nothing.`,
		Example: `  # Create, then assign the printed name
  kubectl nodeguard create pool-blue --from-file=pool-blue.yaml -n kubelet-configs
  kubectl nodeguard assign kubelet-configs/pool-blue-7g5h2m9kbt -l nodeguard.dev/pool=blue
  # In a script
  ref=$(kubectl nodeguard create pool-blue --from-file=pool-blue.yaml -n kubelet-configs -o name)
  kubectl nodeguard assign "$ref" -l nodeguard.dev/pool=blue`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usagef("give the ConfigMap's base NAME, and the configuration with --from-file")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.validate(); err != nil {
				return err
			}
			return runCreate(cmd, e, o, args[0])
		},
	}
	cmd.Flags().StringVar(&o.file, "from-file", "", `File holding the KubeletConfiguration (YAML or JSON); "-" reads standard input`)
	cmd.Flags().StringVar(&o.dryRun, "dry-run", dryRunNone, `"none" creates; "client" prints what would be created, sending nothing; "server" sends it with dryRun=All, so the apiserver and nodeguard's admission webhook judge it without anything being written. --dry-run alone means "client"`)
	cmd.Flags().Lookup("dry-run").NoOptDefVal = dryRunClient
	cmd.Flags().StringVarP(&o.output, "output", "o", "", `"name" prints only NAMESPACE/NAME of the ConfigMap`)
	return cmd
}

func (o *createOptions) validate() error {
	switch {
	case o.file == "":
		return usagef("--from-file is required")
	case o.dryRun != dryRunNone && o.dryRun != dryRunClient && o.dryRun != dryRunServer:
		return usagef("invalid --dry-run %q: use none, client or server", o.dryRun)
	case o.output != "" && o.output != "name":
		return usagef("invalid --output %q: the only format is name", o.output)
	}
	return nil
}

func runCreate(cmd *cobra.Command, e *env, o *createOptions, base string) error {
	namespace, _, err := e.namespace()
	if err != nil {
		return fmt.Errorf("reading the namespace from the kubeconfig: %w", err)
	}
	content, err := readConfigFile(o.file, e.streams.In)
	if err != nil {
		return err
	}
	cm, err := immutableConfigMap(namespace, base, content)
	if err != nil {
		return err
	}
	ref := cm.Namespace + "/" + cm.Name
	out := cmd.OutOrStdout()
	if o.dryRun == dryRunClient {
		return report(out, o, ref, "would be created (dry run, client): nothing was sent")
	}
	client, err := e.client()
	if err != nil {
		return err
	}
	opts := metav1.CreateOptions{FieldManager: fieldManager}
	if o.dryRun == dryRunServer {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	_, err = client.CoreV1().ConfigMaps(cm.Namespace).Create(cmd.Context(), cm, opts)
	switch {
	case err == nil && o.dryRun == dryRunServer:
		return report(out, o, ref, "accepted by the server (dry run): nothing was written")
	case err == nil:
		return report(out, o, ref, "created")
	case apierrors.IsAlreadyExists(err):
		existing, getErr := client.CoreV1().ConfigMaps(cm.Namespace).Get(cmd.Context(), cm.Name, metav1.GetOptions{})
		if getErr != nil {
			return fmt.Errorf("ConfigMap %s exists, and reading it failed: %w", ref, getErr)
		}
		if !sameRevision(existing, cm) {
			return fmt.Errorf("ConfigMap %s exists with other content or settings; it was not made by this command", ref)
		}
		return report(out, o, ref, "unchanged")
	case apierrors.IsForbidden(err) || apierrors.IsInvalid(err):
		return fmt.Errorf("%w: creating ConfigMap %s: %w", errRefused, ref, err)
	}
	return fmt.Errorf("creating ConfigMap %s: %w", ref, err)
}

func report(out io.Writer, o *createOptions, ref, outcome string) error {
	if o.output == "name" {
		_, err := fmt.Fprintln(out, ref)
		return err
	}
	_, err := fmt.Fprintf(out, "configmap/%s: %s\nassign it with: kubectl nodeguard assign %s (NODE... | -l SELECTOR)\n", ref, outcome, ref)
	return err
}

func readConfigFile(path string, stdin io.Reader) (string, error) {
	var r io.Reader
	if path == "-" {
		r = stdin
	} else {
		f, err := os.Open(path)
		if err != nil {
			return "", fmt.Errorf("reading --from-file: %w", err)
		}
		defer f.Close()
		r = f
	}
	data, err := io.ReadAll(io.LimitReader(r, maxConfigBytes+1))
	if err != nil {
		return "", fmt.Errorf("reading --from-file %s: %w", path, err)
	}
	if len(data) > maxConfigBytes {
		return "", fmt.Errorf("--from-file %s: more than %d bytes, the apiserver's limit for a ConfigMap", path, maxConfigBytes)
	}
	return string(data), nil
}

// immutableConfigMap builds the eligible, immutable ConfigMap for content,
// named base-HASH, after checking content as the webhook and the agent will.
func immutableConfigMap(namespace, base, content string) (*corev1.ConfigMap, error) {
	cm := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: base, Labels: map[string]string{contract.EligibleLabel: contract.EligibleLabelValue}},
		Data:       map[string]string{contract.ConfigMapKey: content},
	}
	cfg, err := kubeletconfig.DecodeConfigMapKey(cm, contract.ConfigMapKey)
	if err != nil {
		return nil, fmt.Errorf("the file does not hold a KubeletConfiguration the webhook accepts: %w", err)
	}
	if invalid := kubeletconfig.Validate(cfg); len(invalid) > 0 {
		return nil, fmt.Errorf("the file holds an invalid KubeletConfiguration, which the agent would refuse to apply: %v", kubeletconfig.Summarize(invalid))
	}
	hash, err := contentHash(cm)
	if err != nil {
		return nil, err
	}
	cm.Name = base + "-" + hash
	if errs := validation.IsDNS1123Subdomain(cm.Name); len(errs) > 0 {
		return nil, usagef("invalid NAME %q: %s", base, strings.Join(errs, "; "))
	}
	immutable := true
	cm.Immutable = &immutable
	return cm, nil
}

// contentHash is kustomize's configMapGenerator suffix for cm: a hash of its
// kind, name and data.
func contentHash(cm *corev1.ConfigMap) (string, error) {
	encoded, err := json.Marshal(cm)
	if err != nil {
		return "", fmt.Errorf("encoding the ConfigMap: %w", err)
	}
	node, err := kyaml.Parse(string(encoded))
	if err != nil {
		return "", fmt.Errorf("hashing the ConfigMap: %w", err)
	}
	hash, err := (&hasher.Hasher{}).Hash(node)
	if err != nil {
		return "", fmt.Errorf("hashing the ConfigMap: %w", err)
	}
	if hash == "" {
		return "", errors.New("hashing the ConfigMap: empty hash")
	}
	return hash, nil
}

// sameRevision reports whether existing is the ConfigMap this command would
// create as want.
func sameRevision(existing, want *corev1.ConfigMap) bool {
	return existing.Immutable != nil && *existing.Immutable && contract.IsEligible(existing.Labels) &&
		maps.Equal(existing.Data, want.Data) && len(existing.BinaryData) == 0
}
