package nodeagent

import (
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// RunInNetns runs fn on a thread inside the named network namespace (/run/netns/NAME); sockets
// fn creates stay in that namespace. For this package's tests, internal and external.
func RunInNetns(name string, fn func()) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer orig.Close()
		target, err := os.Open("/run/netns/" + name)
		if err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			errc <- err
			return
		}
		fn()
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err == nil {
			runtime.UnlockOSThread() // back in the host's namespace; otherwise the thread dies with the goroutine
		}
		errc <- nil
	}()
	return <-errc
}
