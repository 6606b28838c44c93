// Package generator is what the code generators of this module share: their
// command line (the file to write, or standard output) and the
// k8s.io/kubernetes release they read, pinned in this module's go.mod.
package generator

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/version"
)

// KubernetesModule is the module the generators read.
const KubernetesModule = "k8s.io/kubernetes"

// Main runs the generator name: it reads -o/--output from args, calls
// generate, and writes its output there (or to stdout for "-"). The caller
// exits non-zero on an error.
func Main(name string, args []string, stdout io.Writer, generate func() ([]byte, error)) error {
	flags := pflag.NewFlagSet(name, pflag.ContinueOnError)
	output := flags.StringP("output", "o", "-", "file to write, or - for stdout")
	if err := flags.Parse(args); err != nil {
		return err
	}
	if flags.NArg() != 0 {
		return fmt.Errorf("unexpected arguments %q", flags.Args())
	}
	src, err := generate()
	if err != nil {
		return err
	}
	if *output == "-" {
		_, err = stdout.Write(src)
		return err
	}
	if err := os.WriteFile(*output, src, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", *output, err)
	}
	return nil
}

// KubernetesVersion reads the pinned k8s.io/kubernetes version from the
// build information, so that a generated file names its source without a
// hand-kept constant.
func KubernetesVersion() (*version.Version, error) {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return nil, errors.New("no build information: build with module support")
	}
	for _, dep := range info.Deps {
		if dep.Path != KubernetesModule {
			continue
		}
		if dep.Replace != nil {
			dep = dep.Replace
		}
		v, err := version.ParseSemantic(dep.Version)
		if err != nil {
			return nil, fmt.Errorf("parsing %s version %q: %w", KubernetesModule, dep.Version, err)
		}
		return v, nil
	}
	return nil, fmt.Errorf("%s is not in the build information", KubernetesModule)
}
