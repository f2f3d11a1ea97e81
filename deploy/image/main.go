// Command image builds Muster's multi-platform OCI image without a
// container daemon (`make image`): see package imagebuild. It writes
// OUT/oci (an OCI layout) and OUT/muster-oci.tar (the same as an
// oci-archive), and pushes nothing.
//
//	go run ./deploy/image [-out bin/muster-image] [-platforms linux/amd64,linux/arm64] [-tag latest]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/musterhq/muster/deploy/image/imagebuild"
)

func main() {
	out := flag.String("out", "bin/muster-image", "output `DIR`")
	platforms := flag.String("platforms", strings.Join(imagebuild.DefaultPlatforms, ","), "comma-separated `OS/ARCH` list")
	tag := flag.String("tag", "latest", "the image's ref name in the layout (oci:DIR:TAG)")
	source := flag.String("source", "", "org.opencontainers.image.source label (default https://github.com/musterhq/muster)")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "image: unexpected argument %q\n", flag.Arg(0))
		os.Exit(2)
	}
	res, err := imagebuild.Build(context.Background(), imagebuild.Options{
		ModuleDir: ".",
		OutDir:    *out,
		Platforms: strings.Split(*platforms, ","),
		Tag:       *tag,
		Source:    *source,
		Log:       os.Stderr,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
	digest, err := res.Index.Digest()
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
	fmt.Printf("muster %s %s\n  index:       %s\n  OCI layout:  %s (oci:%s:%s)\n  oci-archive: %s\n",
		res.Version, res.Revision, digest, res.Layout, res.Layout, *tag, res.Archive)
}
