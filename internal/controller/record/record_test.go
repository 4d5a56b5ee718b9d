package record_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/to"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/Azure/azure-sdk-for-go/sdk/resourcemanager/resources/armresources/v4"

	"github.com/cerulean/cerulean/internal/cloud"
	"github.com/cerulean/cerulean/internal/cloud/cloudtest"
	"github.com/cerulean/cerulean/internal/controller/record"
)

// Real errors of the local cloud, wrapped as the controllers wrap them, keep their first line
// and Azure's error code within the API server's limit.
func TestNoteKeepsFirstLineAndCode(t *testing.T) {
	c := cloudtest.Start(t, cloud.Options{ARM: cloudtest.FastARM()})
	s := c.Settings()
	long := strings.Repeat("x", 900) // the ids and paths a real message names

	_, entraErr := cloudtest.SecretCred(t, c, s.ClientID, "not-the-secret").GetToken(t.Context(), policy.TokenRequestOptions{Scopes: []string{s.ResourceManagerAudience + "/.default"}})
	var authErr *azidentity.AuthenticationFailedError
	if !errors.As(entraErr, &authErr) {
		t.Fatalf("Entra answered %v, want an authentication failure", entraErr)
	}
	groups, err := armresources.NewResourceGroupsClient(s.SubscriptionID, cloudtest.OwnerCred(t, c), cloudtest.ARMOptions(c))
	if err != nil {
		t.Fatal(err)
	}
	_, armErr := groups.CreateOrUpdate(t.Context(), "bad name with spaces", armresources.ResourceGroup{Location: to.Ptr("westeurope")}, nil)
	var re *azcore.ResponseError
	if !errors.As(armErr, &re) || re.StatusCode != 400 || re.ErrorCode == "" {
		t.Fatalf("ARM answered %v, want a 400 with an error code", armErr)
	}
	for _, tc := range []struct {
		name, code string
		err        error
	}{
		{"entra", "invalid_client", fmt.Errorf("get a token for the secret ns/cred credential (client c) %s: %w", long, entraErr)},
		{"arm", re.ErrorCode, fmt.Errorf("create or update /subscriptions/%s/resourceGroups/%s: %w", s.SubscriptionID, long, armErr)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg := tc.err.Error()
			if len(msg) <= record.MaxNote {
				t.Fatalf("message of %d bytes: too short to test", len(msg))
			}
			note := record.Note(msg)
			first, _, _ := strings.Cut(msg, "\n")
			if len(note) > record.MaxNote || !utf8.ValidString(note) {
				t.Fatalf("note of %d bytes (valid UTF-8: %v)", len(note), utf8.ValidString(note))
			}
			if !strings.HasPrefix(note, first[:200]) || !strings.Contains(note, tc.code) {
				t.Fatalf("note lost the first line or the code %q:\n%s", tc.code, note)
			}
		})
	}
}

func TestNoteShortUnchanged(t *testing.T) {
	if got := record.Note("short\nmessage"); got != "short\nmessage" {
		t.Fatalf("Note changed a short message: %q", got)
	}
	if got := record.Note(strings.Repeat("é", 1000)); len(got) > record.MaxNote || !utf8.ValidString(got) {
		t.Fatalf("cut inside a character or too long: %d bytes", len(got))
	}
}
