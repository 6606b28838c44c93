package images_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/google/go-containerregistry/pkg/v1/validate"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/nodeguard/nodeguard/pkg/images"
)

// helpFlag is a flag each program's --help must list: proof that the binary
// in the image is that program and runs.
var helpFlag = map[string]string{
	"webhook":            "--secure-port",
	"agent":              "--state-dir",
	"rollout-controller": "--workers",
}

// TestImages builds the images twice, as `make images` does, and checks
// what they hold, that the two builds agree to the byte, that the component
// renders with kustomize, and that `make push`'s code path pushes them to a
// registry they can be pulled back from.
func TestImages(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	// A loopback registry: go-containerregistry speaks plain HTTP to it.
	reg := strings.TrimPrefix(srv.URL, "http://") + "/nodeguard"
	source := images.SourceInfo{Version: "v1.2.3-test.1", Revision: "0123456789abcdef0123456789abcdef01234567", Epoch: time.Unix(1700000000, 0).UTC()}
	build := func(dir string) []images.Built {
		t.Helper()
		start := time.Now()
		built, err := images.Build(ctx, images.BuildOptions{OutputDir: dir, Registry: reg, Source: source, Jobs: 2, Log: testLog{t}})
		if err != nil {
			t.Fatalf("Build: %v", err)
		}
		t.Logf("built in %s", time.Since(start).Round(time.Second))
		return built
	}

	first := t.TempDir()
	built := build(first)
	if len(built) != 3 {
		t.Fatalf("Build returned %d indexes, want 3", len(built))
	}
	for _, b := range built {
		t.Run("contents/"+b.Program.Name, func(t *testing.T) {
			checkArchive(t, filepath.Join(first, images.ArchiveName(b.Program)), reg, source, b)
		})
	}

	t.Run("reproducible", func(t *testing.T) {
		second := t.TempDir()
		again := build(second)
		for i, b := range built {
			if again[i].Digest != b.Digest {
				t.Errorf("%s: index digest %s, then %s", b.Program.Name, b.Digest, again[i].Digest)
			}
		}
		for _, f := range []string{"webhook.oci.tar", "agent.oci.tar", "rollout-controller.oci.tar", images.DigestsFile, images.ComponentFile, images.ValuesFile} {
			if a, b := fileSum(t, filepath.Join(first, f)), fileSum(t, filepath.Join(second, f)); a != b {
				t.Errorf("%s differs between two builds", f)
			}
		}
	})

	t.Run("component", func(t *testing.T) { checkComponent(t, filepath.Join(first, images.ComponentFile), reg, built) })
	t.Run("values.yaml", func(t *testing.T) {
		data, err := os.ReadFile(filepath.Join(first, images.ValuesFile))
		if err != nil {
			t.Fatal(err)
		}
		var values struct {
			Images map[string]struct{ Repository, Digest, Tag string } `json:"images"`
		}
		if err := yaml.UnmarshalStrict(data, &values); err != nil {
			t.Fatal(err)
		}
		for _, b := range built {
			got := values.Images[b.Program.ValuesKey]
			if ref := got.Repository + "@" + got.Digest; ref != b.DigestReference(reg) || got.Tag != source.Version {
				t.Errorf("images.%s: %+v, want %s tagged %s", b.Program.ValuesKey, got, b.DigestReference(reg), source.Version)
			}
		}
		if len(values.Images) != len(built) {
			t.Errorf("values for %d images, want %d", len(values.Images), len(built))
		}
	})
	t.Run("digests.txt", func(t *testing.T) {
		data, err := os.ReadFile(filepath.Join(first, images.DigestsFile))
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range built {
			want := b.Program.Name + " " + reg + "/" + b.Program.Name + ":" + source.Version + " " + b.Digest.String() +
				" linux/amd64=" + b.Images[0].String() + " linux/arm64/v8=" + b.Images[1].String() + "\n"
			if !strings.Contains(string(data), want) {
				t.Errorf("digests.txt lacks the line %q; it is:\n%s", want, data)
			}
		}
	})
	t.Run("push", func(t *testing.T) { checkPush(t, ctx, first, reg, source, built) })
}

func checkArchive(t *testing.T, path, reg string, source images.SourceInfo, b images.Built) {
	p := b.Program
	a, err := images.OpenArchive(path, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	wantAnn := images.Annotations(p, source)
	if want := reg + "/" + p.Name + ":" + source.Version; a.Reference != want || b.Reference != want {
		t.Errorf("reference %q (Build said %q), want %q", a.Reference, b.Reference, want)
	}
	if got := a.Descriptor.Annotations[images.AnnotationRefName]; got != source.Version {
		t.Errorf("index.json ref.name %q, want %q", got, source.Version)
	}
	if a.Descriptor.Digest != b.Digest || a.Descriptor.MediaType != types.OCIImageIndex {
		t.Errorf("index.json's entry is %s %s, want %s %s", a.Descriptor.MediaType, a.Descriptor.Digest, types.OCIImageIndex, b.Digest)
	}
	im, err := a.Index.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	checkAnnotations(t, "index", im.Annotations, wantAnn)
	wantPlatforms := []string{"linux/amd64", "linux/arm64/v8"}
	if len(im.Manifests) != len(wantPlatforms) {
		t.Fatalf("index lists %d manifests, want %d", len(im.Manifests), len(wantPlatforms))
	}
	for i, desc := range im.Manifests {
		if desc.Platform == nil || desc.Platform.String() != wantPlatforms[i] {
			t.Fatalf("manifest %d is for %v, want %s", i, desc.Platform, wantPlatforms[i])
		}
		if desc.Digest != b.Images[i] {
			t.Errorf("manifest %d digest %s, Build said %s", i, desc.Digest, b.Images[i])
		}
		img, err := a.Index.Image(desc.Digest)
		if err != nil {
			t.Fatal(err)
		}
		checkImage(t, img, *desc.Platform, p, source, wantAnn)
	}
}

func checkImage(t *testing.T, img v1.Image, platform v1.Platform, p images.Program, source images.SourceInfo, wantAnn map[string]string) {
	what := p.Name + " " + platform.String()
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.MediaType != types.OCIManifestSchema1 || m.Config.MediaType != types.OCIConfigJSON {
		t.Errorf("%s: manifest %s with config %s, want OCI media types", what, m.MediaType, m.Config.MediaType)
	}
	checkAnnotations(t, what+" manifest", m.Annotations, wantAnn)
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	wantUser := map[string]string{"webhook": "65532:65532", "agent": "0:0", "rollout-controller": "65532:65532"}[p.Name]
	entry := "/usr/local/bin/" + p.Name
	if cfg.OS != platform.OS || cfg.Architecture != platform.Architecture || cfg.Variant != platform.Variant {
		t.Errorf("%s: config is for %s/%s/%s", what, cfg.OS, cfg.Architecture, cfg.Variant)
	}
	if cfg.Config.User != wantUser || cfg.Config.WorkingDir != "/" || len(cfg.Config.Entrypoint) != 1 || cfg.Config.Entrypoint[0] != entry || len(cfg.Config.Cmd) != 0 {
		t.Errorf("%s: user %q workdir %q entrypoint %q cmd %q, want %q / [%s] []", what, cfg.Config.User, cfg.Config.WorkingDir, cfg.Config.Entrypoint, cfg.Config.Cmd, wantUser, entry)
	}
	if !cfg.Created.Time.Equal(source.Epoch) {
		t.Errorf("%s: created %s, want %s", what, cfg.Created.Time, source.Epoch)
	}
	checkAnnotations(t, what+" labels", cfg.Config.Labels, wantAnn)

	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 {
		t.Fatalf("%s: %d layers, want 1", what, len(layers))
	}
	if mt, _ := layers[0].MediaType(); mt != types.OCILayer {
		t.Errorf("%s: layer media type %s, want %s", what, mt, types.OCILayer)
	}
	binary := readLayer(t, layers[0], what, p.Name, source.Epoch)
	checkELF(t, binary, platform, what)
	if platform.Architecture == runtime.GOARCH && runtime.GOOS == "linux" {
		runHelp(t, binary, p.Name, what)
	}
}

// readLayer checks the layer's entries and returns the path of the binary,
// extracted.
func readLayer(t *testing.T, layer v1.Layer, what, program string, epoch time.Time) string {
	type entry struct {
		mode int64
		dir  bool
	}
	want := map[string]entry{
		"etc/":                     {0o755, true},
		"etc/group":                {0o644, false},
		"etc/passwd":               {0o644, false},
		"tmp/":                     {0o1777, true},
		"usr/":                     {0o755, true},
		"usr/local/":               {0o755, true},
		"usr/local/bin/":           {0o755, true},
		"usr/local/bin/" + program: {0o755, false},
	}
	rc, err := layer.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	binary := filepath.Join(t.TempDir(), program)
	var names []string
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: reading the layer: %v", what, err)
		}
		names = append(names, hdr.Name)
		w, ok := want[hdr.Name]
		switch {
		case !ok:
			t.Errorf("%s: unexpected layer entry %s", what, hdr.Name)
			continue
		case hdr.Mode != w.mode || (hdr.Typeflag == tar.TypeDir) != w.dir:
			t.Errorf("%s: %s has mode %o type %c, want %o dir=%v", what, hdr.Name, hdr.Mode, hdr.Typeflag, w.mode, w.dir)
		case hdr.Uid != 0 || hdr.Gid != 0:
			t.Errorf("%s: %s owned by %d:%d, want 0:0", what, hdr.Name, hdr.Uid, hdr.Gid)
		case !hdr.ModTime.Equal(epoch):
			t.Errorf("%s: %s has mtime %s, want %s", what, hdr.Name, hdr.ModTime, epoch)
		}
		var body bytes.Buffer
		if _, err := io.Copy(&body, tr); err != nil {
			t.Fatal(err)
		}
		switch hdr.Name {
		case "etc/passwd":
			if !strings.Contains(body.String(), "\nnonroot:x:65532:65532:") || !strings.HasPrefix(body.String(), "root:x:0:0:") {
				t.Errorf("%s: /etc/passwd is %q", what, body.String())
			}
		case "etc/group":
			if !strings.Contains(body.String(), "\nnonroot:x:65532:") {
				t.Errorf("%s: /etc/group is %q", what, body.String())
			}
		case "usr/local/bin/" + program:
			if err := os.WriteFile(binary, body.Bytes(), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := 1; i < len(names); i++ {
		if names[i-1] >= names[i] {
			t.Errorf("%s: layer entries not sorted: %q", what, names)
			break
		}
	}
	if len(names) != len(want) {
		t.Errorf("%s: layer holds %q, want the %d entries %v", what, names, len(want), want)
	}
	return binary
}

func checkELF(t *testing.T, binary string, platform v1.Platform, what string) {
	f, err := elf.Open(binary)
	if err != nil {
		t.Fatalf("%s: the binary is not an ELF file: %v", what, err)
	}
	defer f.Close()
	wantMachine := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[platform.Architecture]
	if f.Machine != wantMachine || f.Class != elf.ELFCLASS64 {
		t.Errorf("%s: ELF machine %s class %s, want %s ELFCLASS64", what, f.Machine, f.Class, wantMachine)
	}
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP || prog.Type == elf.PT_DYNAMIC {
			t.Errorf("%s: the binary has a %s program header: not static", what, prog.Type)
		}
	}
	if f.Section(".symtab") != nil {
		t.Errorf("%s: the binary has a symbol table: not built with -s", what)
	}
}

func runHelp(t *testing.T, binary, program, what string) {
	out, err := exec.Command(binary, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("%s --help: %v\n%s", what, err, out)
	}
	if flag := helpFlag[program]; !strings.Contains(string(out), flag) || !strings.Contains(string(out), "Usage: "+program) {
		t.Errorf("%s --help does not print its usage with %s:\n%s", what, flag, out)
	}
}

func checkAnnotations(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %s is %q, want %q", what, k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%s: %d annotations %v, want %d", what, len(got), got, len(want))
	}
}

// checkComponent renders a tiny overlay with the component, as an operator's
// overlay of manifests/ would use it.
func checkComponent(t *testing.T, path, reg string, built []images.Built) {
	component, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fsys := filesys.MakeFsInMemory()
	files := map[string]string{
		"/images/kustomization.yaml": string(component),
		"/app/kustomization.yaml":    "resources: [deployment.yaml]\ncomponents: [../images]\n",
		"/app/deployment.yaml": `apiVersion: apps/v1
kind: Deployment
metadata: {name: webhook}
spec:
  selector: {matchLabels: {app: webhook}}
  template:
    metadata: {labels: {app: webhook}}
    spec:
      containers:
        - {name: webhook, image: nodeguard-webhook}
        - {name: agent, image: nodeguard-agent:v0.1.0}
`,
	}
	for name, data := range files {
		if err := fsys.WriteFile(name, []byte(data)); err != nil {
			t.Fatal(err)
		}
	}
	resources, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(fsys, "/app")
	if err != nil {
		t.Fatalf("kustomize build of an overlay using the component: %v", err)
	}
	out, err := resources.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	var dep struct {
		Spec struct {
			Template struct {
				Spec struct {
					Containers []struct{ Image string } `json:"containers"`
				} `json:"spec"`
			} `json:"template"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(out, &dep); err != nil {
		t.Fatal(err)
	}
	want := []string{built[0].DigestReference(reg), built[1].DigestReference(reg)}
	if built[0].Program.Name != "webhook" || built[1].Program.Name != "agent" {
		t.Fatalf("Build's order is %s, %s; the test expects webhook, agent", built[0].Program.Name, built[1].Program.Name)
	}
	c := dep.Spec.Template.Spec.Containers
	if len(c) != 2 || c[0].Image != want[0] || c[1].Image != want[1] {
		t.Errorf("rendered images %+v, want %q; output:\n%s", c, want, out)
	}

	// An overlay over that one moves the images to a mirror: the digest
	// stays (docs/images.md, "Another registry").
	mirror := "mirror.example/nodeguard/webhook"
	if err := fsys.WriteFile("/mirror/kustomization.yaml", []byte("resources: [../app]\nimages:\n  - {name: "+images.Repository(reg, built[0].Program)+", newName: "+mirror+"}\n")); err != nil {
		t.Fatal(err)
	}
	resources, err = krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(fsys, "/mirror")
	if err != nil {
		t.Fatalf("kustomize build of a mirror overlay: %v", err)
	}
	if out, err = resources.AsYaml(); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(out, &dep); err != nil {
		t.Fatal(err)
	}
	if c := dep.Spec.Template.Spec.Containers; len(c) != 2 || c[0].Image != mirror+"@"+built[0].Digest.String() {
		t.Errorf("mirrored images %+v, want %s@%s", c, mirror, built[0].Digest)
	}
}

func checkPush(t *testing.T, ctx context.Context, dir, reg string, source images.SourceInfo, built []images.Built) {
	if _, err := images.Push(ctx, images.PushOptions{OutputDir: t.TempDir(), Registry: reg}); err == nil || !strings.Contains(err.Error(), "make images") {
		t.Errorf("Push of an empty directory: %v, want an error telling to run make images", err)
	}
	if _, err := images.Push(ctx, images.PushOptions{OutputDir: dir, Registry: "registry.example/other"}); err == nil || !strings.Contains(err.Error(), "was built for "+reg+"/webhook") {
		t.Errorf("Push to another registry: %v, want a refusal naming %s", err, reg)
	}
	if _, err := images.Push(ctx, images.PushOptions{OutputDir: dir, Registry: reg, Version: "v9.9.9"}); err == nil || !strings.Contains(err.Error(), "version "+source.Version) {
		t.Errorf("Push of another version: %v, want a refusal naming %s", err, source.Version)
	}
	pushed, err := images.Push(ctx, images.PushOptions{OutputDir: dir, Registry: reg, Version: source.Version, Log: testLog{t}})
	if err != nil {
		t.Fatalf("Push: %v", err)
	}
	if len(pushed) != len(built) {
		t.Fatalf("pushed %d indexes, want %d", len(pushed), len(built))
	}
	for i, b := range built {
		if pushed[i].Digest != b.Digest || pushed[i].Reference != b.Reference {
			t.Errorf("pushed %s@%s, want %s@%s", pushed[i].Reference, pushed[i].Digest, b.Reference, b.Digest)
		}
		tag, err := name.NewTag(b.Reference)
		if err != nil {
			t.Fatal(err)
		}
		desc, err := remote.Head(tag, remote.WithContext(ctx))
		if err != nil || desc.Digest != b.Digest {
			t.Errorf("the registry's %s is %v (%v), want %s", tag, desc, err, b.Digest)
		}
		ref, err := name.NewDigest(b.DigestReference(reg))
		if err != nil {
			t.Fatal(err)
		}
		idx, err := remote.Index(ref, remote.WithContext(ctx))
		if err != nil {
			t.Fatalf("pulling %s back: %v", ref, err)
		}
		// Every blob, read back and checked against its digest.
		if err := validate.Index(idx); err != nil {
			t.Errorf("%s as pulled: %v", ref, err)
		}
		im, err := idx.IndexManifest()
		if err != nil {
			t.Fatal(err)
		}
		if len(im.Manifests) != 2 || im.Manifests[0].Digest != b.Images[0] || im.Manifests[1].Digest != b.Images[1] {
			t.Errorf("%s as pulled lists %+v, want %s", ref, im.Manifests, b.Images)
		}
	}
}

func fileSum(t *testing.T, path string) [sha256.Size]byte {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(data)
}

type testLog struct{ t *testing.T }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}
