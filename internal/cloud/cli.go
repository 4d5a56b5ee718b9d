package cloud

import (
	"context"
	"fmt"
	"io"
)

// Run starts the cloud and serves until ctx ends (`cerulean-local cloud`).
func Run(ctx context.Context, opts Options) error {
	c, err := Start(ctx, opts)
	if err != nil {
		return err
	}
	<-ctx.Done()
	return c.Close()
}

// PrintEnv writes the exports that point Azure clients at the cloud of dataDir
// (`cerulean-local cloud env`).
func PrintEnv(out io.Writer, dataDir string) error {
	env, err := ReadEnv(dataDir)
	if err != nil {
		return err
	}
	_, err = fmt.Fprint(out, env)
	return err
}

// PrintProxyEnv writes the exports for clients that use the cloud through its proxy
// (`cerulean-local cloud env --proxy`).
func PrintProxyEnv(out io.Writer, dataDir string) error {
	env, err := ReadProxyEnv(dataDir)
	if err != nil {
		return err
	}
	_, err = fmt.Fprint(out, env)
	return err
}

// PrintComputeEnv writes what code on one VM or scale set needs for its managed identities, and
// nothing of the bootstrap principal (`cerulean-local cloud env --compute ID`).
func PrintComputeEnv(out io.Writer, dataDir, resourceID string) error {
	lines, err := ComputeEnv(dataDir, resourceID)
	if err != nil {
		return err
	}
	_, err = fmt.Fprint(out, FormatEnv(lines))
	return err
}
