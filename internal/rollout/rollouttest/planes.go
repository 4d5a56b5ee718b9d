package rollouttest

import (
	"context"
	"os"

	"github.com/cerulean/cerulean/internal/devenv"
)

// StartPlanes starts n local control planes at once (devenv.StartPlanes), each in a temporary
// directory of its own, and returns them with the function that stops them all and removes their
// directories. binDir "" means devenv's default.
func StartPlanes(ctx context.Context, n int, binDir string) ([]*devenv.ControlPlane, func(), error) {
	dirs := make([]string, n)
	remove := func() {
		for _, d := range dirs {
			if d != "" {
				_ = os.RemoveAll(d)
			}
		}
	}
	for i := range n {
		// Short: socket paths below it are limited.
		dir, err := os.MkdirTemp("", "cerulean-ro-")
		if err != nil {
			remove()
			return nil, func() {}, err
		}
		dirs[i] = dir
	}
	planes, err := devenv.StartPlanes(ctx, devenv.PlanesOptions{DataDirs: dirs, BinDir: binDir})
	if err != nil {
		remove()
		return nil, func() {}, err
	}
	return planes, func() {
		devenv.StopPlanes(planes)
		remove()
	}, nil
}
