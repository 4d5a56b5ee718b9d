// Command images builds the local node's container images into an output directory
// (`make images`): go run ./hack/images -out bin/images.
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
	out := flag.String("out", "bin/images", "directory for the image archives")
	ldflags := flag.String("ldflags", "", "go build -ldflags for the binaries")
	only := flag.String("only", "", "comma-separated image names to build (default: all)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	opts := images.Options{OutDir: *out, LDFlags: *ldflags, Progress: os.Stderr}
	if *only != "" {
		opts.Only = strings.Split(*only, ",")
	}
	if _, err := images.Build(ctx, opts); err != nil {
		fmt.Fprintln(os.Stderr, err)
		stop()
		os.Exit(1)
	}
}
