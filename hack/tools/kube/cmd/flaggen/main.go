// Command flaggen writes the table of the kubelet's command-line flags that
// set a KubeletConfiguration field (pkg/kubeletconfig/effective), from the
// kubelet's own flag registration (k8s.io/kubernetes/cmd/kubelet/app/options,
// AddKubeletConfigFlags) rather than from a hand-kept list: each flag is set
// on a defaulted configuration, and the fields of its
// kubelet.config.k8s.io/v1beta1 form that change say which field the flag
// sets.
package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/format"
	"io"
	"os"
	"reflect"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	kubeletconfigv1beta1 "k8s.io/kubelet/config/v1beta1"
	"k8s.io/kubernetes/cmd/kubelet/app/options"
	kubeletconfig "k8s.io/kubernetes/pkg/kubelet/apis/config"
	kubeletscheme "k8s.io/kubernetes/pkg/kubelet/apis/config/scheme"

	"github.com/nodeguard/nodeguard/hack/tools/kube/internal/generator"
)

// candidates are the values tried on each flag, in order, until one is
// accepted and changes the configuration: something of every type the
// kubelet's configuration flags take (booleans, numbers, durations, IPs,
// maps in their three spellings, taints, memory reservations, headers,
// enumerations checked at parse time).
var candidates = []string{
	"true", "false", "7", "7s", "7.7.7.7", "7.7.7.7:7",
	"nodeguard=7", "memory.available<7Mi", "NodeguardGate=true", "0:memory=7Mi",
	"nodeguard=7:NoSchedule", "nodeguard:7", "json", "text", "x=7",
	"TLS_AES_128_GCM_SHA256", "VersionTLS13", "nodeguard",
}

func main() {
	err := generator.Main("flaggen", os.Args[1:], os.Stdout, func() ([]byte, error) {
		source, err := generator.KubernetesVersion()
		if err != nil {
			return nil, err
		}
		table, err := flagTable()
		if err != nil {
			return nil, err
		}
		return render(fmt.Sprintf("%s v%s", generator.KubernetesModule, source), table)
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "flaggen:", err)
		os.Exit(1)
	}
}

// flagTable maps each configuration field a flag sets (its JSON path in
// kubelet.config.k8s.io/v1beta1, dot-separated) to the flag's name.
func flagTable() (map[string]string, error) {
	base, err := options.NewKubeletConfiguration()
	if err != nil {
		return nil, err
	}
	before, err := versioned(base)
	if err != nil {
		return nil, err
	}
	names := pflag.NewFlagSet("names", pflag.ContinueOnError)
	options.AddKubeletConfigFlags(names, base.DeepCopy())
	table := map[string]string{}
	var unmapped []string
	names.VisitAll(func(f *pflag.Flag) {
		path, ok, err := fieldOf(base, before, f.Name)
		switch {
		case err != nil:
			unmapped = append(unmapped, fmt.Sprintf("%s (%v)", f.Name, err))
		case !ok:
			unmapped = append(unmapped, f.Name)
		default:
			if other, taken := table[path]; taken {
				// A deprecated spelling of the same field: keep the one
				// the kubelet's documentation shows, the shorter.
				if len(other) <= len(f.Name) {
					return
				}
			}
			table[path] = f.Name
		}
	})
	if len(unmapped) > 0 {
		slices.Sort(unmapped)
		return nil, fmt.Errorf("flags whose field was not found (add a candidate value they accept): %s", strings.Join(unmapped, ", "))
	}
	return table, nil
}

// fieldOf sets the flag to each candidate on a fresh copy of base until one
// changes the configuration, and returns the field that changed.
func fieldOf(base *kubeletconfig.KubeletConfiguration, before map[string]any, name string) (string, bool, error) {
	for _, value := range candidates {
		cfg := base.DeepCopy()
		fs := pflag.NewFlagSet("try", pflag.ContinueOnError)
		fs.SetOutput(io.Discard)
		options.AddKubeletConfigFlags(fs, cfg)
		if err := fs.Set(name, value); err != nil {
			continue
		}
		after, err := versioned(cfg)
		if err != nil {
			return "", false, err
		}
		var changed [][]string
		diff(nil, before, after, &changed)
		if len(changed) == 0 {
			continue
		}
		return strings.Join(truncateAtMap(commonPrefix(changed)), "."), true, nil
	}
	return "", false, nil
}

// versioned is the configuration as kubelet.config.k8s.io/v1beta1 JSON,
// decoded into maps: the form /configz serves and the agent compares.
func versioned(cfg *kubeletconfig.KubeletConfiguration) (map[string]any, error) {
	scheme, _, err := kubeletscheme.NewSchemeAndCodecs()
	if err != nil {
		return nil, err
	}
	out := &kubeletconfigv1beta1.KubeletConfiguration{}
	if err := scheme.Convert(cfg, out, nil); err != nil {
		return nil, err
	}
	data, err := json.Marshal(out)
	if err != nil {
		return nil, err
	}
	var fields map[string]any
	return fields, json.Unmarshal(data, &fields)
}

// diff appends the paths of the leaves that differ between a and b.
func diff(path []string, a, b any, changed *[][]string) {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if !aok || !bok {
		if !reflect.DeepEqual(a, b) {
			*changed = append(*changed, slices.Clone(path))
		}
		return
	}
	keys := map[string]bool{}
	for k := range am {
		keys[k] = true
	}
	for k := range bm {
		keys[k] = true
	}
	for k := range keys {
		diff(append(path, k), am[k], bm[k], changed)
	}
}

func commonPrefix(paths [][]string) []string {
	prefix := paths[0]
	for _, p := range paths[1:] {
		n := 0
		for n < len(prefix) && n < len(p) && prefix[n] == p[n] {
			n++
		}
		prefix = prefix[:n]
	}
	return prefix
}

// truncateAtMap cuts a path where it enters a map: a flag sets the whole
// map (or adds to it), never the key the candidate value happened to name.
func truncateAtMap(path []string) []string {
	t := reflect.TypeFor[kubeletconfigv1beta1.KubeletConfiguration]()
	for i, name := range path {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct {
			return path[:i]
		}
		field, ok := jsonField(t, name)
		if !ok {
			return path[:i]
		}
		t = field.Type
	}
	return path
}

func jsonField(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous && tag == "" {
			if inner, ok := jsonField(f.Type, name); ok {
				return inner, true
			}
			continue
		}
		if tag == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

func render(source string, table map[string]string) ([]byte, error) {
	paths := make([]string, 0, len(table))
	for path := range table {
		paths = append(paths, path)
	}
	slices.Sort(paths)
	var b bytes.Buffer
	fmt.Fprintf(&b, "// Code generated by flaggen from %s. DO NOT EDIT.\n\npackage effective\n\n", source)
	fmt.Fprintf(&b, "// flagSource is the release the table was read from.\nconst flagSource = %q\n\n", source)
	b.WriteString("// kubeletFlags maps a KubeletConfiguration field (its v1beta1 JSON path,\n// dot-separated) to the kubelet command-line flag that sets it, as\n// AddKubeletConfigFlags registers them; a flag wins over every file.\nvar kubeletFlags = map[string]string{\n")
	for _, path := range paths {
		fmt.Fprintf(&b, "\t%q: %q,\n", path, table[path])
	}
	b.WriteString("}\n")
	return format.Source(b.Bytes())
}
