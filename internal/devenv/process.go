package devenv

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"time"
)

// child is one control-plane process. It writes its output to a log file under DIR/logs.
type child struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{} // closed when the process has exited
	err     error         // the exit error, valid once done is closed
}

// startChild starts bin with args. The process gets SIGKILL when its parent dies, even by SIGKILL
// (Pdeathsig), and runs in its own process group so a terminal's Ctrl-C reaches only cerulean,
// which then stops the children in order.
// env, when not nil, is added to this process's environment.
func startChild(name, bin string, args []string, logPath string, env []string) (*child, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open %s log: %w", name, err)
	}
	c := &child{name: name, logPath: logPath, done: make(chan struct{})}
	c.cmd = exec.Command(bin, args...)
	c.cmd.Stdout = logFile
	c.cmd.Stderr = logFile
	if env != nil {
		c.cmd.Env = append(os.Environ(), env...)
	}
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}

	// Pdeathsig fires when the thread that forked the child exits, not the process. Go may retire
	// idle threads, so the fork happens on a locked thread that stays until the child exits.
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		defer logFile.Close()
		if err := c.cmd.Start(); err != nil {
			started <- fmt.Errorf("start %s: %w", name, err)
			return
		}
		started <- nil
		c.err = c.cmd.Wait()
		close(c.done)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return c, nil
}

// exited reports whether the process is gone, with a short reason and the tail of its log.
func (c *child) exited() error {
	select {
	case <-c.done:
		return fmt.Errorf("%s exited (%w); last lines of %s:\n%s", c.name, c.err, c.logPath, tail(c.logPath, 15))
	default:
		return nil
	}
}

// stop asks the process to terminate and kills it if it has not within the grace period.
func (c *child) stop(grace time.Duration) {
	select {
	case <-c.done:
		return
	default:
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
	case <-time.After(grace):
		_ = c.cmd.Process.Kill()
		<-c.done
	}
}

// tail returns the last n lines of a file, for error messages.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "(no log)"
		}
		return err.Error()
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
