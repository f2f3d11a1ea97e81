// Package image checks `make image`'s builder: it builds the image once
// into a temp dir (two cross-compiled binaries: most of the time here) and
// reads it back with go-containerregistry as a registry or runtime would.
package image

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/buildinfo"
	"debug/elf"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/musterhq/muster/deploy/image/imagebuild"
)

func TestImage(t *testing.T) {
	out := t.TempDir()
	res, err := imagebuild.Build(context.Background(), imagebuild.Options{
		ModuleDir: "../..", OutDir: out, Tag: "test", Log: tlog{t},
	})
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(res.Archive); err != nil || fi.Size() < 1<<20 {
		t.Errorf("oci-archive %s: %v", res.Archive, err)
	}

	// The layout's index.json names one index, "test", of both platforms.
	top, err := layout.ImageIndexFromPath(res.Layout)
	if err != nil {
		t.Fatal(err)
	}
	tm, err := top.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(tm.Manifests) != 1 || tm.Manifests[0].MediaType != types.OCIImageIndex ||
		tm.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "test" {
		t.Fatalf("index.json: %+v", tm.Manifests)
	}
	idx, err := top.ImageIndex(tm.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	machines := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
	var seen []string
	for _, d := range im.Manifests {
		if d.Platform == nil || d.Platform.OS != "linux" || d.MediaType != types.OCIManifestSchema1 {
			t.Errorf("manifest %s: platform %v, media type %s", d.Digest, d.Platform, d.MediaType)
			continue
		}
		arch := d.Platform.Architecture
		seen = append(seen, arch)
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		t.Run(arch, func(t *testing.T) { checkImage(t, img, arch, machines[arch], res) })
	}
	slices.Sort(seen)
	if !slices.Equal(seen, []string{"amd64", "arm64"}) {
		t.Errorf("platforms %v, want amd64 and arm64", seen)
	}
}

func checkImage(t *testing.T, img v1.Image, arch string, machine elf.Machine, res *imagebuild.Result) {
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if cf.OS != "linux" || cf.Architecture != arch {
		t.Errorf("config platform %s/%s", cf.OS, cf.Architecture)
	}
	if want := []string{"/usr/bin/muster", "serve", "--addr", "0.0.0.0:7420", "--data-dir", "/var/lib/muster"}; !slices.Equal(c.Entrypoint, want) {
		t.Errorf("entrypoint %q, want %q", c.Entrypoint, want)
	}
	if want := []string{"--config", "/etc/muster/config.yaml"}; !slices.Equal(c.Cmd, want) {
		t.Errorf("cmd %q, want %q", c.Cmd, want)
	}
	if c.User != "65532:65532" {
		t.Errorf("user %q, want 65532:65532 (non-root)", c.User)
	}
	if _, ok := c.ExposedPorts["7420/tcp"]; !ok || len(c.ExposedPorts) != 1 {
		t.Errorf("exposed ports %v", c.ExposedPorts)
	}
	if _, ok := c.Volumes["/var/lib/muster"]; !ok || len(c.Volumes) != 1 {
		t.Errorf("volumes %v", c.Volumes)
	}
	if h := c.Healthcheck; h == nil || !slices.Equal(h.Test, []string{"CMD", "/usr/bin/muster", "healthcheck"}) || h.Interval <= 0 || h.StartPeriod < 30e9 {
		t.Errorf("healthcheck %+v", h)
	}
	for k, want := range map[string]string{
		"org.opencontainers.image.title":    "muster",
		"org.opencontainers.image.version":  res.Version,
		"org.opencontainers.image.revision": res.Revision,
		"org.opencontainers.image.source":   "https://github.com/musterhq/muster",
	} {
		if got := c.Labels[k]; got != want || got == "" {
			t.Errorf("label %s = %q, want %q", k, got, want)
		}
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.Config.MediaType != types.OCIConfigJSON {
		t.Errorf("config media type %s", m.Config.MediaType)
	}
	for _, l := range m.Layers {
		if l.MediaType != types.OCILayer {
			t.Errorf("layer media type %s", l.MediaType)
		}
	}

	// The file system, as a runtime unpacks it.
	files := map[string]*tar.Header{}
	var binary, passwd []byte
	tr := tar.NewReader(mutate.Extract(img))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		name := strings.TrimSuffix(strings.TrimPrefix(h.Name, "/"), "/")
		files[name] = h
		switch name {
		case "usr/bin/muster":
			binary, _ = io.ReadAll(tr)
		case "etc/passwd":
			passwd, _ = io.ReadAll(tr)
		}
	}
	f, err := elf.NewFile(bytes.NewReader(binary))
	if err != nil {
		t.Fatalf("usr/bin/muster is not ELF: %v", err)
	}
	if f.Machine != machine || f.Class != elf.ELFCLASS64 {
		t.Errorf("usr/bin/muster: machine %v class %v, want %v", f.Machine, f.Class, machine)
	}
	if h := files["usr/bin/muster"]; h.Mode&0o111 == 0 || h.Uid != 0 {
		t.Errorf("usr/bin/muster mode %o uid %d", h.Mode, h.Uid)
	}
	if f.Section(".interp") != nil {
		t.Errorf("usr/bin/muster is dynamically linked (CGO_ENABLED=0 expected): scratch has no libc")
	}
	tmp := filepath.Join(t.TempDir(), "muster")
	if err := os.WriteFile(tmp, binary, 0o755); err != nil {
		t.Fatal(err)
	}
	bi, err := buildinfo.ReadFile(tmp)
	if err != nil {
		t.Fatal(err)
	}
	if bi.Main.Version != c.Labels["org.opencontainers.image.version"] {
		t.Errorf("binary version %q, label %q", bi.Main.Version, c.Labels["org.opencontainers.image.version"])
	}
	for _, s := range bi.Settings {
		if (s.Key == "CGO_ENABLED" && s.Value != "0") || (s.Key == "-trimpath" && s.Value != "true") {
			t.Errorf("binary built with %s=%s", s.Key, s.Value)
		}
	}
	if d := files["var/lib/muster"]; d == nil || d.Typeflag != tar.TypeDir || d.Uid != 65532 || d.Gid != 65532 || d.Mode&0o700 != 0o700 {
		t.Errorf("/var/lib/muster: %+v (want a directory owned by 65532, writable by it)", d)
	}
	if d := files["tmp"]; d == nil || d.Mode&0o1777 != 0o1777 {
		t.Errorf("/tmp: %+v", d)
	}
	if !strings.Contains(string(passwd), ":65532:65532:") {
		t.Errorf("/etc/passwd has no user 65532:\n%s", passwd)
	}
	for _, name := range []string{"etc/group", "etc/ssl/certs/ca-certificates.crt"} {
		if h := files[name]; h == nil || h.Size == 0 {
			t.Errorf("%s missing or empty", name)
		}
	}
	t.Logf("%s: %d files; binary %d bytes", arch, len(files), len(binary))

	// The amd64 binary runs here: what it says is what the labels say.
	if arch == "amd64" && hostIsAMD64(t) {
		out, err := exec.Command(tmp, "version").Output()
		if err != nil {
			t.Fatal(err)
		}
		if want := "muster " + res.Version + " " + res.Revision + " "; !strings.HasPrefix(string(out), want) {
			t.Errorf("muster version: %q, want prefix %q", out, want)
		}
	}
}

func hostIsAMD64(t *testing.T) bool {
	out, err := exec.Command("go", "env", "GOHOSTARCH", "GOHOSTOS").Output()
	return err == nil && strings.Fields(string(out))[0] == "amd64" && strings.Fields(string(out))[1] == "linux"
}

type tlog struct{ t *testing.T }

func (l tlog) Write(p []byte) (int, error) { l.t.Log(strings.TrimSpace(string(p))); return len(p), nil }
