package armresource

import (
	"testing"

	"github.com/cerulean/cerulean/internal/controller/exports"
)

// The connection-string expressions docs/resources.md shows evaluate as written, over a status
// as the API server returns it (numbers as int64).
func TestDocumentedConnectionStrings(t *testing.T) {
	redis := map[string]any{"status": map[string]any{"hostName": "cache1.redis.cache.windows.net", "sslPort": int64(6380)}}
	pg := map[string]any{
		"spec":   map[string]any{"administratorLogin": "pgadmin"},
		"status": map[string]any{"fullyQualifiedDomainName": "pg1.postgres.database.azure.com"},
	}
	secret := map[string]string{"primaryKey": "k1", "secondaryKey": "k2"}
	for _, tc := range []struct {
		obj  map[string]any
		kind string
		expr string
		want string
	}{
		{redis, exports.KindSecret, `self.status.hostName + ":" + string(self.status.sslPort) + ",password=" + secret.primaryKey + ",ssl=True,abortConnect=False"`,
			"cache1.redis.cache.windows.net:6380,password=k1,ssl=True,abortConnect=False"},
		{redis, exports.KindSecret, `"rediss://:" + secret.primaryKey + "@" + self.status.hostName + ":" + string(self.status.sslPort)`,
			"rediss://:k1@cache1.redis.cache.windows.net:6380"},
		{pg, exports.KindConfigMap, `"host=" + self.status.fullyQualifiedDomainName + " port=5432 user=" + self.spec.administratorLogin + " dbname=app sslmode=require"`,
			"host=pg1.postgres.database.azure.com port=5432 user=pgadmin dbname=app sslmode=require"},
	} {
		vals, err := exports.EvaluateWith(tc.obj, secret, []exports.Expression{{Destination: exports.Destination{Kind: tc.kind, Name: "n", Key: "k"}, Expr: tc.expr}})
		if err != nil {
			t.Fatalf("%s: %v", tc.expr, err)
		}
		if len(vals) != 1 || vals[0].Value != tc.want {
			t.Errorf("%s = %v, want %q", tc.expr, vals, tc.want)
		}
	}
}
