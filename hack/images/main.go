// Command images builds container images without a container engine.
//
//	go run ./hack/images -out bin/images          the local node's images (`make images`)
//	go run ./hack/images -product FILE -version V the product image, to publish (`make image`)
//	go run ./hack/images -push REGISTRY -archive FILE [-insecure]
//	                                              push it (`make image-push`)
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"

	"github.com/cerulean/cerulean/internal/images"
)

func main() {
	out := flag.String("out", "bin/images", "directory for the local node's image archives")
	ldflags := flag.String("ldflags", "", "go build -ldflags for the binaries")
	only := flag.String("only", "", "comma-separated image names to build (default: all)")
	product := flag.String("product", "", "build the product image into this archive instead")
	version := flag.String("version", "", "the product image's version (its tag and org.opencontainers.image.version)")
	revision := flag.String("revision", "", "the product image's source commit (org.opencontainers.image.revision)")
	source := flag.String("source", "", "the product image's source repository URL (org.opencontainers.image.source)")
	push := flag.String("push", "", "push the product image of -archive to this registry (host[:port]/path) instead")
	archive := flag.String("archive", "", "the product image's archive, for -push")
	insecure := flag.Bool("insecure", false, "with -push: allow plain HTTP to a registry not on loopback")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *out, *ldflags, *only, *product, *version, *revision, *source, *push, *archive, *insecure); err != nil {
		fmt.Fprintln(os.Stderr, err)
		stop()
		os.Exit(1)
	}
}

func run(ctx context.Context, out, ldflags, only, product, version, revision, source, push, archive string, insecure bool) error {
	switch {
	case push != "" || archive != "":
		ref, err := images.Push(ctx, images.PushOptions{Archive: archive, Registry: push, Insecure: insecure})
		if err != nil {
			return err
		}
		fmt.Println(ref)
		return nil
	case product != "":
		_, err := images.BuildProduct(ctx, images.ProductOptions{Out: product, Version: version, Revision: revision, Source: source, LDFlags: ldflags, Progress: os.Stderr})
		if err == nil {
			fmt.Fprintf(os.Stderr, "wrote %s (%s)\n", product, images.ProductName(version))
		}
		return err
	}
	opts := images.Options{OutDir: out, LDFlags: ldflags, Progress: os.Stderr}
	if only != "" {
		opts.Only = strings.Split(only, ",")
	}
	_, err := images.Build(ctx, opts)
	return err
}
