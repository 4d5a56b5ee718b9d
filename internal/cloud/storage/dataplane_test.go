package storage_test

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/runtime"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/data/aztables"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/storage/armstorage/v2"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/sas"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azqueue"
	"github.com/google/uuid"

	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/authz"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
	"github.com/cerulean/cerulean/internal/cloud/pki"
	"github.com/cerulean/cerulean/internal/cloud/storage"
)

// env is a cloud with its proxy and one storage account.
type env struct {
	c       *cloud.Cloud
	clock   *cloudtest.Clock
	dir     string
	sub     string
	rg      string
	account string
	keys    []string
	arm     *armstorage.ClientFactory
}

func azuriteDir(t *testing.T) string {
	t.Helper()
	dir, err := storage.DefaultAzuriteDir()
	if err != nil {
		t.Fatalf("%v", err) // installed by `make test-deps`; never skipped
	}
	return dir
}

func startCloud(t *testing.T, dir string, clk *cloudtest.Clock) *cloud.Cloud {
	t.Helper()
	return cloudtest.Start(t, cloud.Options{
		DataDir: dir, Clock: clk.Now, ProxyAddr: "0", ARM: cloudtest.FastARM(), AzuriteDir: azuriteDir(t),
	})
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{clock: cloudtest.NewClock(), dir: t.TempDir(), account: "st" + strings.ReplaceAll(uuid.NewString(), "-", "")[:12]}
	e.c = startCloud(t, e.dir, e.clock)
	e.sub = e.c.Settings().SubscriptionID
	cred := cloudtest.OwnerCred(t, e.c)
	e.rg = "rg-storage"
	cloudtest.CreateGroup(t, e.c, cred, cloudtest.ARMOptions(e.c), "westeurope", e.rg)
	f, err := armstorage.NewClientFactory(e.sub, cred, cloudtest.ARMOptions(e.c))
	if err != nil {
		t.Fatal(err)
	}
	e.arm = f
	e.createAccount(t)
	return e
}

func (e *env) createAccount(t *testing.T) {
	t.Helper()
	ctx := t.Context()
	poller, err := e.arm.NewAccountsClient().BeginCreate(ctx, e.rg, e.account, armstorage.AccountCreateParameters{
		Location: to.Ptr("westeurope"), Kind: to.Ptr(armstorage.KindStorageV2),
		SKU: &armstorage.SKU{Name: to.Ptr(armstorage.SKUNameStandardLRS)},
	}, nil)
	if err != nil {
		t.Fatalf("create account: %v", err)
	}
	if _, err := poller.PollUntilDone(ctx, &runtime.PollUntilDoneOptions{Frequency: 20 * time.Millisecond}); err != nil {
		t.Fatalf("create account: %v", err)
	}
	e.refreshKeys(t)
}

func (e *env) refreshKeys(t *testing.T) {
	t.Helper()
	keys, err := e.arm.NewAccountsClient().ListKeys(t.Context(), e.rg, e.account, nil)
	if err != nil {
		t.Fatalf("list keys: %v", err)
	}
	e.keys = nil
	for _, k := range keys.Keys {
		e.keys = append(e.keys, *k.Value)
	}
}

// clientOptions reach the public names through the cloud's proxy, trusting its CA: the only
// settings besides the SDKs' defaults.
func (e *env) clientOptions(t *testing.T) azcore.ClientOptions {
	t.Helper()
	ca, err := os.ReadFile(e.c.Settings().CAFile)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := pki.Pool(ca)
	if err != nil {
		t.Fatal(err)
	}
	proxyURL, _ := url.Parse(e.c.Settings().ProxyURL)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = http.ProxyURL(proxyURL)
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return azcore.ClientOptions{Transport: &http.Client{Transport: tr}}
}

func (e *env) blobURL() string  { return "https://" + e.account + ".blob.core.windows.net/" }
func (e *env) queueURL() string { return "https://" + e.account + ".queue.core.windows.net/" }
func (e *env) tableURL() string { return "https://" + e.account + ".table.core.windows.net/" }

func (e *env) blobClient(t *testing.T, key string) *azblob.Client {
	t.Helper()
	cred, err := azblob.NewSharedKeyCredential(e.account, key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := azblob.NewClientWithSharedKeyCredential(e.blobURL(), cred, &azblob.ClientOptions{ClientOptions: e.clientOptions(t)})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func wantCode(t *testing.T, what string, err error, status int, code string) {
	t.Helper()
	var re *azcore.ResponseError
	if !errors.As(err, &re) || re.StatusCode != status || re.ErrorCode != code {
		t.Fatalf("%s: got %v, want %d %s", what, err, status, code)
	}
}

// TestBlobQueueTable: the three data planes with the Azure SDK for Go, authorized with the
// account's keys (Shared Key, and a connection string), and the data survives a restart of the
// cloud (Azurite is stopped with it and started again).
func TestBlobQueueTable(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	blob := e.blobClient(t, e.keys[0])
	if _, err := blob.CreateContainer(ctx, "photos", nil); err != nil {
		t.Fatalf("create container: %v", err)
	}
	// Larger than the forward's copy buffers many times over (one PUT, one GET).
	payload := bytes.Repeat([]byte("cerulean "), 1_000_000)
	if _, err := blob.UploadBuffer(ctx, "photos", "a/b.txt", payload, nil); err != nil {
		t.Fatalf("upload: %v", err)
	}
	got := download(t, blob, "photos", "a/b.txt")
	if !bytes.Equal(got, payload) {
		t.Fatalf("download returned %d bytes, want %d", len(got), len(payload))
	}
	names := listBlobs(t, blob, "photos")
	if len(names) != 1 || names[0] != "a/b.txt" {
		t.Fatalf("blobs = %v", names)
	}
	// Anonymous reads get what the container's public access level allows: nothing of a private
	// one, the blobs of a public one. Azure Storage speaks HTTP/1.1 only, and so do the data
	// planes to a client offering h2.
	if _, err := blob.CreateContainer(ctx, "public", &azblob.CreateContainerOptions{Access: to.Ptr(azblob.PublicAccessTypeBlob)}); err != nil {
		t.Fatalf("create public container: %v", err)
	}
	if _, err := blob.UploadBuffer(ctx, "public", "p.txt", []byte("hello"), nil); err != nil {
		t.Fatalf("upload: %v", err)
	}
	anon := e.clientOptions(t).Transport.(*http.Client)
	for path, want := range map[string]int{"photos/a/b.txt": http.StatusForbidden, "public/p.txt": http.StatusOK} {
		res, err := anon.Get(e.blobURL() + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		_ = res.Body.Close()
		if res.Proto != "HTTP/1.1" || res.StatusCode != want || want == http.StatusOK && string(b) != "hello" {
			t.Fatalf("anonymous GET %s: %s %d %.100q, want HTTP/1.1 %d", path, res.Proto, res.StatusCode, b, want)
		}
	}

	// Queue, from a connection string with the second key.
	conn := "DefaultEndpointsProtocol=https;AccountName=" + e.account + ";AccountKey=" + e.keys[1] + ";EndpointSuffix=core.windows.net"
	qs, err := azqueue.NewServiceClientFromConnectionString(conn, &azqueue.ClientOptions{ClientOptions: e.clientOptions(t)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := qs.CreateQueue(ctx, "jobs", nil); err != nil {
		t.Fatalf("create queue: %v", err)
	}
	q := qs.NewQueueClient("jobs")
	if _, err := q.EnqueueMessage(ctx, "hello", nil); err != nil {
		t.Fatalf("enqueue: %v", err)
	}
	msgs, err := q.DequeueMessage(ctx, nil)
	if err != nil || len(msgs.Messages) != 1 || *msgs.Messages[0].MessageText != "hello" {
		t.Fatalf("dequeue: %v %+v", err, msgs)
	}

	// Table, with Shared Key Lite (aztables' scheme).
	tcred, err := aztables.NewSharedKeyCredential(e.account, e.keys[0])
	if err != nil {
		t.Fatal(err)
	}
	ts, err := aztables.NewServiceClientWithSharedKey(e.tableURL(), tcred, &aztables.ClientOptions{ClientOptions: e.clientOptions(t)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ts.CreateTable(ctx, "orders", nil); err != nil {
		t.Fatalf("create table: %v", err)
	}
	tc := ts.NewClient("orders")
	if _, err := tc.AddEntity(ctx, []byte(`{"PartitionKey":"p","RowKey":"1","Total":42}`), nil); err != nil {
		t.Fatalf("add entity: %v", err)
	}
	ent, err := tc.GetEntity(ctx, "p", "1", nil)
	if err != nil || !strings.Contains(string(ent.Value), `"Total":42`) {
		t.Fatalf("get entity: %v %s", err, ent.Value)
	}

	// A restart keeps every acknowledged write.
	if err := e.c.Close(); err != nil {
		t.Fatalf("close cloud: %v", err)
	}
	e.c = startCloud(t, e.dir, e.clock)
	blob = e.blobClient(t, e.keys[0])
	if got := download(t, blob, "photos", "a/b.txt"); !bytes.Equal(got, payload) {
		t.Fatalf("after restart: %d bytes", len(got))
	}
	ts, _ = aztables.NewServiceClientWithSharedKey(e.tableURL(), tcred, &aztables.ClientOptions{ClientOptions: e.clientOptions(t)})
	if _, err := ts.NewClient("orders").GetEntity(ctx, "p", "1", nil); err != nil {
		t.Fatalf("entity after restart: %v", err)
	}
}

func download(t *testing.T, c *azblob.Client, container, name string) []byte {
	t.Helper()
	resp, err := c.DownloadStream(t.Context(), container, name, nil)
	if err != nil {
		t.Fatalf("download: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func listBlobs(t *testing.T, c *azblob.Client, container string) []string {
	t.Helper()
	var out []string
	pager := c.NewListBlobsFlatPager(container, nil)
	for pager.More() {
		page, err := pager.NextPage(t.Context())
		if err != nil {
			t.Fatalf("list blobs: %v", err)
		}
		for _, b := range page.Segment.BlobItems {
			out = append(out, *b.Name)
		}
	}
	return out
}

func listContainers(t *testing.T, c *azblob.Client) []string {
	t.Helper()
	var out []string
	pager := c.NewListContainersPager(nil)
	for pager.More() {
		page, err := pager.NextPage(t.Context())
		if err != nil {
			t.Fatalf("list containers: %v", err)
		}
		for _, ci := range page.ContainerItems {
			out = append(out, *ci.Name)
		}
	}
	return out
}

// TestStorageAuthorization: a wrong key, an expired SAS, a token without a data role and the
// key regenerateKey replaced are refused as Azure refuses them; a valid SAS, a token with the
// role and the other key work.
func TestStorageAuthorization(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	owner := e.blobClient(t, e.keys[0])
	if _, err := owner.CreateContainer(ctx, "docs", nil); err != nil {
		t.Fatalf("create container: %v", err)
	}

	// A wrong key.
	wrong := e.blobClient(t, "d3Jvbmc"+e.keys[0][7:])
	_, err := wrong.CreateContainer(ctx, "nope", nil)
	wantCode(t, "wrong key", err, http.StatusForbidden, string(bloberror.AuthenticationFailed))

	// Account SAS: valid, then expired once the cloud's clock passes its expiry.
	cred, _ := azblob.NewSharedKeyCredential(e.account, e.keys[1])
	qp, err := sas.AccountSignatureValues{
		Protocol: sas.ProtocolHTTPS, StartTime: e.clock.Now().Add(-time.Minute), ExpiryTime: e.clock.Now().Add(time.Hour),
		Permissions:   to.Ptr(sas.AccountPermissions{Read: true, List: true}).String(),
		ResourceTypes: to.Ptr(sas.AccountResourceTypes{Service: true, Container: true, Object: true}).String(),
	}.SignWithSharedKey(cred)
	if err != nil {
		t.Fatal(err)
	}
	sasClient, err := azblob.NewClientWithNoCredential(e.blobURL()+"?"+qp.Encode(), &azblob.ClientOptions{ClientOptions: e.clientOptions(t)})
	if err != nil {
		t.Fatal(err)
	}
	if got := listContainers(t, sasClient); len(got) != 1 || got[0] != "docs" {
		t.Fatalf("containers with SAS = %v", got)
	}
	_, err = sasClient.CreateContainer(ctx, "nope", nil)
	wantCode(t, "SAS without create", err, http.StatusForbidden, string(bloberror.AuthorizationPermissionMismatch))

	// Service SAS for one blob.
	if _, err := owner.UploadBuffer(ctx, "docs", "readme", []byte("hi"), nil); err != nil {
		t.Fatal(err)
	}
	bqp, err := sas.BlobSignatureValues{
		Protocol: sas.ProtocolHTTPS, ExpiryTime: e.clock.Now().Add(time.Hour), ContainerName: "docs", BlobName: "readme",
		Permissions: to.Ptr(sas.BlobPermissions{Read: true}).String(),
	}.SignWithSharedKey(cred)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Transport: e.clientOptions(t).Transport.(*http.Client).Transport}).Get(e.blobURL() + "docs/readme?" + bqp.Encode())
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(b) != "hi" {
		t.Fatalf("blob with service SAS: %d %s", resp.StatusCode, b)
	}

	// A token: refused without a data role, served with Storage Blob Data Contributor.
	p, tokenCred := cloudtest.NewPrincipal(t, e.c, "storage-user")
	tokenClient, err := azblob.NewClient(e.blobURL(), tokenCred, &azblob.ClientOptions{ClientOptions: e.clientOptions(t)})
	if err != nil {
		t.Fatal(err)
	}
	_, err = tokenClient.UploadBuffer(ctx, "docs", "x", []byte("x"), nil)
	wantCode(t, "token without role", err, http.StatusForbidden, string(bloberror.AuthorizationPermissionMismatch))
	accountID := "/subscriptions/" + e.sub + "/resourceGroups/" + e.rg + "/providers/Microsoft.Storage/storageAccounts/" + e.account
	name := uuid.NewString()
	if err := e.c.ARM().Authz().Ensure(ctx, authz.Assignment{
		ID: authz.AssignmentID(accountID, name), Name: name, Scope: accountID, RoleDefinitionID: authz.StorageBlobDataContributor,
		PrincipalID: p.ObjectID, PrincipalType: "ServicePrincipal", CreatedOn: e.clock.Now(), UpdatedOn: e.clock.Now(),
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := tokenClient.UploadBuffer(ctx, "docs", "x", []byte("x"), nil); err != nil {
		t.Fatalf("upload with Storage Blob Data Contributor: %v", err)
	}

	// regenerateKey: the old key1 is refused at once, key2 keeps working.
	if _, err := e.arm.NewAccountsClient().RegenerateKey(ctx, e.rg, e.account, armstorage.AccountRegenerateKeyParameters{KeyName: to.Ptr("key1")}, nil); err != nil {
		t.Fatal(err)
	}
	_, err = owner.NewListContainersPager(nil).NextPage(ctx)
	wantCode(t, "old key1", err, http.StatusForbidden, string(bloberror.AuthenticationFailed))
	if got := listContainers(t, e.blobClient(t, e.keys[1])); len(got) != 1 {
		t.Fatalf("containers with key2 = %v", got)
	}
	e.refreshKeys(t)
	if got := listContainers(t, e.blobClient(t, e.keys[0])); len(got) != 1 {
		t.Fatalf("containers with the new key1 = %v", got)
	}

	// Last, as it moves the cloud's clock: the account SAS expires.
	e.clock.Advance(2 * time.Hour)
	_, err = sasClient.NewListContainersPager(nil).NextPage(ctx)
	wantCode(t, "expired SAS", err, http.StatusForbidden, string(bloberror.AuthenticationFailed))
}

// TestARMChildren: containers, queues and tables made through ARM are seen by the data-plane
// SDKs and the other way round; names out of bounds get ARM's 400; deleting the account
// deletes its data (an account made again under the name starts empty).
func TestARMChildren(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	containers := e.arm.NewBlobContainersClient()
	if _, err := containers.Create(ctx, e.rg, e.account, "fromarm", armstorage.BlobContainer{}, nil); err != nil {
		t.Fatalf("create container through ARM: %v", err)
	}
	blob := e.blobClient(t, e.keys[0])
	if _, err := blob.CreateContainer(ctx, "fromblob", nil); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(listContainers(t, blob), ","); got != "fromarm,fromblob" {
		t.Fatalf("azblob lists %s", got)
	}
	if c, err := containers.Get(ctx, e.rg, e.account, "fromblob", nil); err != nil || *c.Name != "fromblob" {
		t.Fatalf("ARM get of a container made with azblob: %v", err)
	}
	var armNames []string
	pager := containers.NewListPager(e.rg, e.account, nil)
	for pager.More() {
		page, err := pager.NextPage(ctx)
		if err != nil {
			t.Fatalf("ARM list containers: %v", err)
		}
		for _, c := range page.Value {
			armNames = append(armNames, *c.Name)
		}
	}
	if strings.Join(armNames, ",") != "fromarm,fromblob" {
		t.Fatalf("ARM lists %v", armNames)
	}
	_, err := containers.Create(ctx, e.rg, e.account, "Bad_Name", armstorage.BlobContainer{}, nil)
	wantCode(t, "container name out of bounds", err, http.StatusBadRequest, "ContainerNameInvalid")
	if _, err := containers.Delete(ctx, e.rg, e.account, "fromarm", nil); err != nil {
		t.Fatal(err)
	}
	_, err = containers.Get(ctx, e.rg, e.account, "fromarm", nil)
	wantCode(t, "deleted container", err, http.StatusNotFound, "ContainerNotFound")

	if _, err := e.arm.NewQueueClient().Create(ctx, e.rg, e.account, "orders", armstorage.Queue{}, nil); err != nil {
		t.Fatalf("create queue through ARM: %v", err)
	}
	qcred, _ := azqueue.NewSharedKeyCredential(e.account, e.keys[0])
	qs, _ := azqueue.NewServiceClientWithSharedKeyCredential(e.queueURL(), qcred, &azqueue.ClientOptions{ClientOptions: e.clientOptions(t)})
	if _, err := qs.NewQueueClient("orders").EnqueueMessage(ctx, "m", nil); err != nil {
		t.Fatalf("enqueue to a queue made through ARM: %v", err)
	}
	if _, err := e.arm.NewTableClient().Create(ctx, e.rg, e.account, "ledger", nil); err != nil {
		t.Fatalf("create table through ARM: %v", err)
	}
	tcred, _ := aztables.NewSharedKeyCredential(e.account, e.keys[0])
	ts, _ := aztables.NewServiceClientWithSharedKey(e.tableURL(), tcred, &aztables.ClientOptions{ClientOptions: e.clientOptions(t)})
	if _, err := ts.NewClient("ledger").AddEntity(ctx, []byte(`{"PartitionKey":"p","RowKey":"r"}`), nil); err != nil {
		t.Fatalf("add entity to a table made through ARM: %v", err)
	}

	// Deleting the account deletes its data.
	poller, err := e.arm.NewAccountsClient().Delete(ctx, e.rg, e.account, nil)
	_ = poller
	if err != nil {
		t.Fatalf("delete account: %v", err)
	}
	e.createAccount(t)
	if got := listContainers(t, e.blobClient(t, e.keys[0])); len(got) != 0 {
		t.Fatalf("a new account of the same name lists %v", got)
	}
	ts, _ = aztables.NewServiceClientWithSharedKey(e.tableURL(), tcred, &aztables.ClientOptions{ClientOptions: e.clientOptions(t)})
	_, err = ts.NewClient("ledger").GetEntity(ctx, "p", "r", nil)
	if err == nil {
		t.Fatal("the old account's table entity is still there")
	}
}
