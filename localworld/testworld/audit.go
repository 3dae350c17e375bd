package testworld

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// auditedVerbs are the verbs of writes, as audit events and RBAC name them.
var auditedVerbs = []string{"create", "update", "patch", "delete", "deletecollection"}

// identityArgs writes the static token file and, with AuditWrites, the audit policy for
// opts.Users, and returns the API server flags that use them.
func (k *Kube) identityArgs(opts KubeOptions) ([]string, error) {
	if len(opts.Users) == 0 {
		if opts.AuditWrites {
			return nil, errors.New("testworld: KubeOptions.AuditWrites needs Users whose writes to record")
		}
		return nil, nil
	}
	k.tokens = map[string]string{}
	var csv strings.Builder
	for _, u := range opts.Users {
		if u == "" || strings.ContainsAny(u, ",\"\n") || k.tokens[u] != "" {
			return nil, fmt.Errorf("testworld: user %q is empty, repeated or not a plain name", u)
		}
		k.tokens[u] = randomHex(24)
		// token,user,uid,"groups": system:masters makes the user an administrator, as the admin
		// certificate is; the name is what tells its requests apart.
		fmt.Fprintf(&csv, "%s,%s,%s,\"system:masters\"\n", k.tokens[u], u, u)
	}
	tokenFile := filepath.Join(k.Dir, "tokens.csv")
	if err := os.WriteFile(tokenFile, []byte(csv.String()), 0o600); err != nil {
		return nil, err
	}
	args := []string{"--token-auth-file=" + tokenFile}
	if !opts.AuditWrites {
		return args, nil
	}
	policy, err := json.Marshal(auditPolicy(opts.Users, opts.AuditServiceAccounts))
	if err != nil {
		return nil, err
	}
	policyFile := filepath.Join(k.Dir, "audit-policy.json")
	if err := os.WriteFile(policyFile, policy, 0o600); err != nil {
		return nil, err
	}
	k.auditLog = filepath.Join(k.Dir, "audit.log")
	return append(args,
		"--audit-policy-file="+policyFile,
		"--audit-log-path="+k.auditLog,
		"--audit-log-format=json",
		// Every event is written before the request is answered, so a write the client saw
		// answered is in the log when it is read.
		"--audit-log-mode=blocking",
	), nil
}

// auditPolicy records the writes of users (and with serviceAccounts, of every ServiceAccount)
// at Metadata level (who, verb, object, answer; no bodies), once per request (at
// ResponseComplete), and nothing else.
func auditPolicy(users []string, serviceAccounts bool) map[string]any {
	rules := []map[string]any{{"level": "Metadata", "users": users, "verbs": auditedVerbs}}
	if serviceAccounts {
		rules = append(rules, map[string]any{"level": "Metadata", "userGroups": []string{"system:serviceaccounts"}, "verbs": auditedVerbs})
	}
	return map[string]any{
		"apiVersion": "audit.k8s.io/v1",
		"kind":       "Policy",
		"omitStages": []string{"RequestReceived"},
		"rules":      append(rules, map[string]any{"level": "None"}),
	}
}

// KubeconfigFor writes (once) and returns a kubeconfig file that acts as one of
// KubeOptions.Users with its static token.
func (k *Kube) KubeconfigFor(user string) (string, error) {
	token, ok := k.tokens[user]
	if !ok {
		return "", fmt.Errorf("testworld: %q is not among the cluster's KubeOptions.Users", user)
	}
	path := filepath.Join(k.Dir, "kubeconfig-"+user)
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["runnerflow-test"] = &clientcmdapi.Cluster{Server: k.host(), CertificateAuthorityData: k.caPEM}
	kc.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts["runnerflow-test"] = &clientcmdapi.Context{Cluster: "runnerflow-test", AuthInfo: user}
	kc.CurrentContext = "runnerflow-test"
	return path, clientcmd.WriteToFile(*kc, path)
}

// kubeconfigOf is the kubeconfig a process acting as user runs with: its own identity when the
// cluster has one for it, the admin's otherwise.
func (k *Kube) kubeconfigOf(user string) (string, error) {
	if _, ok := k.tokens[user]; !ok {
		return k.KubeconfigPath, nil
	}
	return k.KubeconfigFor(user)
}

// AuditedWrite is one write request of a user named in KubeOptions.Users, from the API server's
// audit log.
type AuditedWrite struct {
	User string
	// Verb is create, update, patch, delete or deletecollection.
	Verb string
	// Resource is the resource with its subresource after a slash ("pods/status"), as
	// localworld/kubewrites names it.
	Resource  string
	Namespace string
	// Name is the object's name (for a create, taken from the request's object).
	Name string
	// Code is the API server's answer.
	Code int
	// At is when the API server received the request.
	At time.Time
}

// Key renders the write as "create pods", as localworld/kubewrites does.
func (w AuditedWrite) Key() string { return w.Verb + " " + w.Resource }

// auditEvent is the part of an audit.k8s.io/v1 Event that AuditedWrites reads.
type auditEvent struct {
	Stage string `json:"stage"`
	Verb  string `json:"verb"`
	User  struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestReceived time.Time `json:"requestReceivedTimestamp"`
}

// AuditedWrites returns the writes of KubeOptions.Users (and with AuditServiceAccounts, of
// ServiceAccounts) recorded so far, in the order the API
// server finished them. It needs KubeOptions.AuditWrites.
func (k *Kube) AuditedWrites() ([]AuditedWrite, error) {
	if k.auditLog == "" {
		return nil, errors.New("testworld: the cluster was started without KubeOptions.AuditWrites")
	}
	f, err := os.Open(k.auditLog)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil // nothing written yet
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []AuditedWrite
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	for sc.Scan() {
		var ev auditEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			// The API server may be writing the last line right now; whole lines only.
			continue
		}
		if ev.Stage != "ResponseComplete" || ev.ObjectRef == nil || !slices.Contains(auditedVerbs, ev.Verb) {
			continue
		}
		w := AuditedWrite{
			User: ev.User.Username, Verb: ev.Verb, Resource: ev.ObjectRef.Resource,
			Namespace: ev.ObjectRef.Namespace, Name: ev.ObjectRef.Name, At: ev.RequestReceived,
		}
		if ev.ObjectRef.Subresource != "" {
			w.Resource += "/" + ev.ObjectRef.Subresource
		}
		if ev.ResponseStatus != nil {
			w.Code = ev.ResponseStatus.Code
		}
		out = append(out, w)
	}
	return out, sc.Err()
}
