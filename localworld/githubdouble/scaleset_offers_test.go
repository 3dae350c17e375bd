package githubdouble

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"
)

// The flow ARC v0.27.6's scale-set client uses (Config.ScaleSetJobOffers), driven over HTTP in
// that client's shapes: a personal token sent with Basic authentication to the GHES-style
// /api/v3 REST path, JobAvailable messages, and acquirejobs with the message-queue token.

// arcCall sends one request with an Authorization header and decodes a JSON answer into out.
func arcCall(t *testing.T, method, url, auth string, in, out any) int {
	t.Helper()
	var body bytes.Buffer
	if in != nil {
		if err := json.NewEncoder(&body).Encode(in); err != nil {
			t.Fatal(err)
		}
	}
	req, err := http.NewRequestWithContext(t.Context(), method, url, &body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", auth)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	if out != nil && resp.StatusCode < 300 && resp.StatusCode != http.StatusAccepted && resp.StatusCode != http.StatusNoContent {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatalf("%s %s: decoding: %v", method, url, err)
		}
	}
	return resp.StatusCode
}

// arcSession opens the Actions service as ARC v0.27.6 does (Basic-auth PAT, /api/v3) and opens
// a session of a new set labelled label; it answers the service URL, admin token, set id and
// session.
func arcSession(t *testing.T, w *world, label string) (svc, admin string, setID int64, sess scaleSetSessionJSON) {
	t.Helper()
	basic := "Basic " + base64.StdEncoding.EncodeToString([]byte("github:"+testToken))
	var reg struct{ Token string }
	if st := arcCall(t, "POST", w.URL()+"api/v3/orgs/acme/actions/runners/registration-token", basic, nil, &reg); st != http.StatusCreated {
		t.Fatalf("registration token with Basic auth: %d, want 201", st)
	}
	var conn struct{ URL, Token string }
	in := map[string]string{"url": w.URL() + "acme", "runner_event": "register"}
	if st := arcCall(t, "POST", w.URL()+"api/v3/actions/runner-registration", "RemoteAuth "+reg.Token, in, &conn); st != http.StatusOK {
		t.Fatalf("runner registration: %d", st)
	}
	svc, admin = conn.URL, "Bearer "+conn.Token
	var set scaleSetJSON
	setIn := map[string]any{"name": "arc-" + label, "runnerGroupId": 1, "labels": []map[string]string{{"name": label}}}
	if st := arcCall(t, "POST", svc+"/_apis/runtime/runnerscalesets?api-version=6.0-preview", admin, setIn, &set); st != http.StatusOK {
		t.Fatalf("create set: %d", st)
	}
	url := svc + "/_apis/runtime/runnerscalesets/" + itoa(set.ID) + "/sessions?api-version=6.0-preview"
	if st := arcCall(t, "POST", url, admin, map[string]string{"ownerName": "arc"}, &sess); st != http.StatusOK {
		t.Fatalf("create session: %d", st)
	}
	return svc, admin, set.ID, sess
}

// arcPoll polls the queue until a message comes, deletes it and answers its job messages.
func arcPoll(t *testing.T, sess scaleSetSessionJSON) (messageJSON, []jobMessageJSON) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		var msg messageJSON
		st := arcCall(t, "GET", sess.MessageQueueURL, "Bearer "+sess.MessageQueueAccessToken, nil, &msg)
		if st == http.StatusAccepted {
			continue
		}
		if st != http.StatusOK {
			t.Fatalf("poll: %d", st)
		}
		var jobs []jobMessageJSON
		if err := json.Unmarshal([]byte(msg.Body), &jobs); err != nil {
			t.Fatalf("message body: %v", err)
		}
		del := sess.MessageQueueURL + "/" + itoa(msg.MessageID)
		if st := arcCall(t, "DELETE", del, "Bearer "+sess.MessageQueueAccessToken, nil, nil); st != http.StatusNoContent {
			t.Fatalf("delete message: %d", st)
		}
		return msg, jobs
	}
	t.Fatal("no message came")
	return messageJSON{}, nil
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestScaleSetOfferedJobRunsOnlyOnceAcquired: with job offers a set's listener hears of a job as
// JobAvailable, its runners do not take it until the listener acquires it, and an acquisition
// assigns it (JobAssigned, counted as assigned) exactly once.
func TestScaleSetOfferedJobRunsOnlyOnceAcquired(t *testing.T) {
	w := scaleSetWorld(t, Config{ScaleSetJobOffers: true})
	svc, admin, setID, sess := arcSession(t, w, "arc-offers")
	j, _ := w.QueueJob(JobSpec{Repository: "acme/app", Labels: []string{"self-hosted", "arc-offers"}})

	msg, jobs := arcPoll(t, sess)
	if len(jobs) != 1 || jobs[0].MessageType != jobAvailable || jobs[0].RunnerRequestID != j.ID {
		t.Fatalf("first message = %+v, want JobAvailable for job %d", jobs, j.ID)
	}
	if msg.Statistics.TotalAvailableJobs != 1 || msg.Statistics.TotalAssignedJobs != 0 {
		t.Errorf("statistics before acquisition = %+v, want 1 available, 0 assigned", msg.Statistics)
	}
	var jit struct {
		EncodedJITConfig string `json:"encodedJITConfig"`
	}
	jitURL := svc + "/_apis/runtime/runnerscalesets/" + itoa(setID) + "/generatejitconfig?api-version=6.0-preview"
	if st := arcCall(t, "POST", jitURL, admin, map[string]string{"name": "arc-1"}, &jit); st != http.StatusOK {
		t.Fatalf("generatejitconfig: %d", st)
	}
	runner, err := NewRunnerClient(w.URL()).ConnectJIT(t.Context(), jit.EncodedJITConfig)
	if err != nil {
		t.Fatal(err)
	}
	if got := acquireNow(t, w.Server, runner); got != nil {
		t.Fatalf("the set's runner took job %d before the listener acquired it", got.ID)
	}

	acquirableURL := svc + "/_apis/runtime/runnerscalesets/" + itoa(setID) + "/acquirablejobs?api-version=6.0-preview"
	var acquirable struct {
		Count int                 `json:"count"`
		Value []acquirableJobJSON `json:"value"`
	}
	if st := arcCall(t, "GET", acquirableURL, admin, nil, &acquirable); st != http.StatusOK || acquirable.Count != 1 || acquirable.Value[0].RunnerRequestID != j.ID {
		t.Errorf("acquirablejobs = %d %+v, want job %d", st, acquirable, j.ID)
	}
	acquireURL := svc + "/_apis/runtime/runnerscalesets/" + itoa(setID) + "/acquirejobs?api-version=6.0-preview"
	queueAuth := "Bearer " + sess.MessageQueueAccessToken
	if st := arcCall(t, "POST", acquireURL, admin, []int64{j.ID}, nil); st != http.StatusUnauthorized {
		t.Errorf("acquisition with the admin token: %d, want 401 (it takes the message-queue token)", st)
	}
	var got int64ListJSON
	if st := arcCall(t, "POST", acquireURL, queueAuth, []int64{j.ID, 999999}, &got); st != http.StatusOK || got.Count != 1 || got.Value[0] != j.ID {
		t.Fatalf("acquirejobs = %d %+v, want job %d alone", st, got, j.ID)
	}
	if arcCall(t, "POST", acquireURL, queueAuth, []int64{j.ID}, &got); got.Count != 0 {
		t.Errorf("a second acquisition = %+v, want nothing (acquired already)", got)
	}
	msg, jobs = arcPoll(t, sess)
	if len(jobs) != 1 || jobs[0].MessageType != jobAssigned || msg.Statistics.TotalAssignedJobs != 1 || msg.Statistics.TotalAvailableJobs != 0 {
		t.Errorf("after acquisition: %+v, statistics %+v; want JobAssigned, 1 assigned", jobs, msg.Statistics)
	}
	acquirable.Count, acquirable.Value = 0, nil
	if st := arcCall(t, "GET", acquirableURL, admin, nil, &acquirable); st != http.StatusNoContent || acquirable.Count != 0 {
		t.Errorf("acquirablejobs after acquisition = %d %+v, want 204 (none), as the service answers", st, acquirable)
	}
	if got := acquireNow(t, w.Server, runner); got == nil || got.ID != j.ID {
		t.Fatalf("the set's runner got %+v after acquisition, want job %d", got, j.ID)
	}
}

// TestScaleSetOffersChosenPerSet: one world serves a GHES-like set, offered its jobs, beside a
// github.com-like set, assigned its own, both driven by the official client as runnerflow
// drives it: the offering set's listener hears JobAvailable, acquires the job with its session
// and then hears JobAssigned; the other hears JobAssigned at once.
func TestScaleSetOffersChosenPerSet(t *testing.T) {
	w := scaleSetWorld(t, Config{ScaleSetJobOffersFor: JobOffersFor(ScaleSetKey{Scope: OrgScope("acme"), Name: "GHES"})})
	c, _ := w.scaleSetClient("acme")
	ghes := createSet(t, c, "ghes", "ss-ghes")
	dotcom := createSet(t, c, "dotcom", "ss-dotcom")
	if sets := w.ScaleSets(); !sets[0].JobOffers || sets[1].JobOffers {
		t.Fatalf("sets = %+v, want only ghes offered its jobs", sets)
	}
	offering, assigning := openSession(t, c, ghes.ID, "a"), openSession(t, c, dotcom.ID, "b")
	offered, _ := w.QueueJob(JobSpec{Repository: "acme/app", Labels: []string{"self-hosted", "ss-ghes"}})
	assigned, _ := w.QueueJob(JobSpec{Repository: "acme/app", Labels: []string{"self-hosted", "ss-dotcom"}})

	msg := nextMessage(t, assigning, 0)
	if ids, _, _ := jobIDs(msg); !slices.Equal(ids, []int64{assigned.ID}) || len(msg.JobAvailableMessages) != 0 {
		t.Errorf("assigning set's message: assigned %v, available %d; want job %d assigned", ids, len(msg.JobAvailableMessages), assigned.ID)
	}
	msg = nextMessage(t, offering, 0)
	if len(msg.JobAvailableMessages) != 1 || msg.JobAvailableMessages[0].RunnerRequestID != offered.ID || len(msg.JobAssignedMessages) != 0 ||
		msg.Statistics.TotalAvailableJobs != 1 || msg.Statistics.TotalAssignedJobs != 0 {
		t.Fatalf("offering set's message = %+v (statistics %+v), want job %d available, none assigned", msg, msg.Statistics, offered.ID)
	}
	ack(t, offering, msg)
	got, err := offering.AcquireJobs(t.Context(), []int64{offered.ID})
	if err != nil || !slices.Equal(got, []int64{offered.ID}) {
		t.Fatalf("AcquireJobs = %v, %v; want [%d]", got, err, offered.ID)
	}
	msg = nextMessage(t, offering, msg.MessageID)
	if ids, _, _ := jobIDs(msg); !slices.Equal(ids, []int64{offered.ID}) || msg.Statistics.TotalAssignedJobs != 1 {
		t.Errorf("after acquisition: assigned %v, statistics %+v; want job %d assigned", ids, msg.Statistics, offered.ID)
	}
}

func TestScaleSetOffersChosenPerScope(t *testing.T) {
	w := scaleSetWorld(t, Config{ScaleSetJobOffersFor: JobOffersFor(ScaleSetKey{Scope: OrgScope("solo")})})
	solo, _ := w.scaleSetClient("solo")
	acme, _ := w.scaleSetClient("acme")
	createSet(t, solo, "one")
	createSet(t, solo, "two")
	createSet(t, acme, "three")
	for _, set := range w.ScaleSets() {
		if want := set.Scope == OrgScope("solo"); set.JobOffers != want {
			t.Errorf("set %s of %s offered its jobs: %v, want %v", set.Name, set.Scope, set.JobOffers, want)
		}
	}
}
