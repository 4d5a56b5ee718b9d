package generic

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/google/uuid"

	"github.com/cerulean/cerulean/internal/cloud/arm"
	"github.com/cerulean/cerulean/internal/cloud/httpx"
	"github.com/cerulean/cerulean/internal/cloud/store"
)

// Key material: each resource that has keys gets them at create, from the cloud's randomness,
// kept in the store with the resource (so every listKeys answers the same until a regenerate,
// and a restart keeps them). Each provider's POST actions answer in that provider's shape.

type keySpec struct {
	Name string
	Gen  func() string
}

// keyStyle is the key material of a type and its POST actions.
type keyStyle struct {
	Keys    []keySpec
	Actions []action
}

// action is one POST action on a resource: {resource id}/{Name}.
type action struct {
	Name string
	// Rotate reads the request and returns the keys to set: a value, or "" for a new random
	// one. nil: the action only reads.
	Rotate func(r *arm.Request) (map[string]string, error)
	Answer func(v view) httpx.Response
}

func (s *keyStyle) generate() map[string]string {
	if s == nil {
		return nil
	}
	out := map[string]string{}
	for _, k := range s.Keys {
		out[k.Name] = k.Gen()
	}
	return out
}

func (s *keyStyle) gen(name string) string {
	for _, k := range s.Keys {
		if k.Name == name {
			return k.Gen()
		}
	}
	return ""
}

func randomKey(n int) func() string {
	return func() string {
		b := make([]byte, n)
		_, _ = rand.Read(b)
		return base64.StdEncoding.EncodeToString(b)
	}
}

func newGUID() string { return uuid.NewString() }

func (p *Provider) post(k *kind, act action) arm.Handler {
	return func(ctx context.Context, r *arm.Request) (httpx.Response, error) {
		id := r.ID.Parent()
		if err := checkDepth(k, id); err != nil {
			return httpx.Response{}, err
		}
		var set map[string]string
		if act.Rotate != nil {
			var err error
			if set, err = act.Rotate(r); err != nil {
				return httpx.Response{}, err
			}
		}
		var res arm.Resource
		var err error
		if set == nil {
			res, err = p.svc.GetInGroup(ctx, id)
		} else {
			err = p.svc.Store().Update(ctx, func(tx *store.Tx) error {
				if err := arm.CheckGroupTx(tx, id); err != nil {
					return err
				}
				var err error
				res, err = arm.UpdatePropertiesTx(tx, id, func(_ *arm.Resource, st *stored) error {
					if st.Keys == nil {
						st.Keys = map[string]string{}
					}
					for name, val := range set {
						if val == "" {
							val = k.Keys.gen(name)
						}
						st.Keys[name] = val
					}
					return nil
				})
				return err
			})
		}
		if err != nil {
			return httpx.Response{}, err
		}
		v, err := decode(k, res)
		if err != nil {
			return httpx.Response{}, err
		}
		return act.Answer(v), nil
	}
}

// Shared access signature rules of Service Bus and Event Hubs (namespace or entity level).

var sasKeys = &keyStyle{
	Keys: []keySpec{{"primary", randomKey(32)}, {"secondary", randomKey(32)}},
	Actions: []action{
		{Name: "listKeys", Answer: sasAnswer},
		{Name: "regenerateKeys", Rotate: sasRotate, Answer: sasAnswer},
	},
}

func sasRotate(r *arm.Request) (map[string]string, error) {
	var b struct {
		KeyType string `json:"keyType"`
		Key     string `json:"key"`
	}
	if err := r.Decode(&b); err != nil {
		return nil, err
	}
	name := map[string]string{"primarykey": "primary", "secondarykey": "secondary"}[strings.ToLower(b.KeyType)]
	if name == "" {
		return nil, arm.ErrBadRequest("The 'keyType' must be 'PrimaryKey' or 'SecondaryKey'.")
	}
	if len(b.Key) > 256 {
		return nil, arm.ErrBadRequest("The 'key' must have at most 256 characters.")
	}
	return map[string]string{name: b.Key}, nil
}

// sasAnswer is AccessKeys: the rule's keys and connection strings; an entity's rule's
// strings name the entity.
func sasAnswer(v view) httpx.Response {
	id := v.res.ID
	segs := strings.Split(strings.Trim(id, "/"), "/")
	// .../providers/NS/namespaces/{ns}[/{entities}/{entity}]/authorizationRules/{rule}
	ns, entity := "", ""
	for i := 0; i+1 < len(segs); i++ {
		if strings.EqualFold(segs[i], "namespaces") {
			ns = segs[i+1]
			if i+4 < len(segs) && !strings.EqualFold(segs[i+2], "authorizationRules") {
				entity = segs[i+3]
			}
			break
		}
	}
	cs := func(key string) string {
		s := "Endpoint=sb://" + strings.ToLower(ns) + ".servicebus.windows.net/;SharedAccessKeyName=" + v.res.Name + ";SharedAccessKey=" + key
		if entity != "" {
			s += ";EntityPath=" + entity
		}
		return s
	}
	return httpx.Response{Body: map[string]string{
		"primaryConnectionString": cs(v.st.Keys["primary"]), "secondaryConnectionString": cs(v.st.Keys["secondary"]),
		"primaryKey": v.st.Keys["primary"], "secondaryKey": v.st.Keys["secondary"], "keyName": v.res.Name,
	}}
}

// Cosmos DB accounts: read-write and read-only master keys.

var cosmosKeys = &keyStyle{
	Keys: []keySpec{{"primary", randomKey(64)}, {"secondary", randomKey(64)}, {"primaryReadonly", randomKey(64)}, {"secondaryReadonly", randomKey(64)}},
	Actions: []action{
		{Name: "listKeys", Answer: func(v view) httpx.Response {
			k := v.st.Keys
			return httpx.Response{Body: map[string]string{
				"primaryMasterKey": k["primary"], "secondaryMasterKey": k["secondary"],
				"primaryReadonlyMasterKey": k["primaryReadonly"], "secondaryReadonlyMasterKey": k["secondaryReadonly"],
			}}
		}},
		{Name: "readonlykeys", Answer: func(v view) httpx.Response {
			k := v.st.Keys
			return httpx.Response{Body: map[string]string{"primaryReadonlyMasterKey": k["primaryReadonly"], "secondaryReadonlyMasterKey": k["secondaryReadonly"]}}
		}},
		{Name: "listConnectionStrings", Answer: cosmosConnectionStrings},
		{Name: "regenerateKey", Rotate: cosmosRotate, Answer: func(view) httpx.Response { return httpx.Response{Status: http.StatusOK} }},
	},
}

func cosmosRotate(r *arm.Request) (map[string]string, error) {
	var b struct {
		KeyKind string `json:"keyKind"`
	}
	if err := r.Decode(&b); err != nil {
		return nil, err
	}
	for _, n := range []string{"primary", "secondary", "primaryReadonly", "secondaryReadonly"} {
		if strings.EqualFold(b.KeyKind, n) {
			return map[string]string{n: ""}, nil
		}
	}
	return nil, arm.ErrBadRequest("The 'keyKind' must be one of 'primary', 'secondary', 'primaryReadonly', 'secondaryReadonly'.")
}

func cosmosConnectionStrings(v view) httpx.Response {
	name := strings.ToLower(v.res.Name)
	var kindName string
	_ = json.Unmarshal(v.st.Body["kind"], &kindName)
	type cs struct {
		ConnectionString string `json:"connectionString"`
		Description      string `json:"description"`
		KeyKind          string `json:"keyKind"`
		Type             string `json:"type"`
	}
	var out []cs
	for _, k := range []struct{ key, kind, label string }{
		{"primary", "Primary", "Primary"}, {"secondary", "Secondary", "Secondary"},
		{"primaryReadonly", "PrimaryReadonly", "Primary Read-Only"}, {"secondaryReadonly", "SecondaryReadonly", "Secondary Read-Only"},
	} {
		key := v.st.Keys[k.key]
		if strings.EqualFold(kindName, "MongoDB") {
			out = append(out, cs{
				ConnectionString: "mongodb://" + name + ":" + key + "@" + name + ".mongo.cosmos.azure.com:10255/?ssl=true&replicaSet=globaldb&retrywrites=false&maxIdleTimeMS=120000&appName=@" + name + "@",
				Description:      k.label + " MongoDB Connection String", KeyKind: k.kind, Type: "MongoDB",
			})
			continue
		}
		typ := "Sql"
		if strings.HasSuffix(k.key, "Readonly") {
			typ = "SqlReadonly"
		}
		out = append(out, cs{
			ConnectionString: "AccountEndpoint=https://" + name + ".documents.azure.com:443/;AccountKey=" + key + ";",
			Description:      k.label + " SQL Connection String", KeyKind: k.kind, Type: typ,
		})
	}
	return httpx.Response{Body: map[string]any{"connectionStrings": out}}
}

// Container registries: the admin user's two passwords.

var registryKeys = &keyStyle{
	Keys: []keySpec{{"password", randomKey(24)}, {"password2", randomKey(24)}},
	Actions: []action{
		{Name: "listCredentials", Answer: registryCredentials},
		{Name: "regenerateCredential", Rotate: registryRotate, Answer: registryCredentials},
	},
}

func registryRotate(r *arm.Request) (map[string]string, error) {
	var b struct {
		Name string `json:"name"`
	}
	if err := r.Decode(&b); err != nil {
		return nil, err
	}
	switch strings.ToLower(b.Name) {
	case "password", "password2":
		return map[string]string{strings.ToLower(b.Name): ""}, nil
	}
	return nil, arm.ErrBadRequest("The 'name' must be 'password' or 'password2'.")
}

func registryCredentials(v view) httpx.Response {
	type pw struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	}
	return httpx.Response{Body: map[string]any{
		"username":  v.res.Name,
		"passwords": []pw{{"password", v.st.Keys["password"]}, {"password2", v.st.Keys["password2"]}},
	}}
}

// Log Analytics workspaces: the agents' shared keys and the workspace (customer) id.

var workspaceKeys = &keyStyle{
	Keys: []keySpec{{"primary", randomKey(64)}, {"secondary", randomKey(64)}, {"customerId", newGUID}},
	Actions: []action{
		{Name: "sharedKeys", Answer: workspaceShared},
		{Name: "regenerateSharedKey", Rotate: func(*arm.Request) (map[string]string, error) {
			return map[string]string{"primary": "", "secondary": ""}, nil
		}, Answer: workspaceShared},
	},
}

func workspaceShared(v view) httpx.Response {
	return httpx.Response{Body: map[string]string{"primarySharedKey": v.st.Keys["primary"], "secondarySharedKey": v.st.Keys["secondary"]}}
}

// Application Insights components: the instrumentation key and application id (no actions:
// the component's GET reports them, as Azure's does).
var componentKeys = &keyStyle{Keys: []keySpec{{"instrumentationKey", newGUID}, {"appId", newGUID}}}

// guidOnly is the resourceGuid network resources report.
var guidOnly = &keyStyle{Keys: []keySpec{{"resourceGuid", newGUID}}}

// Computed read-only properties.

func busEndpoint(v view, props map[string]any) {
	props["serviceBusEndpoint"] = "https://" + strings.ToLower(v.res.Name) + ".servicebus.windows.net:443/"
	props["metricId"] = subscriptionOf(v.res.ID) + ":" + strings.ToLower(v.res.Name)
	props["status"] = "Active"
}

func entityStatus(_ view, props map[string]any) {
	if _, ok := props["status"]; !ok {
		props["status"] = "Active"
	}
}

func cosmosEndpoint(v view, props map[string]any) {
	props["documentEndpoint"] = "https://" + strings.ToLower(v.res.Name) + ".documents.azure.com:443/"
}

func resourceGUID(v view, props map[string]any) { props["resourceGuid"] = v.st.Keys["resourceGuid"] }

func loginServer(v view, props map[string]any) {
	props["loginServer"] = strings.ToLower(v.res.Name) + ".azurecr.io"
}

func customerID(v view, props map[string]any) { props["customerId"] = v.st.Keys["customerId"] }

func instrumentation(v view, props map[string]any) {
	ik, loc := v.st.Keys["instrumentationKey"], v.res.Location
	props["InstrumentationKey"] = ik
	props["ConnectionString"] = "InstrumentationKey=" + ik + ";IngestionEndpoint=https://" + loc + ".in.applicationinsights.azure.com/;LiveEndpoint=https://" + loc + ".livediagnostics.monitor.azure.com/"
	props["AppId"] = v.st.Keys["appId"]
	props["ApplicationId"] = v.res.Name
	props["Name"] = v.res.Name
}

func subscriptionOf(id string) string {
	segs := strings.Split(strings.Trim(id, "/"), "/")
	if len(segs) > 1 {
		return segs[1]
	}
	return ""
}
