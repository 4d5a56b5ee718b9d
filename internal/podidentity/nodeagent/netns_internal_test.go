package nodeagent

import (
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"

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

// netnsDirAtStart is whether /run/netns was a mount point before the first test of this binary
// used it: a test that finds it mounted by an earlier test (whose namespaces were not all gone
// at its end) still removes it.
var netnsDirAtStart = sync.OnceValue(func() bool { return netnsDirMounted() })

// LeaveNetnsDirAsFound undoes, when the test ends, the mount of /run/netns onto itself that the
// first `ip netns add` makes, unless it was there before this binary ran or a namespace is
// still in it.
func LeaveNetnsDirAsFound(t testing.TB) {
	if netnsDirAtStart() {
		return
	}
	t.Cleanup(func() {
		if out, _ := exec.Command("ip", "netns", "list").Output(); len(strings.TrimSpace(string(out))) == 0 && netnsDirMounted() {
			if out, err := exec.Command("umount", "/run/netns").CombinedOutput(); err != nil {
				t.Errorf("umount /run/netns: %v: %s", err, out)
			}
		}
	})
}

// netnsDirMounted reports whether /run/netns is a mount point.
func netnsDirMounted() bool {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		panic(err) // every Linux has it
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == "/run/netns" {
			return true
		}
	}
	return false
}
