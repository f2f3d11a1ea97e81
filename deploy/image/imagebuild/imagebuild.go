// Package imagebuild builds Muster's container image without a container
// daemon: it cross-compiles cmd/muster for each platform (CGO_ENABLED=0,
// -trimpath, -buildvcs=auto as `make build` stamps it), puts each binary in
// a layer over a small base layer of its own (no base image: scratch, plus
// CA certificates from the build machine, /etc/passwd and /etc/group with a
// non-root user, and an empty data directory owned by that user), and writes
// a multi-platform OCI image index to an OCI layout directory and to a tar
// of that directory (an oci-archive). Nothing is pushed anywhere.
package imagebuild

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/buildinfo"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// What the image holds and how it runs.
const (
	// UID and GID run the broker: a non-root user (distroless's "nonroot").
	UID = 65532
	GID = 65532
	// Binary is the muster command's path in the image.
	Binary = "/usr/bin/muster"
	// DataDir is the broker's --data-dir, a volume owned by UID.
	DataDir = "/var/lib/muster"
	// ConfigPath is where the configuration file (tokens) is expected.
	ConfigPath = "/etc/muster/config.yaml"
	// Port is the broker's port, on every interface.
	Port = 7420
	// CACerts is where the CA bundle goes (Go's crypto/x509 reads it there).
	CACerts = "/etc/ssl/certs/ca-certificates.crt"
)

// DefaultPlatforms are the platforms `make image` builds.
var DefaultPlatforms = []string{"linux/amd64", "linux/arm64"}

// Entrypoint and Cmd of the image: the broker listens on every interface,
// which it does only with tokens, so Cmd names the configuration file the
// operator mounts. Replacing Cmd with --insecure-dev runs dev mode instead.
var (
	Entrypoint = []string{Binary, "serve", "--addr", "0.0.0.0:" + strconv.Itoa(Port), "--data-dir", DataDir}
	Cmd        = []string{"--config", ConfigPath}
	// Healthcheck runs `muster healthcheck` (GET /healthz on 127.0.0.1).
	Healthcheck = []string{"CMD", Binary, "healthcheck"}
)

// Options says what to build and where.
type Options struct {
	ModuleDir string   // the repository root (holds go.mod)
	OutDir    string   // receives oci/ and muster-oci.tar
	Platforms []string // "linux/amd64", …; DefaultPlatforms when empty
	Tag       string   // the ref name in the layout's index.json; "latest" when empty
	Source    string   // org.opencontainers.image.source; https://github.com/musterhq/muster when empty
	CACerts   string   // the build machine's CA bundle; /etc/ssl/certs/ca-certificates.crt when empty
	Go        string   // the go command; $GO or "go" when empty
	Log       io.Writer
}

// Result is what Build wrote.
type Result struct {
	Layout, Archive   string // the OCI layout directory and the oci-archive tar
	Index             v1.ImageIndex
	Version, Revision string // as the binaries record them (muster version)
	Created           time.Time
}

// Build compiles the binaries and writes the image.
func Build(ctx context.Context, o Options) (*Result, error) {
	if len(o.Platforms) == 0 {
		o.Platforms = DefaultPlatforms
	}
	if o.Tag == "" {
		o.Tag = "latest"
	}
	if o.Source == "" {
		o.Source = "https://github.com/musterhq/muster"
	}
	if o.CACerts == "" {
		o.CACerts = "/etc/ssl/certs/ca-certificates.crt"
	}
	if o.Go == "" {
		if o.Go = os.Getenv("GO"); o.Go == "" {
			o.Go = "go"
		}
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	ca, err := os.ReadFile(o.CACerts)
	if err != nil {
		return nil, fmt.Errorf("CA certificates: %w", err)
	}
	tmp, err := os.MkdirTemp("", "muster-image-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)

	res := &Result{Layout: filepath.Join(o.OutDir, "oci"), Archive: filepath.Join(o.OutDir, "muster-oci.tar")}
	type built struct {
		platform v1.Platform
		binary   []byte
	}
	var bins []built
	for _, p := range o.Platforms {
		osName, arch, ok := strings.Cut(p, "/")
		if !ok || osName != "linux" {
			return nil, fmt.Errorf("platform %q: want linux/ARCH", p)
		}
		out := filepath.Join(tmp, osName+"_"+arch, "muster")
		start := time.Now()
		cmd := exec.CommandContext(ctx, o.Go, "build", "-buildvcs=auto", "-trimpath", "-o", out, "./cmd/muster")
		cmd.Dir = o.ModuleDir
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+osName, "GOARCH="+arch)
		if b, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("go build for %s: %w\n%s", p, err, b)
		}
		version, revision, created, err := stamp(out)
		if err != nil {
			return nil, err
		}
		if res.Version == "" {
			res.Version, res.Revision, res.Created = version, revision, created
		} else if version != res.Version || revision != res.Revision {
			return nil, fmt.Errorf("%s binary is %s %s, the first one %s %s", p, version, revision, res.Version, res.Revision)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(o.Log, "built %s (%d bytes) in %s\n", p, len(b), time.Since(start).Round(time.Millisecond))
		plat := v1.Platform{OS: osName, Architecture: arch}
		if arch == "arm64" {
			plat.Variant = "v8"
		}
		bins = append(bins, built{plat, b})
	}
	if res.Created.IsZero() {
		res.Created = sourceDate(ctx, o.ModuleDir)
	}

	base, err := layer(baseFiles(ca), res.Created)
	if err != nil {
		return nil, err
	}
	labels := map[string]string{
		"org.opencontainers.image.title":       "muster",
		"org.opencontainers.image.description": "Muster, a lease broker for worker fleets",
		"org.opencontainers.image.version":     res.Version,
		"org.opencontainers.image.revision":    res.Revision,
		"org.opencontainers.image.source":      o.Source,
		"org.opencontainers.image.created":     res.Created.UTC().Format(time.RFC3339),
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, b := range bins {
		bin, err := layer([]file{
			{name: "usr/", mode: 0o755, dir: true},
			{name: "usr/bin/", mode: 0o755, dir: true},
			{name: strings.TrimPrefix(Binary, "/"), mode: 0o755, data: b.binary},
		}, res.Created)
		if err != nil {
			return nil, err
		}
		img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
		img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
		img, err = mutate.Append(img,
			mutate.Addendum{Layer: base, MediaType: types.OCILayer, History: v1.History{Created: v1.Time{Time: res.Created}, CreatedBy: "imagebuild: CA certificates, passwd, group, " + DataDir, Comment: "base"}},
			mutate.Addendum{Layer: bin, MediaType: types.OCILayer, History: v1.History{Created: v1.Time{Time: res.Created}, CreatedBy: "imagebuild: go build ./cmd/muster for " + b.platform.String()}},
		)
		if err != nil {
			return nil, err
		}
		cf, err := img.ConfigFile()
		if err != nil {
			return nil, err
		}
		cf = cf.DeepCopy()
		cf.OS, cf.Architecture, cf.Variant = b.platform.OS, b.platform.Architecture, b.platform.Variant
		cf.Created = v1.Time{Time: res.Created}
		cf.Author = "muster make image"
		cf.Config = v1.Config{
			User:         fmt.Sprintf("%d:%d", UID, GID),
			Entrypoint:   Entrypoint,
			Cmd:          Cmd,
			Env:          []string{"PATH=/usr/bin", "SSL_CERT_FILE=" + CACerts},
			WorkingDir:   DataDir,
			ExposedPorts: map[string]struct{}{fmt.Sprintf("%d/tcp", Port): {}},
			Volumes:      map[string]struct{}{DataDir: {}},
			Labels:       labels,
			StopSignal:   "SIGTERM",
			Healthcheck: &v1.HealthConfig{
				Test:        Healthcheck,
				Interval:    10 * time.Second,
				Timeout:     5 * time.Second,
				StartPeriod: 40 * time.Second, // the fleet store may take 30 s to open
				Retries:     3,
			},
		}
		if img, err = mutate.ConfigFile(img, cf); err != nil {
			return nil, err
		}
		p := b.platform
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &p}})
	}
	res.Index = mutate.Annotations(idx, labels).(v1.ImageIndex)

	if err := os.MkdirAll(o.OutDir, 0o755); err != nil {
		return nil, err
	}
	if err := os.RemoveAll(res.Layout); err != nil {
		return nil, err
	}
	lp, err := layout.Write(res.Layout, empty.Index)
	if err != nil {
		return nil, err
	}
	if err := lp.AppendIndex(res.Index, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": o.Tag,
	})); err != nil {
		return nil, err
	}
	if err := tarDir(res.Layout, res.Archive, res.Created); err != nil {
		return nil, err
	}
	return res, nil
}

// stamp reads what the toolchain recorded in a binary: the module version,
// the commit ("unknown" without one, "+modified" for a dirty tree, as
// `muster version` prints it) and the commit's time.
func stamp(path string) (version, revision string, created time.Time, err error) {
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return "", "", time.Time{}, fmt.Errorf("%s: %w", path, err)
	}
	revision, modified := "unknown", ""
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				modified = "+modified"
			}
		case "vcs.time":
			created, _ = time.Parse(time.RFC3339, s.Value)
		}
	}
	return bi.Main.Version, revision + modified, created, nil
}

// sourceDate is the image's time when the binary records no commit time:
// $SOURCE_DATE_EPOCH, else the checkout's last commit, else the Unix epoch,
// so that the same sources give the same image.
func sourceDate(ctx context.Context, dir string) time.Time {
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return time.Unix(n, 0).UTC()
		}
	}
	cmd := exec.CommandContext(ctx, "git", "log", "-1", "--format=%ct")
	cmd.Dir = dir
	if out, err := cmd.Output(); err == nil {
		if n, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64); err == nil {
			return time.Unix(n, 0).UTC()
		}
	}
	return time.Unix(0, 0).UTC()
}

// file is one entry of a layer.
type file struct {
	name     string
	mode     int64
	uid, gid int
	dir      bool
	data     []byte
}

// baseFiles is the layer under the binary: what scratch lacks.
func baseFiles(ca []byte) []file {
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:muster:%s:/sbin/nologin\n", UID, GID, DataDir)
	group := fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", GID)
	return []file{
		{name: "etc/", mode: 0o755, dir: true},
		{name: "etc/group", mode: 0o644, data: []byte(group)},
		{name: "etc/muster/", mode: 0o755, dir: true},
		{name: "etc/nsswitch.conf", mode: 0o644, data: []byte("hosts: files dns\n")},
		{name: "etc/passwd", mode: 0o644, data: []byte(passwd)},
		{name: "etc/ssl/", mode: 0o755, dir: true},
		{name: "etc/ssl/certs/", mode: 0o755, dir: true},
		{name: strings.TrimPrefix(CACerts, "/"), mode: 0o644, data: ca},
		{name: "tmp/", mode: 0o1777, dir: true},
		{name: "var/", mode: 0o755, dir: true},
		{name: "var/lib/", mode: 0o755, dir: true},
		{name: strings.TrimPrefix(DataDir, "/") + "/", mode: 0o750, uid: UID, gid: GID, dir: true},
	}
}

// layer is an OCI layer (gzip) of files, every time set to mtime.
func layer(files []file, mtime time.Time) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: f.mode, Uid: f.uid, Gid: f.gid, ModTime: mtime, Format: tar.FormatPAX}
		if f.dir {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
}

// tarDir writes dir as a tar (an oci-archive when dir is an OCI layout),
// its entries sorted and timed mtime.
func tarDir(dir, out string, mtime time.Time) error {
	var names []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		names = append(names, p)
		return nil
	})
	if err != nil {
		return err
	}
	sort.Strings(names)
	f, err := os.Create(out + ".tmp")
	if err != nil {
		return err
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	for _, p := range names {
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		h := &tar.Header{Name: filepath.ToSlash(rel), Mode: 0o644, ModTime: mtime, Typeflag: tar.TypeReg, Size: fi.Size()}
		if fi.IsDir() {
			h.Name, h.Mode, h.Typeflag, h.Size = h.Name+"/", 0o755, tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if !fi.IsDir() {
			src, err := os.Open(p)
			if err != nil {
				return err
			}
			_, err = io.Copy(tw, src)
			src.Close()
			if err != nil {
				return err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(out+".tmp", out)
}
