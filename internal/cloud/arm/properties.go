package arm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/cerulean/cerulean/internal/cloud/arm/armid"
	"github.com/cerulean/cerulean/internal/cloud/store"
)

// ErrUnchanged is what an edit of UpdateProperties returns to leave the resource as stored: the
// update then succeeds without writing.
var ErrUnchanged = errors.New("resource unchanged")

// UpdatePropertiesTx is the one read-modify-write of a stored resource's properties: it reads
// the resource id in tx, decodes its Properties into a T, lets edit change both (edit may set
// the resource's tags; it must not change its id), and stores the result. A missing resource is
// ErrNotFound(id); an error of edit is returned as is. It returns the resource as stored.
func UpdatePropertiesTx[T any](tx *store.Tx, id armid.ID, edit func(res *Resource, props *T) error) (Resource, error) {
	res, err := GetTx(tx, id)
	if err != nil {
		return Resource{}, err
	}
	var props T
	if len(res.Properties) > 0 { // none stored: edit starts from T's zero value
		if err := json.Unmarshal(res.Properties, &props); err != nil {
			return Resource{}, fmt.Errorf("decode properties of %s: %w", res.ID, err)
		}
	}
	if err := edit(&res, &props); errors.Is(err, ErrUnchanged) {
		return res, nil
	} else if err != nil {
		return Resource{}, err
	}
	if res.Properties, err = json.Marshal(props); err != nil {
		return Resource{}, fmt.Errorf("encode properties of %s: %w", res.ID, err)
	}
	if err := PutTx(tx, res); err != nil {
		return Resource{}, err
	}
	return res, nil
}

// UpdateProperties runs UpdatePropertiesTx in a transaction of its own, so that no write of
// the same resource can come between the read and the write and be lost.
func UpdateProperties[T any](ctx context.Context, s *store.Store, id armid.ID, edit func(res *Resource, props *T) error) (Resource, error) {
	var out Resource
	err := s.Update(ctx, func(tx *store.Tx) error {
		var err error
		out, err = UpdatePropertiesTx(tx, id, edit)
		return err
	})
	return out, err
}
