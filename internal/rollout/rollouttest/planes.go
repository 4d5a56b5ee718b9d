package rollouttest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/cerulean/cerulean/internal/devenv"
)

// StartPlanes starts n local control planes at once, each in a directory of its own with its own
// CA and service-account issuer, and returns them with the function that stops them all and
// removes their directories. binDir "" means devenv's default.
func StartPlanes(ctx context.Context, n int, binDir string) ([]*devenv.ControlPlane, func(), error) {
	planes := make([]*devenv.ControlPlane, n)
	dirs := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		// Short: socket paths below it are limited.
		dir, err := os.MkdirTemp("", "cerulean-ro-")
		if err != nil {
			return nil, func() {}, err
		}
		dirs[i] = dir
		wg.Go(func() {
			planes[i], errs[i] = devenv.Start(ctx, devenv.Options{DataDir: dir, BinDir: binDir})
		})
	}
	wg.Wait()
	stop := func() {
		var wg sync.WaitGroup
		for i, cp := range planes {
			wg.Go(func() {
				if cp != nil {
					cp.Stop()
				}
				_ = os.RemoveAll(dirs[i])
			})
		}
		wg.Wait()
	}
	if err := errors.Join(errs...); err != nil {
		stop()
		return nil, func() {}, fmt.Errorf("start control planes: %w", err)
	}
	return planes, stop, nil
}
