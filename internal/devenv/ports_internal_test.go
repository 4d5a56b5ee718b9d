package devenv

import (
	"net"
	"path/filepath"
	"strconv"
	"testing"
)

// A node that waited for the machine's lock finds its kube-scheduler port taken by another
// process: it gets new node ports (saved for the next start), and keeps the control plane's.
func TestRefreshNodePortsReplacesATakenPort(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ports.json")
	p, err := loadOrChoosePorts(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	same, err := refreshNodePorts(path, p)
	if err != nil || same != p {
		t.Fatalf("free ports changed: %+v → %+v (%v)", p, same, err)
	}
	held, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p.Scheduler)))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	got, err := refreshNodePorts(path, p)
	if err != nil {
		t.Fatal(err)
	}
	if got.Scheduler == p.Scheduler || got.APIServer != p.APIServer || got.EtcdClient != p.EtcdClient {
		t.Errorf("after the scheduler's port was taken: %+v (was %+v)", got, p)
	}
	if saved, err := loadOrChoosePorts(path, 0); err != nil || saved != got {
		t.Errorf("saved %+v (%v), want %+v", saved, err, got)
	}
}

// Between two starts another process (the local cloud's proxy, in CI) took the controller
// manager's port: the control plane starts on a new one, saved, and keeps the ports that must
// stay stable (the issuer's, etcd's).
func TestRefreshControlPlanePortsReplacesATakenControllerManagerPort(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ports.json")
	p, err := loadOrChoosePorts(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	if same, err := refreshControlPlanePorts(path, p); err != nil || same != p {
		t.Fatalf("free ports changed: %+v → %+v (%v)", p, same, err)
	}
	held, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p.ControllerManager)))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	got, err := refreshControlPlanePorts(path, p)
	if err != nil {
		t.Fatal(err)
	}
	if got.ControllerManager == p.ControllerManager || got.APIServer != p.APIServer || got.EtcdClient != p.EtcdClient || got.EtcdPeer != p.EtcdPeer {
		t.Errorf("after the controller manager's port was taken: %+v (was %+v)", got, p)
	}
	if err := got.checkFree(); err != nil {
		t.Errorf("the refreshed ports are not free: %v", err)
	}
	if saved, err := loadOrChoosePorts(path, 0); err != nil || saved != got {
		t.Errorf("saved %+v (%v), want %+v", saved, err, got)
	}
}

// A new data directory's ports are chosen below the kernel's ephemeral range, where no outgoing
// connection or port-0 listener (the local cloud's proxy took kube-controller-manager's once)
// can take one between two starts; each is distinct and free.
func TestNewPortsAreChosenBelowTheEphemeralRange(t *testing.T) {
	below := ephemeralStart()
	if below-keptPortsFrom < 1000 {
		t.Fatalf("this machine's ephemeral range starts at %d: no room below it; the test needs the usual 32768", below)
	}
	p, err := loadOrChoosePorts(filepath.Join(t.TempDir(), "ports.json"), 0)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, np := range p.named() {
		if np.port < keptPortsFrom || np.port >= below || seen[np.port] {
			t.Errorf("%s's port %d: want a distinct port in [%d, %d)", np.name, np.port, keptPortsFrom, below)
		}
		seen[np.port] = true
	}
	if err := p.checkFree(); err != nil {
		t.Error(err)
	}
}
