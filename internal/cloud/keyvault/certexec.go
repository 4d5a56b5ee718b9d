package keyvault

import (
	"context"

	"github.com/cerulean/cerulean/internal/cloud/httpx"
)

func (s *Service) execCert(ctx context.Context, v Vault, rt route, body []byte) (httpx.Response, error) {
	return httpx.Response{}, errNotFound()
}
