package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/cerulean/cerulean/internal/up"
)

// benchUp times `cerulean-local up` from its start to everything ready (its env file written:
// the cloud, the control plane, a Ready node, the manager, the node agent, the CSI driver) on a
// fresh data directory and again on the same one, as a developer runs it a second time.
func benchUp(ctx context.Context, env benchEnv) ([]row, error) {
	dir, err := os.MkdirTemp(env.scratch, "up-")
	if err != nil {
		return nil, err
	}
	var took []time.Duration
	for range 2 {
		d, err := runUpUntilReady(ctx, env.binDir, dir)
		if err != nil {
			return nil, err
		}
		took = append(took, d)
	}
	return []row{
		{benchmark: "`cerulean-local up` to everything ready, cold (fresh data dir)", result: took[0].Round(100 * time.Millisecond).String()},
		{benchmark: "`cerulean-local up` to everything ready, warm (same data dir; goal under 15s)", result: took[1].Round(100 * time.Millisecond).String(),
			vsBaseline: ratio(took[1].Seconds(), took[0].Seconds()) + " of cold"},
	}, nil
}

// runUpUntilReady starts up on dir, waits for its env file, stops it with an interrupt (as
// Ctrl-C does) and waits for it to exit.
func runUpUntilReady(ctx context.Context, binDir, dir string) (time.Duration, error) {
	envFile := filepath.Join(dir, up.EnvFileName)
	_ = os.Remove(envFile)
	log, err := os.Create(filepath.Join(dir, "bench-up.log"))
	if err != nil {
		return 0, err
	}
	defer log.Close()
	cmd := exec.CommandContext(ctx, filepath.Join(binDir, "cerulean-local"), "up", "--data-dir", dir, "--cloud-addr", "127.0.0.1:0", "--proxy-addr", "0")
	cmd.Stdout, cmd.Stderr = log, log
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Minute, true, func(context.Context) (bool, error) {
		select {
		case err := <-exited:
			return false, errors.Join(errors.New("up exited before it was ready"), err)
		default:
		}
		_, err := os.Stat(envFile)
		return err == nil, nil
	})
	took := time.Since(start)
	if err != nil {
		_ = cmd.Process.Kill()
		return 0, fmt.Errorf("cerulean-local up (log: %s): %w", log.Name(), err)
	}
	_ = cmd.Process.Signal(syscall.SIGINT)
	select {
	case err := <-exited:
		if err != nil {
			return 0, fmt.Errorf("cerulean-local up, interrupted, did not stop cleanly (log: %s): %w", log.Name(), err)
		}
	case <-time.After(2 * time.Minute):
		_ = cmd.Process.Kill()
		return 0, fmt.Errorf("cerulean-local up did not stop within 2 minutes of an interrupt (log: %s)", log.Name())
	}
	return took, nil
}
