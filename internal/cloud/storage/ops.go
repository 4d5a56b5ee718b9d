package storage

import (
	"net/http"
	"strings"
)

// op is what a request needs: the SAS resource type and permission letters it may be granted
// by, and the RBAC action (or data action) a token's roles must grant at scope.
type op struct {
	level  byte   // SAS resource type: 's' service, 'c' container/queue/table, 'o' object
	perms  string // any one of these SAS permission letters grants it
	action string // RBAC action under Microsoft.Storage/storageAccounts/
	data   bool   // action is a data action
	scope  string // below the account's ARM id: /blobServices/default/containers/NAME, ...
	// container (queue, table) the request is about, "" at service level; blob (message
	// path, entity) below it.
	container, object string
}

const accountActions = "Microsoft.Storage/storageAccounts/"

// classify names the operation of r on service.
func classify(r *http.Request, service string) op {
	path := strings.TrimPrefix(r.URL.Path, "/")
	container, object, _ := strings.Cut(path, "/")
	read := r.Method == http.MethodGet || r.Method == http.MethodHead
	switch service {
	case "blob":
		return classifyBlob(r, container, object, read)
	case "queue":
		return classifyQueue(r, container, object, read)
	}
	return classifyTable(r, container, read)
}

// classifyBlob is classify for the blob service: the account, a container or a blob.
func classifyBlob(r *http.Request, container, object string, read bool) op {
	q := r.URL.Query()
	base := "blobServices/containers"
	o := op{container: container, object: object}
	switch {
	case container == "":
		o.level, o.scope = 's', ""
		o.action, o.perms = base+"/read", "rl"
		if !read {
			o.action, o.perms = "blobServices/write", "w"
		}
	case object == "":
		o.level, o.scope = 'c', "/blobServices/default/containers/"+container
		switch {
		case q.Get("comp") == "list":
			o.action, o.data, o.perms = base+"/blobs/read", true, "l"
		case read:
			o.action, o.perms = base+"/read", "r"
		case r.Method == http.MethodDelete:
			o.action, o.perms = base+"/delete", "d"
		default:
			o.action, o.perms = base+"/write", "wc"
		}
	default:
		o.level, o.scope, o.data = 'o', "/blobServices/default/containers/"+container, true
		switch {
		case read:
			o.action, o.perms = base+"/blobs/read", "r"
		case r.Method == http.MethodDelete:
			o.action, o.perms = base+"/blobs/delete", "d"
		default:
			o.action, o.perms = base+"/blobs/write", "wca"
		}
	}
	return o
}

// classifyQueue is classify for the queue service: the account, a queue or its messages.
func classifyQueue(r *http.Request, container, object string, read bool) op {
	q := r.URL.Query()
	base := "queueServices/queues"
	o := op{container: container, object: object}
	switch {
	case container == "":
		o.level, o.action, o.perms = 's', base+"/read", "rl"
		if !read {
			o.action, o.perms = "queueServices/write", "w"
		}
	case object == "":
		o.level, o.scope = 'c', "/queueServices/default/queues/"+container
		switch {
		case read:
			o.action, o.perms = base+"/read", "r"
		case r.Method == http.MethodDelete:
			o.action, o.perms = base+"/delete", "d"
		default:
			o.action, o.perms = base+"/write", "wc"
		}
	default:
		o.level, o.scope, o.data = 'o', "/queueServices/default/queues/"+container, true
		switch {
		case read && q.Get("peekonly") == "true":
			o.action, o.perms = base+"/messages/read", "r"
		case read:
			o.action, o.perms = base+"/messages/process/action", "p"
		case r.Method == http.MethodPost:
			o.action, o.perms = base+"/messages/add/action", "a"
		case r.Method == http.MethodDelete && q.Get("popreceipt") != "":
			o.action, o.perms = base+"/messages/process/action", "p"
		case r.Method == http.MethodDelete:
			o.action, o.perms = base+"/messages/delete", "d"
		default:
			o.action, o.perms = base+"/messages/write", "u"
		}
	}
	return o
}

// classifyTable is classify for the table service: /Tables, /Tables('name'), /name(...), /name,
// /$batch.
func classifyTable(r *http.Request, container string, read bool) op {
	base := "tableServices/tables"
	name := container
	if i := strings.IndexByte(name, '('); i >= 0 {
		name = name[:i]
	}
	o := op{}
	switch {
	case name == "":
		o.level, o.action, o.perms = 's', "tableServices/read", "r"
		if !read {
			o.action, o.perms = "tableServices/write", "w"
		}
	case strings.EqualFold(name, "Tables"):
		o.level = 'c'
		if inner := tableInParens(container); inner != "" {
			o.container, o.scope = inner, "/tableServices/default/tables/"+inner
		}
		switch {
		case read:
			o.action, o.perms = base+"/read", "rl"
		case r.Method == http.MethodDelete:
			o.action, o.perms = base+"/delete", "d"
		default:
			o.action, o.perms = base+"/write", "wc"
		}
	case name == "$batch":
		// A batch names its table inside the body; the roles that write any entity allow it.
		o.level, o.data, o.action, o.perms = 'o', true, base+"/entities/write", "w"
	default:
		o.level, o.data, o.container, o.scope = 'o', true, name, "/tableServices/default/tables/"+name
		switch {
		case read:
			o.action, o.perms = base+"/entities/read", "r"
		case r.Method == http.MethodDelete:
			o.action, o.perms = base+"/entities/delete", "d"
		case r.Method == http.MethodPost:
			o.action, o.perms = base+"/entities/add/action", "a"
		default:
			o.action, o.perms = base+"/entities/update/action", "u"
		}
	}
	return o
}

// tableInParens is NAME of "Tables('NAME')".
func tableInParens(s string) string {
	i, j := strings.Index(s, "('"), strings.LastIndex(s, "')")
	if i < 0 || j <= i+2 {
		return ""
	}
	return s[i+2 : j]
}
