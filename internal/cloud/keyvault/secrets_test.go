package keyvault_test

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/security/keyvault/azsecrets"

	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
)

// TestSecretsRoundTrip runs every secrets operation through azsecrets against an RBAC vault the
// bootstrap principal holds Key Vault Secrets Officer on.
func TestSecretsRoundTrip(t *testing.T) {
	const first, second = "val-7c1e-first", "val-7c1e-second"
	e := start(t)
	uri := e.rbacVault(t, "kv-roundtrip")
	u, _ := url.Parse(uri)
	if u.Scheme != "https" || u.Hostname() != "127.0.0.1" || u.Port() == "" || u.Path != "/" {
		t.Fatalf("vaultUri = %s, want https://127.0.0.1:PORT/", uri)
	}
	e.assign(t, e.vaultID("kv-roundtrip"), roleSecretsOfficer, e.s.ObjectID)
	c := e.secrets(t, uri, e.owner)
	ctx := t.Context()

	// Set, then get the latest (empty version: "/secrets/NAME/") and by version.
	set1, err := c.SetSecret(ctx, "db-password", azsecrets.SetSecretParameters{
		Value: to.Ptr(first), ContentType: to.Ptr("text/plain"), Tags: map[string]*string{"app": to.Ptr("web")},
	}, nil)
	if err != nil {
		t.Fatalf("set: %v", err)
	}
	v1 := set1.ID.Version()
	if len(v1) != 32 || set1.ID.Name() != "db-password" || !strings.HasPrefix(string(*set1.ID), uri+"secrets/db-password/") {
		t.Fatalf("secret id = %s", *set1.ID)
	}
	set2, err := c.SetSecret(ctx, "db-password", azsecrets.SetSecretParameters{Value: to.Ptr(second)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.GetSecret(ctx, "db-password", "", nil)
	if err != nil || *got.Value != second || got.ID.Version() != set2.ID.Version() {
		t.Fatalf("get latest = %v, %v", got.Value, err)
	}
	got, err = c.GetSecret(ctx, "db-password", v1, nil)
	if err != nil || *got.Value != first || *got.ContentType != "text/plain" || *got.Tags["app"] != "web" {
		t.Fatalf("get by version = %+v, %v", got.Secret, err)
	}
	if got.Attributes.Created == nil || *got.Attributes.RecoveryLevel != "Recoverable+Purgeable" || *got.Attributes.RecoverableDays != 90 {
		t.Fatalf("attributes = %+v", got.Attributes)
	}
	_, err = c.GetSecret(ctx, "db-password", strings.Repeat("0", 32), nil)
	cloudtest.RespErr(t, err, http.StatusNotFound, "SecretNotFound")
	_, err = c.GetSecret(ctx, "missing", "", nil)
	cloudtest.RespErr(t, err, http.StatusNotFound, "SecretNotFound")

	// Update attributes: disabled, then outside nbf/exp; get honours them.
	_, err = c.UpdateSecretProperties(ctx, "db-password", v1, azsecrets.UpdateSecretPropertiesParameters{
		SecretAttributes: &azsecrets.SecretAttributes{Enabled: to.Ptr(false)}, ContentType: to.Ptr("application/x-old"),
	}, nil)
	if err != nil {
		t.Fatalf("update: %v", err)
	}
	_, err = c.GetSecret(ctx, "db-password", v1, nil)
	cloudtest.RespErr(t, err, http.StatusForbidden, "Forbidden")
	if code := innerCode(t, err); code != "SecretDisabled" {
		t.Errorf("disabled: innererror %q", code)
	}
	past, future := time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	if _, err := c.SetSecret(ctx, "expired", azsecrets.SetSecretParameters{Value: to.Ptr("x"), SecretAttributes: &azsecrets.SecretAttributes{Expires: &past}}, nil); err != nil {
		t.Fatal(err)
	}
	_, err = c.GetSecret(ctx, "expired", "", nil)
	cloudtest.RespErr(t, err, http.StatusForbidden, "Forbidden")
	if _, err := c.SetSecret(ctx, "not-yet", azsecrets.SetSecretParameters{Value: to.Ptr("x"), SecretAttributes: &azsecrets.SecretAttributes{NotBefore: &future}}, nil); err != nil {
		t.Fatal(err)
	}
	_, err = c.GetSecret(ctx, "not-yet", "", nil)
	cloudtest.RespErr(t, err, http.StatusForbidden, "Forbidden")
	upd, err := c.UpdateSecretProperties(ctx, "not-yet", "", azsecrets.UpdateSecretPropertiesParameters{
		SecretAttributes: &azsecrets.SecretAttributes{NotBefore: &past},
	}, nil)
	if err != nil || upd.Value != nil {
		t.Fatalf("update latest = %v (value returned: %v)", err, upd.Value != nil)
	}
	if got, err := c.GetSecret(ctx, "not-yet", "", nil); err != nil || *got.Value != "x" {
		t.Fatalf("get after moving nbf: %v", err)
	}

	// List with paging (more than one page of 25) and list versions.
	for i := range 30 {
		if _, err := c.SetSecret(ctx, fmt.Sprintf("bulk-%02d", i), azsecrets.SetSecretParameters{Value: to.Ptr("v")}, nil); err != nil {
			t.Fatal(err)
		}
	}
	names, pages := map[string]bool{}, 0
	for pager := c.NewListSecretPropertiesPager(nil); pager.More(); {
		page, err := pager.NextPage(ctx)
		if err != nil {
			t.Fatalf("list: %v", err)
		}
		pages++
		for _, s := range page.Value {
			if s.ID.Version() != "" {
				t.Errorf("list item id %s has a version", *s.ID)
			}
			names[s.ID.Name()] = true
		}
	}
	if len(names) != 33 || pages != 2 {
		t.Fatalf("listed %d names in %d pages, want 33 in 2", len(names), pages)
	}
	for range 30 {
		if _, err := c.SetSecret(ctx, "many-versions", azsecrets.SetSecretParameters{Value: to.Ptr("v")}, nil); err != nil {
			t.Fatal(err)
		}
	}
	ids, pages := map[string]bool{}, 0
	for pager := c.NewListSecretPropertiesVersionsPager("many-versions", nil); pager.More(); {
		page, err := pager.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, s := range page.Value {
			ids[s.ID.Version()] = true
		}
	}
	if len(ids) != 30 || pages != 2 {
		t.Fatalf("listed %d versions in %d pages, want 30 in 2", len(ids), pages)
	}
	versions := 0
	for pager := c.NewListSecretPropertiesVersionsPager("db-password", nil); pager.More(); {
		page, err := pager.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		versions += len(page.Value)
	}
	if versions != 2 {
		t.Fatalf("versions = %d, want 2", versions)
	}

	// Soft delete, set-while-deleted conflict, recover.
	del, err := c.DeleteSecret(ctx, "db-password", nil)
	if err != nil || del.RecoveryID == nil || del.DeletedDate == nil || del.ScheduledPurgeDate == nil || del.Value != nil {
		t.Fatalf("delete = %+v, %v", del.DeletedSecret, err)
	}
	if d := del.ScheduledPurgeDate.Sub(*del.DeletedDate); d != 90*24*time.Hour {
		t.Errorf("scheduled purge %s after deletion, want 90 days", d)
	}
	_, err = c.GetSecret(ctx, "db-password", "", nil)
	cloudtest.RespErr(t, err, http.StatusNotFound, "SecretNotFound")
	_, err = c.SetSecret(ctx, "db-password", azsecrets.SetSecretParameters{Value: to.Ptr("again")}, nil)
	cloudtest.RespErr(t, err, http.StatusConflict, "Conflict")
	if code := innerCode(t, err); code != "ObjectIsDeletedButRecoverable" {
		t.Errorf("set deleted: innererror %q", code)
	}
	if ds, err := c.GetDeletedSecret(ctx, "db-password", nil); err != nil || ds.ID.Name() != "db-password" {
		t.Fatalf("get deleted: %v", err)
	}
	deleted := 0
	for pager := c.NewListDeletedSecretPropertiesPager(nil); pager.More(); {
		page, err := pager.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		deleted += len(page.Value)
	}
	if deleted != 1 {
		t.Fatalf("deleted secrets = %d, want 1", deleted)
	}
	if _, err := c.RecoverDeletedSecret(ctx, "db-password", nil); err != nil {
		t.Fatalf("recover: %v", err)
	}
	if got, err := c.GetSecret(ctx, "db-password", "", nil); err != nil || *got.Value != second {
		t.Fatalf("get after recover: %v", err)
	}
	_, err = c.RecoverDeletedSecret(ctx, "db-password", nil)
	cloudtest.RespErr(t, err, http.StatusNotFound, "SecretNotFound")

	// Backup, delete and purge, restore: every version comes back.
	backup, err := c.BackupSecret(ctx, "db-password", nil)
	if err != nil || len(backup.Value) == 0 || strings.Contains(string(backup.Value), second) {
		t.Fatalf("backup: %v", err)
	}
	if _, err := c.DeleteSecret(ctx, "db-password", nil); err != nil {
		t.Fatal(err)
	}
	_, err = c.RestoreSecret(ctx, azsecrets.RestoreSecretParameters{SecretBackup: backup.Value}, nil)
	cloudtest.RespErr(t, err, http.StatusConflict, "Conflict")
	if _, err := c.PurgeDeletedSecret(ctx, "db-password", nil); err != nil {
		t.Fatalf("purge: %v", err)
	}
	_, err = c.GetDeletedSecret(ctx, "db-password", nil)
	cloudtest.RespErr(t, err, http.StatusNotFound, "SecretNotFound")
	if _, err := c.RestoreSecret(ctx, azsecrets.RestoreSecretParameters{SecretBackup: backup.Value}, nil); err != nil {
		t.Fatalf("restore: %v", err)
	}
	if got, err := c.GetSecret(ctx, "db-password", "", nil); err != nil || *got.Value != second {
		t.Fatalf("restored latest version: %v", err)
	}
	_, err = c.GetSecret(ctx, "db-password", v1, nil) // restored, and still disabled
	cloudtest.RespErr(t, err, http.StatusForbidden, "Forbidden")
	tampered := append([]byte(nil), backup.Value...)
	tampered[len(tampered)-1] ^= 1
	_, err = c.RestoreSecret(ctx, azsecrets.RestoreSecretParameters{SecretBackup: tampered}, nil)
	cloudtest.RespErr(t, err, http.StatusBadRequest, "BadParameter")

	// Nothing of a value or a token reaches the logs.
	for _, secret := range []string{first, second, cloudtest.Token(t, e.owner, vaultScope)} {
		if strings.Contains(e.logs.String(), secret) {
			t.Errorf("logs contain a secret value or token")
		}
	}
}

// TestChallengeAndTokens checks the 401 challenge, the audiences accepted and the api-versions.
func TestChallengeAndTokens(t *testing.T) {
	e := start(t)
	uri := e.rbacVault(t, "kv-challenge")
	e.assign(t, e.vaultID("kv-challenge"), roleSecretsOfficer, e.s.ObjectID)
	resp, body := e.raw(t, "GET", uri+"secrets/x/?api-version=2026-04-01", "", "")
	want := fmt.Sprintf(`Bearer authorization="%s/%s", resource="https://vault.azure.net"`, e.s.URL, e.s.TenantID)
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") != want {
		t.Fatalf("no token: %d %q, want 401 %q", resp.StatusCode, resp.Header.Get("WWW-Authenticate"), want)
	}
	if errBody, _ := body["error"].(map[string]any); errBody["code"] != "Unauthorized" {
		t.Fatalf("no token: body %v", body)
	}
	armToken := cloudtest.Token(t, e.owner, "https://management.core.windows.net//.default")
	if resp, _ := e.raw(t, "GET", uri+"secrets?api-version=7.4", armToken, ""); resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") != want {
		t.Fatalf("ARM token: %d", resp.StatusCode)
	}
	if resp, _ := e.raw(t, "GET", uri+"secrets?api-version=7.4", "not-a-jwt", ""); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("garbage token: %d", resp.StatusCode)
	}
	// A token with the right claims signed by another key (the cloud's kid) is refused.
	good := cloudtest.Token(t, e.owner, vaultScope)
	forged, err := forge(good)
	if err != nil {
		t.Fatal(err)
	}
	if resp, _ := e.raw(t, "GET", uri+"secrets?api-version=7.4", forged, ""); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("forged token: %d", resp.StatusCode)
	}
	for _, scope := range []string{"https://vault.azure.net/.default", "https://vault.azure.net//.default"} {
		tok := cloudtest.Token(t, e.owner, scope)
		for _, v := range []string{"7.0", "7.6", "2025-07-01", "2026-04-01"} {
			if resp, body := e.raw(t, "GET", uri+"secrets?api-version="+v, tok, ""); resp.StatusCode != http.StatusOK {
				t.Errorf("scope %s api-version %s: %d %v", scope, v, resp.StatusCode, body)
			}
		}
		for _, v := range []string{"", "6.0", "2016-10-01", "banana"} {
			if resp, body := e.raw(t, "GET", uri+"secrets?api-version="+v, tok, ""); resp.StatusCode != http.StatusBadRequest {
				t.Errorf("api-version %q: %d %v", v, resp.StatusCode, body)
			}
		}
	}
}

// TestBadInputWritesNothing sends malformed requests and checks the Key Vault error shape and
// that the store saw no commit.
func TestBadInputWritesNothing(t *testing.T) {
	e := start(t)
	uri := e.rbacVault(t, "kv-badinput")
	e.assign(t, e.vaultID("kv-badinput"), roleSecretsOfficer, e.s.ObjectID)
	tok := cloudtest.Token(t, e.owner, vaultScope)
	const q = "?api-version=7.5"
	big := strings.Repeat("v", 25*1024+1)
	for _, tc := range []struct{ method, path, body string }{
		{"PUT", "secrets/bad_name" + q, `{"value":"v"}`},
		{"PUT", "secrets/" + strings.Repeat("n", 128) + q, `{"value":"v"}`},
		{"PUT", "secrets/ok" + q, `{"value":"` + big + `"}`},
		{"PUT", "secrets/ok" + q, `{"contentType":"x"}`},
		{"PUT", "secrets/ok" + q, `{"value":"v","tags":{"":"x"}}`},
		{"PUT", "secrets/ok" + q, `not json`},
		{"PUT", "secrets/ok" + q, `{"value":"v","attributes":{"nbf":10,"exp":5}}`},
		{"PATCH", "secrets/ok/zzz" + q, `{}`},
		{"GET", "secrets/ok/0123" + q, ``},
		{"POST", "secrets/restore" + q, `{"value":"AAAA"}`},
		{"POST", "secrets/restore" + q, `{"value":"%%%"}`},
		{"GET", "secrets?api-version=7.5&maxresults=0", ``},
	} {
		before := e.c.Store().Commits()
		resp, body := e.raw(t, tc.method, uri+tc.path, tok, tc.body)
		errBody, _ := body["error"].(map[string]any)
		if resp.StatusCode != http.StatusBadRequest || errBody["code"] != "BadParameter" || errBody["message"] == "" {
			t.Errorf("%s %.40s: %d %v", tc.method, tc.path, resp.StatusCode, body)
		}
		if after := e.c.Store().Commits(); after != before {
			t.Errorf("%s %.40s wrote %d commits", tc.method, tc.path, after-before)
		}
	}
}

// forge re-signs a token's header and claims with a fresh key.
func forge(token string) (string, error) {
	parts := strings.Split(token, ".")
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return "", err
	}
	signing := parts[0] + "." + parts[1]
	sum := sha256.Sum256([]byte(signing))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
	if err != nil {
		return "", err
	}
	return signing + "." + base64.RawURLEncoding.EncodeToString(sig), nil
}
