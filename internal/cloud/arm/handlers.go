package arm

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/cerulean/cerulean/internal/cloud/arm/armid"
	"github.com/cerulean/cerulean/internal/cloud/httpx"
	"github.com/cerulean/cerulean/internal/cloud/store"
)

// Helpers for what providers' handlers have in common.

// IsNotFound reports whether err is an ARM 404 (a missing resource or resource group).
func IsNotFound(err error) bool {
	var ae *Error
	return errors.As(err, &ae) && ae.Status == http.StatusNotFound
}

// NormalizeLocation is a location as ARM stores it: lower case, without spaces ("West Europe"
// is "westeurope").
func NormalizeLocation(l string) string { return strings.ToLower(strings.ReplaceAll(l, " ", "")) }

// CheckLocation is the 400 LocationRequired for a missing (or implausibly long) location of a
// PUT body, or nil.
func CheckLocation(l string) error {
	if l == "" || len(l) > 64 {
		return Errorf(http.StatusBadRequest, "LocationRequired", "The location property is required for this definition.")
	}
	return nil
}

// ValidateTags applies ARM's tag limits: at most 50, names up to 512 characters, values up to 256.
func ValidateTags(tags map[string]string) error {
	if len(tags) > 50 {
		return Errorf(http.StatusBadRequest, "InvalidTagCount", "The number of tags exceeds the limit of 50.")
	}
	for k, v := range tags {
		if k == "" || len(k) > 512 || strings.ContainsAny(k, "<>%&\\?/") {
			return Errorf(http.StatusBadRequest, "InvalidTagNameCharacters", "The tag name '%s' is invalid.", k[:min(len(k), 64)])
		}
		if len(v) > 256 {
			return Errorf(http.StatusBadRequest, "InvalidTagValueLength", "The value of tag '%s' exceeds 256 characters.", k[:min(len(k), 64)])
		}
	}
	return nil
}

// PatchTags serves the tags-only PATCH (the SDKs' UpdateTags) of a resource in a resource group:
// the body's tags replace the resource's, an absent "tags" keeps them. view renders the answer.
func (s *Service) PatchTags(ctx context.Context, r *Request, view func(Resource) any) (httpx.Response, error) {
	var body struct {
		Tags map[string]string `json:"tags"`
	}
	if err := r.Decode(&body); err != nil {
		return httpx.Response{}, err
	}
	if err := ValidateTags(body.Tags); err != nil {
		return httpx.Response{}, err
	}
	var out Resource
	err := s.Store().Update(ctx, func(tx *store.Tx) error {
		if err := CheckGroupTx(tx, r.ID); err != nil {
			return err
		}
		cur, err := GetTx(tx, r.ID)
		if err != nil {
			return err
		}
		if body.Tags != nil {
			cur.Tags = body.Tags
		}
		out = cur
		return PutTx(tx, cur)
	})
	if err != nil {
		return httpx.Response{}, err
	}
	return httpx.Response{Body: view(out)}, nil
}

// GroupExistsTx is CheckGroupTx for reads: only a missing resource group is an error; one being
// deleted can still be read.
func GroupExistsTx(tx *store.Tx, id armid.ID) error {
	if err := CheckGroupTx(tx, id); IsNotFound(err) {
		return err
	}
	return nil
}

// GetInGroup reads the resource with this id: ResourceGroupNotFound if its resource group is
// missing, else what GetTx answers.
func (s *Service) GetInGroup(ctx context.Context, id armid.ID) (Resource, error) {
	var out Resource
	err := s.Store().View(ctx, func(tx *store.Tx) error {
		if err := GroupExistsTx(tx, id); err != nil {
			return err
		}
		var err error
		out, err = GetTx(tx, id)
		return err
	})
	return out, err
}

// List returns the resources of typ at the scope of a list request: the parent of its id, which
// must be the subscription or a resource group (else 404 InvalidResourceType). check is the
// resource group's precondition, run first in the same transaction: GroupExistsTx, or
// CheckGroupTx where a group being deleted cannot be listed either.
func (s *Service) List(ctx context.Context, id armid.ID, typ string, check func(*store.Tx, armid.ID) error) ([]Resource, error) {
	scope := id.Parent()
	if n := len(scope.Segments); n != 1 && (n != 2 || scope.ResourceGroup() == "") {
		return nil, Errorf(http.StatusNotFound, "InvalidResourceType", "The resource type '%s' cannot be listed at this scope.", typ)
	}
	var all []Resource
	err := s.Store().View(ctx, func(tx *store.Tx) error {
		if err := check(tx, id); err != nil {
			return err
		}
		var err error
		all, err = ListTx(tx, scope, typ)
		return err
	})
	return all, err
}

// ListResponse is the answer to a list request: {"value": [...]} with the view of each resource,
// an empty array (never null) when there are none.
func ListResponse[T any](all []Resource, view func(Resource) T) httpx.Response {
	out := struct {
		Value []T `json:"value"`
	}{Value: make([]T, 0, len(all))}
	for _, r := range all {
		out.Value = append(out.Value, view(r))
	}
	return httpx.Response{Body: out}
}

// DeleteIfPresent deletes the resource with this id, with everything DeleteTx removes along with
// it, in one transaction. found is false, and nothing is deleted, if there is no such resource.
func (s *Service) DeleteIfPresent(ctx context.Context, id armid.ID) (found bool, err error) {
	err = s.Store().Update(ctx, func(tx *store.Tx) error {
		cur, err := GetTx(tx, id)
		if IsNotFound(err) {
			return nil
		} else if err != nil {
			return err
		}
		found = true
		return s.DeleteTx(tx, cur)
	})
	return found, err
}

// Deleted is a synchronous delete's answer: 200, or 204 when there was nothing to delete.
func Deleted(found bool) httpx.Response {
	if !found {
		return httpx.Response{Status: http.StatusNoContent}
	}
	return httpx.Response{Status: http.StatusOK}
}
